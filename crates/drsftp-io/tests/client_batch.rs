//! Pipelined batch downloads (`Client::download_batch`, what `drsftp copy -r` uses for small files) against
//! drsftp serve (in process) and Debian's globus-gridftp-server: every file arrives identical and verified, one
//! MODE E data connection carries all files of two batches (the server keeps it between files, GFD.20 EOD
//! without close), and a file missing in the middle of a batch fails alone with the server's refusal and leaves no
//! part file. When globus-gridftp-server is not installed its test prints why and returns.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{BatchFile, Client, ClientOptions};
use drsftp_io::data::Progress;
use drsftp_testkit::data::{chmod, random_file, sha256_file};
use drsftp_testkit::globus;
use drsftp_testkit::server::TestServer;

/// Sizes of the files: empty, tiny, around one MODE E block, 64 KiB and past it.
const SIZES: [usize; 6] = [0, 1, 1000, 64 << 10, 256 << 10, 300_001];

/// Writes 30 files into `src` and returns their names; name 10 is never written (missing on the server).
fn make_files(src: &Path) -> Vec<String> {
    std::fs::create_dir_all(src).unwrap();
    chmod(src, 0o755);
    (0..30)
        .map(|i| {
            let name = format!("f{i:02}");
            if i != 10 {
                let p = src.join(&name);
                random_file(&p, SIZES[i % SIZES.len()], i as u64);
                chmod(&p, 0o644);
            }
            name
        })
        .collect()
}

/// Two batches (files 0-19 with the missing one, then 20-29) from `remote_dir` (the server's path of `src`) into
/// `out` on one session; checks every file, the missing one's refusal, leftovers and the data connection count.
async fn two_batches(c: &mut Client, remote_dir: &str, src: &Path, out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let names = make_files(src);
    let files: Vec<BatchFile> = names
        .iter()
        .enumerate()
        .map(|(i, n)| BatchFile {
            remote: format!("{remote_dir}/{n}"),
            local: out.join(n),
            size: (i != 10).then(|| SIZES[i % SIZES.len()] as u64),
            mtime: None,
        })
        .collect();
    let o = ClientOptions::default();
    let mut results = c
        .download_batch(&files[..20], &o, Arc::new(Progress::new()))
        .await;
    assert!(c.is_idle(), "a missing file does not break the session");
    results.extend(
        c.download_batch(&files[20..], &o, Arc::new(Progress::new()))
            .await,
    );
    assert_eq!(results.len(), 30);
    for (i, r) in results.iter().enumerate() {
        if i == 10 {
            let e = r.as_ref().expect_err("the missing file fails");
            // drsftp serve says 550, Globus 500 ("Unable to open file").
            assert!(e.reply_code().is_some_and(|c| c >= 500), "{e}");
            assert!(!out.join(&names[i]).exists());
            continue;
        }
        let s = r.as_ref().unwrap_or_else(|e| panic!("{}: {e}", names[i]));
        assert!(s.verified, "{}: {s:?}", names[i]);
        assert_eq!(s.bytes, SIZES[i % SIZES.len()] as u64);
        assert_eq!(
            sha256_file(&out.join(&names[i])),
            sha256_file(&src.join(&names[i])),
            "{}",
            names[i]
        );
    }
    let left: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("drsftp-part"))
        .collect();
    assert!(left.is_empty(), "part files left: {left:?}");
    assert_eq!(
        c.batch_connections(),
        1,
        "one data connection carried 29 files in two batches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_from_drsftp_serve_reuse_one_data_connection() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let srv = TestServer::serve(&root).await;
    let mut c = srv.login().await;
    two_batches(&mut c, "/t", &root.join("t"), &dir.path().join("out")).await;
    // The session still moves a file the ordinary way afterwards (its own data channel).
    let one = dir.path().join("one");
    c.download(
        "/t/f03",
        &one,
        &ClientOptions::default(),
        Arc::new(Progress::new()),
    )
    .await
    .expect("a plain download after the batches");
    assert_eq!(sha256_file(&one), sha256_file(&root.join("t/f03")));
    assert_eq!(c.batch_connections(), 0, "the batch channel was given up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_from_globus_reuse_one_data_connection() {
    let Some((dir, srv)) = globus::start_in_tempdir(
        "batches_from_globus_reuse_one_data_connection",
        "drsftp-batch-",
        &[],
    ) else {
        return;
    };
    chmod(dir.path(), 0o755);
    let src = dir.path().join("src");
    let mut c = Client::connect(&srv.authority(), "anonymous", "x", Duration::from_secs(30))
        .await
        .expect("login to globus-gridftp-server");
    // The server's home is `/`: its path of `src` is the host path.
    let remote = src.to_string_lossy().into_owned();
    two_batches(&mut c, &remote, &src, &dir.path().join("out")).await;
    drop(c);
    srv.settle();
}
