//! The kernel-side stream-mode path (`sendfile`/`splice`, `DataOpts::zero_copy`) is taken by whichever end asks
//! for it and by no other: a server whose options ask moves its downloads and uploads through the kernel (its
//! `drsftp_kernel_copied_bytes_total`), a client whose `ClientOptions` ask does so for its own side
//! (`Progress::kernel_copied`), and the other end keeps copying. Real files on both ends, loopback sockets.

use std::path::Path;
use std::sync::Arc;

use drsftp_io::client::{Client, ClientOptions};
use drsftp_io::data::{DataOpts, Progress, ZeroCopy};
use drsftp_io::server::{Metrics, ServerParams};
use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::{fs_params, TestServer};

/// Bytes moved each way: several 256 KiB chunks and a ragged end.
const SIZE: usize = (3 << 20) + 4097;

/// The server's kernel-copied counter as its metrics page shows it.
fn kernel_metric(m: &Metrics) -> u64 {
    let page = m.render();
    page.lines()
        .find_map(|l| l.strip_prefix("drsftp_kernel_copied_bytes_total "))
        .unwrap_or_else(|| panic!("no kernel_copied counter in\n{page}"))
        .parse()
        .unwrap()
}

/// A server over `root` whose data options ask for `zero_copy`, counting into `metrics`.
async fn server(root: &Path, zero_copy: ZeroCopy, metrics: &Arc<Metrics>) -> TestServer {
    let mut params: ServerParams = fs_params(root);
    params.data = DataOpts {
        zero_copy,
        ..params.data
    };
    params.ops.metrics = Some(metrics.clone());
    TestServer::start(params).await
}

/// A stream-mode download of `/src.bin` and an upload back as `/up.bin`, with the client's `zero_copy`; the
/// client's kernel-copied counts of each. Both files arrive intact.
async fn round_trip(c: &mut Client, root: &Path, zero_copy: ZeroCopy) -> (u64, u64) {
    let data = random_bytes(SIZE, 7);
    std::fs::write(root.join("src.bin"), &data).unwrap();
    let local = tempfile::tempdir().unwrap();
    let opts = ClientOptions {
        zero_copy,
        ..ClientOptions::default()
    };
    let down = Arc::new(Progress::new());
    let dst = local.path().join("down.bin");
    let s = c
        .download("/src.bin", &dst, &opts, down.clone())
        .await
        .expect("download");
    assert_eq!(s.bytes, SIZE as u64);
    assert!(std::fs::read(&dst).unwrap() == data, "download differs");
    let up = Arc::new(Progress::new());
    c.upload(&dst, "/up.bin", &opts, up.clone())
        .await
        .expect("upload");
    assert!(
        std::fs::read(root.join("up.bin")).unwrap() == data,
        "upload differs"
    );
    (down.kernel_copied(), up.kernel_copied())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_asked_for_the_kernel_path_takes_it_both_ways() {
    let root = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::new());
    let srv = server(root.path(), ZeroCopy::BOTH, &metrics).await;
    let mut c = srv.login().await;
    let (down, up) = round_trip(&mut c, root.path(), ZeroCopy::OFF).await;
    // The server `sendfile`d the download and `splice`d the upload; the client, not asked, copied.
    assert_eq!(kernel_metric(&metrics), 2 * SIZE as u64);
    assert_eq!((down, up), (0, 0));
    c.quit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_asked_for_the_kernel_path_takes_it_both_ways() {
    let root = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::new());
    let srv = server(root.path(), ZeroCopy::OFF, &metrics).await;
    let mut c = srv.login().await;
    let (down, up) = round_trip(&mut c, root.path(), ZeroCopy::BOTH).await;
    // The client `splice`d the download into its part file and `sendfile`d the upload; the server copied.
    assert_eq!((down, up), (SIZE as u64, SIZE as u64));
    assert_eq!(kernel_metric(&metrics), 0);
    c.quit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn neither_end_takes_the_kernel_path_unless_asked() {
    let root = tempfile::tempdir().unwrap();
    let metrics = Arc::new(Metrics::new());
    let srv = server(root.path(), ZeroCopy::default(), &metrics).await;
    let mut c = srv.login().await;
    let (down, up) = round_trip(&mut c, root.path(), ClientOptions::default().zero_copy).await;
    assert_eq!((down, up, kernel_metric(&metrics)), (0, 0, 0));
    c.quit().await.unwrap();
}
