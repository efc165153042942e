//! Striped transfers (GFD.20 SPAS/SPOR) against a real striped Globus endpoint on loopback
//! (`drsftp_testkit::globus::StripedGlobus`: a frontend on 127.0.0.1 and two data nodes on 127.0.0.2 and
//! 127.0.0.3 sharing one directory): the drsftp client downloads and uploads over both data nodes (each stripe
//! carries bytes, checksums verified), and with striping off it uses one. The CLI's striped copies, the
//! fixture's check with globus-url-copy `-stripe` and third-party copies are in the drsftp crate's
//! `interop_globus_striped.rs`. When Globus is not installed every test prints why and returns.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drsftp_io::client::{Client, ClientOptions, TransferMode};
use drsftp_io::data::Progress;
use drsftp_testkit::data::{chmod, random_bytes, sha256_file_range as sha256};
use drsftp_testkit::globus::{self, StripedGlobus};

const NODES: [Ipv4Addr; 2] = [Ipv4Addr::new(127, 0, 0, 2), Ipv4Addr::new(127, 0, 0, 3)];

/// A striped Globus endpoint and the directory its data nodes share.
struct Striped {
    g: StripedGlobus,
    dir: tempfile::TempDir,
}

impl Striped {
    /// `None` (reason printed) when Globus is not installed. Stripe blocks of 256 KiB, so that a few MiB spread
    /// over both nodes.
    fn start(test: &str, nodes: &[Ipv4Addr]) -> Option<Striped> {
        let (dir, g) =
            globus::striped_in_tempdir(test, "drsftp-striped-", nodes, &["-sbs", "262144"])?;
        Some(Striped { g, dir })
    }

    fn remote(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    fn local(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn file(&self, name: &str, len: usize, seed: u64) -> PathBuf {
        let p = self.local(name);
        std::fs::write(&p, random_bytes(len, seed)).unwrap();
        chmod(&p, 0o644);
        p
    }

    async fn client(&self) -> Client {
        Client::connect(
            &self.g.frontend.authority(),
            "anonymous",
            "drsftp@",
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("login to the Globus frontend: {e}\n{}", self.g.log_tail()))
    }
}

fn opts(streams: u32) -> ClientOptions {
    ClientOptions {
        streams,
        mode_e: true,
        timeout: Duration::from_secs(30),
        ..ClientOptions::default()
    }
}

/// Every stripe carried part of the file, and together all of it.
fn assert_striped(stripes: &[u64], len: u64, nodes: usize) {
    assert_eq!(
        stripes.len(),
        nodes,
        "one stripe per data node: {stripes:?}"
    );
    assert!(
        stripes.iter().all(|b| *b > 0),
        "every data node moved bytes: {stripes:?}"
    );
    assert_eq!(stripes.iter().sum::<u64>(), len, "{stripes:?}");
}

/// The copy verified itself against the frontend's CKSM SHA-256, and that digest is `local`'s. A Globus frontend
/// answers CKSM without listing it in FEAT; the client asks it anyway for the final comparison.
fn assert_verified_sha256(sum: &drsftp_io::client::TransferSummary, local: &std::path::Path) {
    assert!(sum.verified, "verified against the frontend: {sum:?}");
    let (alg, digest) = sum.checksum.clone().expect("a checksum in the summary");
    assert_eq!(alg, "SHA256");
    assert_eq!(digest, sha256(local, 0, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striped_download_uses_both_data_nodes() {
    let Some(s) = Striped::start("striped_download_uses_both_data_nodes", &NODES) else {
        return;
    };
    let len = 12 * 1024 * 1024 + 4321;
    let src = s.file("down.bin", len, 2);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("down.bin");
    let mut c = s.client().await;
    assert!(c.features().has("SPAS") && c.features().has("SPOR"));
    let sum = c
        .download(
            &s.remote("down.bin"),
            &dst,
            &opts(2),
            Arc::new(Progress::new()),
        )
        .await
        .unwrap_or_else(|e| panic!("striped download: {e}\n{}", s.g.log_tail()));
    assert_eq!(sum.mode, TransferMode::Extended);
    assert_eq!(sum.bytes, len as u64);
    assert_striped(&sum.stripes, len as u64, 2);
    assert_eq!(sum.streams, 4, "2 streams from each of 2 nodes: {sum:?}");
    assert_eq!(sha256(&dst, 0, None), sha256(&src, 0, None));
    assert_verified_sha256(&sum, &dst);
    c.quit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striped_upload_uses_both_data_nodes() {
    let Some(s) = Striped::start("striped_upload_uses_both_data_nodes", &NODES) else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let src = out.path().join("up.bin");
    let len = 10 * 1024 * 1024 + 99;
    std::fs::write(&src, random_bytes(len, 3)).unwrap();
    let mut c = s.client().await;
    let sum = c
        .upload(
            &src,
            &s.remote("up.bin"),
            &opts(2),
            Arc::new(Progress::new()),
        )
        .await
        .unwrap_or_else(|e| panic!("striped upload: {e}\n{}", s.g.log_tail()));
    // Each half went only to its own node's address (SPAS order): the file is whole only if both wrote.
    assert_striped(&sum.stripes, len as u64, 2);
    assert_eq!(sum.streams, 4, "{sum:?}");
    assert_eq!(sha256(&s.local("up.bin"), 0, None), sha256(&src, 0, None));
    assert_verified_sha256(&sum, &src);
    c.quit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striping_off_uses_one_stripe() {
    let Some(s) = Striped::start("striping_off_uses_one_stripe", &NODES) else {
        return;
    };
    let len = 3 * 1024 * 1024 + 1;
    let src = s.file("one.bin", len, 4);
    let out = tempfile::tempdir().unwrap();
    let dst = out.path().join("one.bin");
    let mut c = s.client().await;
    let mut o = opts(2);
    o.stripes = false;
    let sum = c
        .download(&s.remote("one.bin"), &dst, &o, Arc::new(Progress::new()))
        .await
        .unwrap_or_else(|e| panic!("unstriped download: {e}\n{}", s.g.log_tail()));
    assert!(sum.stripes.is_empty(), "{sum:?}");
    assert_eq!(sum.streams, 2);
    assert_eq!(sha256(&dst, 0, None), sha256(&src, 0, None));
    assert_verified_sha256(&sum, &dst);
    c.quit().await.unwrap();
}
