//! Pipelined batch uploads (`Client::upload_batch`, what `drsftp copy -r` uses for small local files) against
//! drsftp serve (in process) and Debian's globus-gridftp-server: every file lands identical and verified by CKSM
//! with its modification time kept (MFMT), one MODE E data connection carries every file of two batches (the
//! server keeps it between files: EOF/EOD without close), and a file the server refuses fails with the server's
//! reply while no other file gets its bytes. When globus-gridftp-server is not installed its test prints why and
//! returns.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{Client, ClientOptions, UploadFile};
use drsftp_io::data::Progress;
use drsftp_testkit::data::{chmod, mtime, random_file, set_mtime, sha256_file};
use drsftp_testkit::globus;
use drsftp_testkit::server::TestServer;

/// Sizes of the files: empty, tiny, around one MODE E block, 64 KiB and past it.
const SIZES: [usize; 6] = [0, 1, 1000, 64 << 10, 256 << 10, 300_001];
const N: usize = 30;
/// The file whose destination the server refuses: its parent on the server is a regular file.
const REFUSED: usize = 10;

/// Writes the local files (names with a space and unicode) and returns them with their destinations under
/// `remote_dir`; file [`REFUSED`] goes below `remote_dir/blocker`, a file on the server.
fn make_files(src: &Path, remote_dir: &str) -> Vec<UploadFile> {
    std::fs::create_dir_all(src).unwrap();
    (0..N)
        .map(|i| {
            let name = format!("f {i:02} ü");
            let p = src.join(&name);
            random_file(&p, SIZES[i % SIZES.len()], i as u64);
            chmod(&p, 0o644);
            set_mtime(&p, 1_600_000_000 + i as u64 * 60);
            let remote = if i == REFUSED {
                format!("{remote_dir}/blocker/{name}")
            } else {
                format!("{remote_dir}/{name}")
            };
            UploadFile {
                local: p,
                remote,
                mtime: Some(1_600_000_000 + i as i64 * 60),
            }
        })
        .collect()
}

/// File `i` arrived whole at `on_server` (the server's file), verified, with its time.
fn check_landed(
    files: &[UploadFile],
    i: usize,
    r: &Result<drsftp_io::client::TransferSummary, drsftp_io::client::ClientError>,
    on_server: &Path,
) {
    let s = r
        .as_ref()
        .unwrap_or_else(|e| panic!("{}: {e}", files[i].remote));
    assert!(s.verified, "{}: {s:?}", files[i].remote);
    assert_eq!(s.bytes, SIZES[i % SIZES.len()] as u64);
    assert_eq!(
        sha256_file(on_server),
        sha256_file(&files[i].local),
        "{}",
        files[i].remote
    );
    assert_eq!(
        mtime(on_server),
        mtime(&files[i].local),
        "{}",
        files[i].remote
    );
}

/// Files 0-19 (without the refused one), then 20-29, on one session: all land, one data connection.
async fn two_clean_batches(c: &mut Client, files: &[UploadFile], server_dir: &Path) {
    let o = ClientOptions::default();
    let first: Vec<UploadFile> = files[..20]
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != REFUSED)
        .map(|(_, f)| f.clone())
        .collect();
    let r1 = c.upload_batch(&first, &o, Arc::new(Progress::new())).await;
    assert!(c.is_idle());
    let r2 = c
        .upload_batch(&files[20..], &o, Arc::new(Progress::new()))
        .await;
    for (k, i) in (0..20).filter(|i| *i != REFUSED).enumerate() {
        let name = Path::new(&files[i].remote).file_name().unwrap();
        check_landed(files, i, &r1[k], &server_dir.join(name));
    }
    for i in 20..N {
        let name = Path::new(&files[i].remote).file_name().unwrap();
        check_landed(files, i, &r2[i - 20], &server_dir.join(name));
    }
    assert_eq!(
        c.upload_connections(),
        1,
        "one data connection carried 29 files in two batches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_batches_to_drsftp_serve_reuse_one_data_connection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("t")).unwrap();
    std::fs::write(root.join("t/blocker"), b"a file, not a directory").unwrap();
    let srv = TestServer::serve(&root).await;
    let files = make_files(&dir.path().join("src"), "/t");
    let mut c = srv.login().await;
    two_clean_batches(&mut c, &files, &root.join("t")).await;

    // The refused file in the middle of a batch: drsftp serve opens a STOR's file before its 150, so it refuses
    // this one (550) before any data was due. Only that file fails; the batch carries on over the same data
    // connection, every other file lands whole, and the session stays usable.
    std::fs::remove_dir_all(root.join("t")).unwrap();
    std::fs::create_dir_all(root.join("t")).unwrap();
    std::fs::write(root.join("t/blocker"), b"a file, not a directory").unwrap();
    let mut c = srv.login().await;
    let r = c
        .upload_batch(
            &files[..20],
            &ClientOptions::default(),
            Arc::new(Progress::new()),
        )
        .await;
    let e = r[REFUSED].as_ref().expect_err("the refused file fails");
    assert!(e.reply_code().is_some_and(|c| c >= 500), "{e}");
    for (i, r) in r.iter().enumerate() {
        if i == REFUSED {
            continue;
        }
        let name = Path::new(&files[i].remote).file_name().unwrap();
        check_landed(&files, i, r, &root.join("t").join(name));
    }
    assert!(
        c.is_idle(),
        "a file refused before its 150 leaves the session usable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_batches_to_globus_reuse_one_data_connection() {
    let Some((dir, srv)) = globus::start_in_tempdir(
        "upload_batches_to_globus_reuse_one_data_connection",
        "drsftp-upbatch-",
        &[],
    ) else {
        return;
    };
    chmod(dir.path(), 0o777);
    let dst = dir.path().join("dst");
    std::fs::create_dir_all(&dst).unwrap();
    chmod(&dst, 0o777);
    std::fs::write(dst.join("blocker"), b"a file, not a directory").unwrap();
    // The server's home is `/`: its path of `dst` is the host path.
    let remote = dst.to_string_lossy().into_owned();
    let files = make_files(&dir.path().join("src"), &remote);
    let mut c = Client::connect(&srv.authority(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login to globus-gridftp-server");
    // globus-gridftp-server 13 answers 550 to non-ASCII paths: ASCII names here.
    let files: Vec<UploadFile> = files
        .into_iter()
        .map(|mut f| {
            f.remote = f.remote.replace(" ü", "");
            f
        })
        .collect();
    two_clean_batches(&mut c, &files, &dst).await;
    // Globus refuses a STOR below a regular file before any 150: that file fails alone, the batch goes on.
    let r = c
        .upload_batch(
            &files[..20],
            &ClientOptions::default(),
            Arc::new(Progress::new()),
        )
        .await;
    for (i, r) in r.iter().enumerate() {
        if i == REFUSED {
            let e = r.as_ref().expect_err("the refused file fails");
            assert!(e.reply_code().is_some_and(|c| c >= 500), "{e}");
        } else {
            let name = Path::new(&files[i].remote).file_name().unwrap();
            check_landed(&files, i, r, &dst.join(name));
        }
    }
    assert!(c.is_idle(), "a refusal before 150 does not break the batch");
    drop(c);
    srv.settle();
}
