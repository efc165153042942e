//! What the final reply to each kind of command ([`Kind`]) does to the running operation: the state it sets
//! (TYPE, MODE, DRS, blast channel, report fields), the steps it inserts (SBUF after a refused buffer size, EPSV
//! after a refused PASV), the driver events it asks for, and whether it ends the operation. The session
//! (`session.rs`) has already matched the reply to its command (the head of the in-flight queue, `pipeline.rs`).

use super::addr::{parse_epsv, parse_pasv, parse_spas};
use super::blast::{self, BlastNeg};
use super::feat::Features;
use super::plan::{Kind, Step};
use super::reply::Reply;
use super::session::{mask, ClientSession, Phase};
use super::types::*;

impl ClientSession {
    /// Applies the final reply to `cmd`. `None`: the operation goes on; `Some(result)`: it ends with `result`.
    pub(super) fn answer(
        &mut self,
        cmd: String,
        kind: Kind,
        reply: Reply,
    ) -> Option<Result<Outcome, ClientError>> {
        let drsftp = self.greeted_by_drsftp();
        let run = self.current.as_mut()?;
        let refused = |reply: Reply| ClientError::Refused {
            command: mask(&cmd),
            reply,
        };
        match kind {
            Kind::BatchRetr(_) | Kind::BatchCksm(_) | Kind::BatchStor(_) | Kind::BatchMfmt(_) => {
                self.answer_batch(kind, reply)
            }
            Kind::User => match reply.code {
                230 => {
                    // Logged in without a password: drop the PASS step, or ignore its reply if it was pipelined.
                    run.steps.retain(|s| !matches!(s, Step::Cmd(_, Kind::Pass)));
                    run.pass_moot = run.inflight.iter().any(|(_, k)| *k == Kind::Pass);
                }
                331 => {}
                _ => return Some(Err(refused(reply))),
            },
            Kind::Pass => {
                if !run.pass_moot && !matches!(reply.code, 230 | 202) {
                    return Some(Err(refused(reply)));
                }
            }
            Kind::Feat => {
                let f = Features::parse(&reply);
                self.features = f.clone();
                // Commands meant to ride behind FEAT that did not (not a pipelined login) are not sent now.
                run.steps
                    .retain(|s| !matches!(s, Step::Cmd(_, Kind::AfterLogin)));
                if !run.inflight.iter().any(|(_, k)| *k == Kind::AfterLogin) {
                    return Some(Ok(Outcome::LoggedIn(f)));
                }
            }
            Kind::AfterLogin => {
                run.replies.push(reply);
                if run.inflight.is_empty() && run.steps.is_empty() {
                    self.after_login_replies = std::mem::take(&mut run.replies);
                    return Some(Ok(Outcome::LoggedIn(self.features.clone())));
                }
            }
            Kind::TypeI => {
                if !reply.is_ok() {
                    return Some(Err(refused(reply)));
                }
                self.type_image = true;
            }
            Kind::Mode(m) => {
                if !reply.is_ok() {
                    return Some(Err(refused(reply)));
                }
                self.mode = Some(m);
            }
            Kind::Buffer { sbuf_fallback } => {
                if reply.is_ok() {
                    run.report.buffer_command = Some(cmd.clone());
                } else if let Some(n) = sbuf_fallback {
                    run.steps.push_front(Step::Cmd(
                        format!("SBUF {n}"),
                        Kind::Buffer {
                            sbuf_fallback: None,
                        },
                    ));
                } else {
                    let n = format!("server refused buffer size: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::OptsRetr => {
                if reply.is_ok() {
                    run.report.parallelism_accepted = true;
                } else {
                    let n = format!("server refused `{cmd}`: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::OptsDrs(on) => {
                if reply.is_ok() {
                    self.drs.on = on;
                    self.drs_unsure = false;
                } else {
                    let n = format!("server refused `{cmd}`: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::OptsBlast => match blast::parse_opts_reply(&reply) {
                Some(rate) if reply.is_ok() => {
                    if let Some(b) = run.blast.as_mut() {
                        b.rate = rate;
                    }
                }
                _ => return Some(Err(refused(reply))),
            },
            Kind::Bpas => match blast::parse_bpas_reply(&reply, self.peer_ip) {
                Some(server) => {
                    if let Some(b) = run.blast.as_mut() {
                        b.server = Some(server);
                    }
                }
                None if reply.is_ok() => {
                    return Some(Err(ClientError::BadReply {
                        command: cmd,
                        reply,
                    }));
                }
                None => return Some(Err(refused(reply))),
            },
            Kind::Allo | Kind::Peer => {
                if !reply.is_ok() {
                    let n = format!("server refused `{cmd}`: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::Rest { required } => {
                if reply.code != 350 && required {
                    return Some(Err(refused(reply)));
                }
                if reply.code != 350 {
                    let n = format!("server refused `{cmd}` (not resuming there): {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::Port => {
                if !reply.is_ok() {
                    return Some(Err(refused(reply)));
                }
            }
            Kind::Spas { upload } => {
                let addrs = match parse_spas(&reply) {
                    Some(a) => a,
                    None if reply.is_ok() => {
                        return Some(Err(ClientError::BadReply {
                            command: cmd,
                            reply,
                        }));
                    }
                    None => {
                        // Not striped after all: today's PORT (download, the Listen step is next) or PASV.
                        let n = format!("server refused `{cmd}` (not striping): {reply}");
                        run.report.notices.push(n.clone());
                        self.events.push_back(Event::Notice(n));
                        if upload {
                            run.steps.push_front(Step::Cmd("PASV".into(), Kind::Pasv));
                        }
                        return None;
                    }
                };
                run.stripes = addrs.len();
                if addrs.len() > 1 {
                    // A striped endpoint's CKSM may be computed by its movers while the tail of the data is
                    // still in flight from them: the final check waits for the data, as a command of its own.
                    run.steps.retain(|s| {
                        !matches!(s, Step::Cmd(_, Kind::TrailingCksm | Kind::TrailingSize))
                    });
                }
                match (upload, addrs.len()) {
                    (true, 1) => {
                        run.parked = Some(Step::DataReady);
                        self.deadline = None;
                        self.events.push_back(Event::Connect {
                            addr: addrs[0],
                            streams: run.streams,
                        });
                    }
                    (true, _) => {
                        run.parked = Some(Step::DataReady);
                        self.deadline = None;
                        self.events.push_back(Event::ConnectStriped {
                            addrs,
                            streams: run.streams,
                        });
                    }
                    (false, 1) => {}
                    (false, _) => {
                        for s in run.steps.iter_mut() {
                            if *s == Step::Listen {
                                *s = Step::ListenStriped;
                            }
                        }
                        run.stripe_peers = addrs;
                    }
                }
            }
            Kind::Pasv | Kind::Epsv => {
                let addr = if kind == Kind::Pasv {
                    parse_pasv(&reply)
                } else {
                    self.peer_ip.and_then(|ip| parse_epsv(&reply, ip))
                };
                match addr {
                    Some(addr) => {
                        // A drsftp server takes the transfer command while the data connection is still being
                        // made (it accepts on its listener until the data timeout): the command goes out now,
                        // and the driver connects once it has sent it, one round trip less per upload, stream
                        // transfer and listing. Other servers, and batches (their own gates), wait for it.
                        if !(self.features.drs() && run.batch.is_none()) {
                            run.parked = Some(Step::DataReady);
                            self.deadline = None;
                        }
                        self.events.push_back(Event::Connect {
                            addr,
                            streams: run.streams,
                        });
                    }
                    None if reply.is_ok() => {
                        return Some(Err(ClientError::BadReply {
                            command: cmd,
                            reply,
                        }));
                    }
                    None if kind == Kind::Pasv && self.peer_ip.is_some() => {
                        run.steps.push_front(Step::Cmd("EPSV".into(), Kind::Epsv));
                    }
                    None => return Some(Err(refused(reply))),
                }
            }
            Kind::Transfer { listing } => {
                if !reply.is_ok() {
                    return Some(Err(refused(reply)));
                }
                if listing {
                    return Some(Ok(Outcome::Listed(reply)));
                }
                run.report.drs_negotiated = self.drs.on;
                run.report.blast = run.blast.as_ref().and_then(BlastNeg::channel);
                if run.head_is(|k| matches!(k, Kind::TrailingSize | Kind::TrailingCksm)) {
                    // Its SIZE and CKSM come next and end the operation; the caller may stop its clock now.
                    self.events.push_back(Event::TransferReplied(reply.clone()));
                    run.report.final_reply = Some(reply);
                    return None;
                }
                run.report.final_reply = Some(reply);
                let report = std::mem::take(&mut run.report);
                return Some(Ok(Outcome::Transferred(report)));
            }
            Kind::TrailingSize => {
                let n = (reply.code == 213)
                    .then(|| reply.text().trim().parse().ok())
                    .flatten();
                run.report.size = Some(Box::new(n.ok_or(reply)));
                if run.head_is(|k| k == Kind::TrailingCksm) {
                    return None;
                }
                let report = std::mem::take(&mut run.report);
                return Some(Ok(Outcome::Transferred(report)));
            }
            Kind::TrailingCksm => {
                let hex = digest_of(&reply);
                run.report.checksum = Some(Box::new(hex.ok_or(reply)));
                let report = std::mem::take(&mut run.report);
                return Some(Ok(Outcome::Transferred(report)));
            }
            Kind::Size => {
                if reply.code != 213 {
                    return Some(Err(refused(reply)));
                }
                return Some(match reply.text().trim().parse() {
                    Ok(n) => Ok(Outcome::Size(n)),
                    Err(_) => Err(ClientError::BadReply {
                        command: cmd,
                        reply,
                    }),
                });
            }
            Kind::Cksm => {
                if reply.code != 213 {
                    return Some(Err(refused(reply)));
                }
                return Some(match digest_of(&reply) {
                    Some(hex) => Ok(Outcome::Checksum(hex)),
                    None => Err(ClientError::BadReply {
                        command: cmd,
                        reply,
                    }),
                });
            }
            Kind::Piped => {
                run.replies.push(reply);
                if run.inflight.is_empty() && run.steps.is_empty() {
                    return Some(Ok(Outcome::Replies(std::mem::take(&mut run.replies))));
                }
            }
            Kind::Raw => {
                if reply.is_error() {
                    return Some(Err(refused(reply)));
                }
                return Some(Ok(Outcome::Reply(reply)));
            }
            Kind::Quit => {
                self.phase = Phase::Dead;
                return Some(Ok(Outcome::Closed));
            }
            Kind::Auth {
                require,
                protect_data,
            } => {
                // AUTH TLS goes out first, without a FEAT to look for it (one round trip less per session; the
                // FEAT after login says what else the server does). A busy server's 421 is its own error, to be
                // retried; any other refusal means no TLS here.
                if reply.code == 421 {
                    return Some(Err(refused(reply)));
                }
                if reply.code != 234 {
                    if require {
                        // Nothing more may go out on this connection: not USER, not PASS in cleartext.
                        self.die(ClientError::TlsNotOffered);
                        return None;
                    }
                    return Some(Ok(Outcome::Secured(false)));
                }
                // Anything already behind the 234 arrived before the handshake: it is not protected, and
                // reading it after the upgrade would let an attacker inject replies (RFC 4217 §15).
                if self.reader.buffered() > 0 {
                    self.die(ClientError::TlsInjected);
                    return None;
                }
                run.steps.push_back(Step::StartTls);
                if protect_data && drsftp {
                    // PBSZ and PROT ride with the next operation (the login) in its first write: the operation
                    // ends with the handshake (`handle_tls_started`), two round trips less. Data connections are
                    // TLS from now on; a refused PROT fails that operation before any data moves.
                    self.prot_pending = true;
                } else if protect_data {
                    run.steps.push_back(Step::Cmd("PBSZ 0".into(), Kind::Pbsz));
                    run.steps.push_back(Step::Cmd("PROT P".into(), Kind::Prot));
                } else {
                    // No PBSZ/PROT to follow: the operation ends after the handshake (`handle_tls_started`).
                    run.steps.push_back(Step::Cmd("NOOP".into(), Kind::Prot));
                }
            }
            Kind::Pbsz => {
                if !reply.is_ok() {
                    return Some(Err(refused(reply)));
                }
            }
            Kind::Prot => {
                if !reply.is_ok() {
                    return Some(Err(refused(reply)));
                }
                // It ends `Op::Secure`; at the head of another operation (`prot_pending`) that one goes on.
                if run.steps.is_empty() && run.inflight.is_empty() {
                    return Some(Ok(Outcome::Secured(true)));
                }
            }
        }
        None
    }
}

/// The digest in a `213` CKSM reply, lower-case; `None` for any other reply or a malformed one.
pub(super) fn digest_of(reply: &Reply) -> Option<String> {
    let hex = reply
        .text()
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    (reply.code == 213 && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some(hex)
}
