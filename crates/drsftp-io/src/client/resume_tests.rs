//! Unit tests of `resume.rs`: the checkpoint format (round trip, corruption, version), and the start decision
//! (resume on the same identity; discard on another size or time, `--no-resume`, a corrupt checkpoint or a part
//! file shorter than its map; `None` while another holder locks the part file) and what dropping leaves behind.

use super::*;

fn id(size: u64, mtime: Option<&str>) -> Identity {
    Identity {
        source: "ftp://127.0.0.1:2811/data/f".into(),
        size,
        mtime: mtime.map(str::to_string),
    }
}

fn checkpoint(size: u64, payload: usize, set: &[u64]) -> Checkpoint {
    let p = TransferParams::new(0, size, payload).unwrap();
    let mut map = Bitmap::new(p.total_packets());
    for &i in set {
        map.set(i);
    }
    Checkpoint {
        id: id(size, Some("20260101120000")),
        payload,
        map,
    }
}

#[test]
fn format_round_trip_and_corruption() {
    let c = checkpoint(10_050, 1000, &[0, 1, 5, 10]);
    let b = c.encode();
    assert!(b.starts_with(b"drsftp-blast-checkpoint 1\nsource ftp://127.0.0.1:2811/data/f\n"));
    assert_eq!(Checkpoint::decode(&b).unwrap(), c);
    assert_eq!(c.held().to_string(), "0-2000,5000-6000,10000-10050");
    let mut none = c.clone();
    none.id.mtime = None;
    assert_eq!(Checkpoint::decode(&none.encode()).unwrap(), none);
    // A flipped map bit, a truncated map, another version, a lying packet count.
    let mut bad = b.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(Checkpoint::decode(&bad).unwrap_err().contains("CRC"));
    assert!(Checkpoint::decode(&b[..b.len() - 1]).is_err());
    let v2 = String::from_utf8_lossy(&b).replace("checkpoint 1", "checkpoint 2");
    assert!(Checkpoint::decode(v2.as_bytes()).is_err());
    let lie = String::from_utf8_lossy(&b).replace("packets 11", "packets 12");
    assert!(Checkpoint::decode(lie.as_bytes()).is_err());
    assert!(Checkpoint::decode(b"").is_err());
}

/// Leaves a part file of `len` bytes and checkpoint `c` for `dest`, as an interrupted download would.
fn leave(dest: &Path, len: u64, c: &Checkpoint) {
    let part = part_path(dest);
    std::fs::write(&part, vec![7u8; len as usize]).unwrap();
    std::fs::write(checkpoint_path(&part), c.encode()).unwrap();
}

#[test]
fn start_decision() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("f.bin");
    let part = part_path(&dest);
    let ck = checkpoint_path(&part);
    assert!(part.ends_with(".f.bin.drsftp-part") && ck.ends_with(".f.bin.drsftp-part.ck"));
    let c = checkpoint(10_050, 1000, &[0, 1, 5]);
    let same = id(10_050, Some("20260101120000"));

    // Same identity: resume, and an interrupted download (no `complete`) keeps both.
    leave(&dest, 10_050, &c);
    let r = Resumable::open(&dest, same.clone(), true).unwrap().unwrap();
    assert_eq!(r.held().to_string(), "0-2000,5000-6000");
    assert!(
        r.notes()[0].contains("3000 of 10050 bytes"),
        "{:?}",
        r.notes()
    );
    // Another holder of the part file: not resumable here.
    assert!(Resumable::open(&dest, same.clone(), true)
        .unwrap()
        .is_none());
    drop(r);
    assert!(part.exists() && ck.exists());

    // Data complete (e.g. then a checksum mismatch): both go.
    let r = Resumable::open(&dest, same.clone(), true).unwrap().unwrap();
    r.complete();
    drop(r);
    assert!(!part.exists() && !ck.exists());

    // Discarded, with a note, and the part file emptied: another size, another time, --no-resume, corrupt,
    // a part file shorter than its map.
    let cases: [(Identity, bool, u64, &str); 4] = [
        (
            id(10_051, Some("20260101120000")),
            true,
            10_050,
            "source changed",
        ),
        (
            id(10_050, Some("20260101120001")),
            true,
            10_050,
            "source changed",
        ),
        (same.clone(), false, 10_050, "--no-resume"),
        (same.clone(), true, 5_500, "shorter"),
    ];
    for (ident, use_existing, len, note) in cases {
        leave(&dest, len, &c);
        let r = Resumable::open(&dest, ident, use_existing)
            .unwrap()
            .unwrap();
        assert!(r.held().is_empty());
        assert!(
            r.notes().iter().any(|n| n.contains(note)),
            "{note}: {:?}",
            r.notes()
        );
        assert_eq!(std::fs::metadata(&part).unwrap().len(), 0);
        assert!(!ck.exists());
        drop(r);
        assert!(!part.exists(), "no checkpoint written: nothing kept");
    }
    leave(&dest, 10_050, &c);
    std::fs::write(&ck, b"drsftp-blast-checkpoint 1\ngarbage").unwrap();
    let r = Resumable::open(&dest, same, true).unwrap().unwrap();
    assert!(r.held().is_empty() && r.notes()[0].contains("corrupt"));
}

#[test]
fn writer_syncs_then_saves_the_last_map() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("g.bin");
    let ident = id(5000, None);
    let r = Resumable::open(&dest, ident.clone(), true)
        .unwrap()
        .unwrap();
    let d = r.destination().unwrap();
    let params = TransferParams::new(1, 5000, 1000).unwrap();
    let rr = r.start(&params, d.handle(), &r.held().clone());
    assert!(rr.from.is_none() && rr.stop.is_some());
    let sink = rr.checkpoints.unwrap();
    d.handle().write_at(&[1u8; 2000], 0).unwrap();
    let mut map = Bitmap::new(5);
    map.set(0);
    map.set(1);
    sink.send(map).unwrap();
    drop(sink);
    drop(d);
    drop(r);
    let part = part_path(&dest);
    let c = Checkpoint::decode(&std::fs::read(checkpoint_path(&part)).unwrap()).unwrap();
    assert_eq!(
        (c.held().to_string(), c.id, c.payload),
        ("0-2000".into(), ident.clone(), 1000)
    );
    // The next run resumes from it, and its receiver starts with those packets.
    let r = Resumable::open(&dest, ident, true).unwrap().unwrap();
    let d = r.destination().unwrap();
    let rr = r.start(&params, d.handle(), &r.held().clone());
    assert_eq!(rr.from.unwrap().count_ones(), 2);
}

#[test]
fn ranges_checkpoint_round_trip_and_corruption() {
    let held: RangeSet = [0..1000, 4096..9000].into_iter().collect();
    let c = RangeCheckpoint {
        id: id(10_050, Some("20260101120000")),
        held,
    };
    let b = c.encode();
    assert!(b.starts_with(b"drsftp-ranges-checkpoint 1\nsource ftp://127.0.0.1:2811/data/f\n"));
    assert!(b.ends_with(b"\n\n0-1000,4096-9000"));
    assert_eq!(RangeCheckpoint::decode(&b).unwrap(), c);
    assert_eq!(decode_any(&b).unwrap(), (c.id.clone(), c.held.clone()));
    // A blast checkpoint reads back as its byte ranges.
    let blast = checkpoint(10_050, 1000, &[0, 10]);
    assert_eq!(
        decode_any(&blast.encode()).unwrap().1.to_string(),
        "0-1000,10000-10050"
    );
    // Edited ranges (CRC), a lying count, ranges past the end, another version, no body end.
    let text = String::from_utf8(b.clone()).unwrap();
    for bad in [
        text.replace("4096-9000", "4096-9001"),
        text.replace("ranges 2", "ranges 3"),
        text.replace("size 10050", "size 8000"),
        text.replace("checkpoint 1", "checkpoint 2"),
        text.replace("\n\n", "\n"),
    ] {
        assert!(decode_any(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn tcp_writer_saves_written_ranges_and_resumes_from_them() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t.bin");
    let ident = id(1 << 20, None);
    let r = Resumable::open(&dest, ident.clone(), true)
        .unwrap()
        .unwrap();
    let d = r.destination().unwrap();
    let progress = Arc::new(Progress::new());
    r.start_ranges(d.handle(), progress.clone());
    d.handle().write_at(&[3u8; 4096], 8192).unwrap();
    progress.add(8192..12288);
    // Dropped mid-download (an error): the final checkpoint holds what was written; the part file stays.
    drop(d);
    drop(r);
    let ck = checkpoint_path(&part_path(&dest));
    let c = RangeCheckpoint::decode(&std::fs::read(&ck).unwrap()).unwrap();
    assert_eq!(
        (c.id, c.held.to_string()),
        (ident.clone(), "8192-12288".into())
    );
    // The next run holds those bytes; what it adds is saved on top; `complete` removes both files.
    let r = Resumable::open(&dest, ident, true).unwrap().unwrap();
    assert_eq!(r.held().to_string(), "8192-12288");
    let d = r.destination().unwrap();
    let progress = Arc::new(Progress::new());
    r.start_ranges(d.handle(), progress.clone());
    d.handle().write_at(&[4u8; 8192], 0).unwrap();
    progress.add(0..8192);
    let t0 = std::time::Instant::now();
    while RangeCheckpoint::decode(&std::fs::read(&ck).unwrap())
        .unwrap()
        .held
        .to_string()
        != "0-12288"
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no periodic checkpoint"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    r.complete();
    drop(d);
    drop(r);
    assert!(!ck.exists() && !part_path(&dest).exists());
}
