//! Tests of the pipelined ABOR a `--transport auto` switch uses ([`ClientSession::abort_and_go_on`]): the blast
//! set-up leaves in the same write as ABOR, the aborted transfer's replies are swallowed in every order a server
//! may send them (426 then 226; the transfer's own 226 that raced ABOR; the trailing CKSM answered before or
//! after ABOR; a refused CKSM), the trailing CKSM's digest is kept, and a refused BPAS behind it fails only the
//! blast operation.

use super::script_tests::{tcp_spec, Scripted, GLOBUS_FEAT};
use super::*;

const FEAT: &str =
    "211-Extensions supported:\n SIZE\n PARALLEL\n DRS\n CKSM CRC32C;SHA256;\n BLAST BPRT\n211 End.\n";

fn tcp_download() -> TransferSpec {
    tcp_spec(Direction::Download, "/f", TransferMode::Extended, 4)
}

fn blast_download() -> TransferSpec {
    TransferSpec {
        mode: TransferMode::Stream,
        streams: 1,
        transport: Transport::Blast(BlastRequest::default()),
        ..tcp_download()
    }
}

/// A TCP download with its CKSM pipelined behind RETR, running (150 seen), then switched: ABOR without waiting
/// and the blast operation started. Returns what went out in the switch's write.
fn switched(h: &mut Scripted) -> Vec<String> {
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Transfer(tcp_download()));
    let mut sent = h.sent();
    h.reply("200 Type set to I.\n200 Mode set to E.\n200 OPTS Command Successful.\n");
    h.events();
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    sent.extend(h.sent());
    assert_eq!(
        &sent[sent.len() - 3..],
        ["PORT 127,0,0,1,235,41", "RETR /f", "CKSM CRC32C 0 -1 /f"]
    );
    h.reply("200 PORT Command successful.\n125 Beginning MODE E transfer.\n");
    h.events();
    assert!(h.s.abort_and_go_on(h.now));
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    assert!(!h.s.is_busy(), "the operation ended at once");
    h.start(Op::Transfer(blast_download()));
    assert_eq!(h.events(), vec![Event::BlastBind]);
    h.s.handle_blast_bound(h.now, "127.0.0.1:40000".parse().unwrap());
    h.sent()
}

const BLAST_REPLIES: &str = "200 OPTS BLAST MTU=1500;Rate=0;\n\
    229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=00000000000000ff\n\
    150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1436;).\n";

fn blast_started(h: &mut Scripted) {
    assert!(
        matches!(&h.events()[..], [Event::TransferStarted(r)] if r.code == 150),
        "the blast transfer starts on its own 150"
    );
    assert_eq!(h.s.blast_channel().map(|c| c.transfer_id), Some(0xff));
}

#[test]
fn abor_and_the_blast_setup_leave_in_one_write() {
    let mut h = Scripted::login(FEAT);
    let sent = switched(&mut h);
    assert_eq!(
        sent,
        [
            "ABOR",
            "OPTS BLAST MTU=1500;Rate=0;",
            "BPAS 127,0,0,1,156,64",
            "RETR /f"
        ],
        "no round trip between ABOR and the blast RETR"
    );
    // 426 for RETR, 226 for ABOR, the CKSM queued behind RETR, then the blast set-up's replies.
    h.reply(&format!(
        "426 Transfer aborted.\n226 Abort successful.\n213 0a1b2c3d\n{BLAST_REPLIES}"
    ));
    blast_started(&mut h);
    assert_eq!(
        h.s.take_late_checksum(),
        Some(("CKSM CRC32C 0 -1 /f".to_string(), "0a1b2c3d".to_string()))
    );
    assert_eq!(h.s.take_late_checksum(), None, "taken once");
    h.reply("226 Transfer complete.\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Done(Outcome::Transferred(_))]
    ));
}

#[test]
fn a_transfer_that_ended_before_abor_arrived() {
    // The server finished RETR and answered the CKSM before it read ABOR; ABOR then gets a bare 226.
    let mut h = Scripted::login(FEAT);
    switched(&mut h);
    h.reply("226 Transfer complete.\n213 cafef00d\n226 Abort successful.\n");
    assert_eq!(
        h.events(),
        vec![],
        "all three belong to the aborted operation"
    );
    h.reply(BLAST_REPLIES);
    blast_started(&mut h);
    assert_eq!(
        h.s.take_late_checksum().map(|c| c.1),
        Some("cafef00d".into())
    );
}

#[test]
fn a_refused_trailing_cksm_leaves_no_digest() {
    let mut h = Scripted::login(FEAT);
    switched(&mut h);
    h.reply("426 Transfer aborted.\n226 Abort successful.\n550 No such file.\n");
    assert_eq!(h.s.take_late_checksum(), None);
    h.reply(BLAST_REPLIES);
    blast_started(&mut h);
    assert_eq!(h.s.take_late_checksum(), None);
}

#[test]
fn a_digest_not_yet_arrived_is_kept_for_later() {
    let mut h = Scripted::login(FEAT);
    switched(&mut h);
    h.reply("426 Transfer aborted.\n");
    assert_eq!(h.s.take_late_checksum(), None, "not yet");
    h.reply("226 Abort successful.\n213 0a1b2c3d\n");
    assert_eq!(
        h.s.take_late_checksum().map(|c| c.1),
        Some("0a1b2c3d".into())
    );
}

#[test]
fn a_refused_bpas_behind_the_pipelined_abor_fails_only_the_blast_operation() {
    let mut h = Scripted::login(FEAT);
    switched(&mut h);
    h.reply(
        "426 Transfer aborted.\n226 Abort successful.\n213 0a1b2c3d\n\
         200 OPTS BLAST MTU=1500;Rate=0;\n504 Bad address.\n",
    );
    assert!(matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(504)));
    // The blast RETR's 425 is swallowed; a TCP transfer that resumes gets its own replies.
    h.start(Op::Size("/f".into()));
    assert_eq!(h.sent(), ["SIZE /f"]);
    h.reply("425 Use BPAS or PASV first.\n");
    assert_eq!(h.events(), vec![]);
    h.reply("213 5000\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(5000))]);
    assert_eq!(
        h.s.take_late_checksum().map(|c| c.1),
        Some("0a1b2c3d".into())
    );
}

#[test]
fn other_servers_get_an_abor_that_waits() {
    let mut h = Scripted::login(GLOBUS_FEAT);
    h.start(Op::Transfer(TransferSpec {
        drs: false,
        ..tcp_download()
    }));
    // One command at a time: answer the set-up until the session asks for a data listener.
    while h.sent_one().is_some() {
        h.reply("200 ok\n");
    }
    h.events();
    assert!(!h.s.abort_and_go_on(h.now), "not a drsftp server");
    assert_eq!(h.sent(), Vec::<String>::new(), "nothing sent");
}

#[test]
fn abort_and_go_on_before_the_transfer_command_fails_at_once() {
    let mut h = Scripted::login(FEAT);
    h.start(Op::Transfer(tcp_download()));
    h.sent();
    assert!(h.s.abort_and_go_on(h.now));
    assert_eq!(
        h.events(),
        vec![Event::Listen, Event::Failed(ClientError::Aborted)]
    );
    assert_eq!(h.sent(), Vec::<String>::new(), "no ABOR before RETR");
}
