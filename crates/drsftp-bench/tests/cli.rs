//! drsftp-bench's command line: the harness subcommands are there, and `record` writes a run folder.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_drsftp-bench");

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run drsftp-bench");
    assert!(
        out.status.success(),
        "drsftp-bench {args:?} failed: {out:?}"
    );
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

#[test]
fn help_lists_every_harness() {
    let text = help(&["--help"]);
    for sub in ["drs", "gridftp", "sweep", "blast", "lab", "record"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{sub} "))),
            "`drsftp-bench --help` lacks {sub}:\n{text}"
        );
    }
}

#[test]
fn flags_keep_their_names_without_the_old_prefixes() {
    let cases: [(&str, &[&str]); 5] = [
        (
            "drs",
            &[
                "--size",
                "--secs",
                "--cc",
                "--knob",
                "--conns",
                "--min-rtt",
                "--drs-gain",
                "--profile",
                "--trace",
                "--rmem",
                "--rtt",
                "--rate",
            ],
        ),
        (
            "gridftp",
            &[
                "--sizes",
                "--streams",
                "--cc",
                "--buffers",
                "--profile",
                "--rmem",
                "--concurrent",
                "--reps",
                "--max-secs",
                "--parallel-max-size",
                "--out",
                "--series-min",
                "--verify",
                "--rtt",
                "--rate",
                "--drsftp",
            ],
        ),
        (
            "sweep",
            &["--bufs", "--streams", "--secs", "--gain", "--rtt", "--rate"],
        ),
        (
            "blast",
            &[
                "--only", "--rate", "--out", "--drsftp", "--secs", "--reps", "--rtt-ms", "--loss",
            ],
        ),
        ("lab", &["--secs", "--only", "--out"]),
    ];
    for (sub, flags) in cases {
        let text = help(&[sub, "--help"]);
        for f in flags.iter().chain(&["--record", "--runs-dir"]) {
            assert!(
                text.contains(&format!("{f} ")) || text.contains(&format!("{f}\n")),
                "`drsftp-bench {sub} --help` lacks {f}:\n{text}"
            );
        }
        for old in ["--bench-", "--sweep-"] {
            assert!(
                !text.contains(old),
                "`drsftp-bench {sub} --help` still has {old}*:\n{text}"
            );
        }
    }
}

#[test]
fn record_writes_a_run_folder() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.md");
    let raw = dir.path().join("results.csv");
    std::fs::write(&report, "# a report\n").unwrap();
    std::fs::write(&raw, "case,mbps\nauto,900\n").unwrap();
    let runs = dir.path().join("runs");
    let out = Command::new(BIN)
        .args(["record", "--name", "auto-bench", "--runs-dir"])
        .arg(&runs)
        .arg("--report")
        .arg(&report)
        .arg("--raw")
        .arg(&raw)
        .args([
            "--",
            "bench/auto-bench.sh",
            "--rtt",
            "100ms",
            "--grid",
            "drsftp grid",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let folder = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert_eq!(folder.parent(), Some(runs.as_path()));
    assert!(folder.to_string_lossy().ends_with("-auto-bench"));
    let read = |n: &str| std::fs::read_to_string(folder.join(n)).unwrap();
    assert_eq!(
        read("command.txt"),
        "bench/auto-bench.sh --rtt 100ms --grid 'drsftp grid'\n"
    );
    assert!(read("machine.txt").contains("net.ipv4.tcp_congestion_control = "));
    assert_eq!(read("README.md"), "# a report\n");
    assert_eq!(read("results.csv"), "case,mbps\nauto,900\n");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["README.md", "command.txt", "machine.txt", "results.csv"]
    );
}
