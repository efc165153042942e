//! The product's help pages: benchmark harnesses live in the separate drsftp-bench binary, so no page of
//! `drsftp` mentions a benchmark or a sweep.

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_drsftp"))
        .args(args)
        .output()
        .expect("run drsftp");
    assert!(out.status.success(), "drsftp {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 help")
}

#[test]
fn help_pages_mention_no_benchmark_or_sweep() {
    for args in [
        &["--help"][..],
        &["tune", "--help"],
        &["lab", "--help"],
        &["copy", "--help"],
        &["serve", "--help"],
    ] {
        let text = help(args);
        assert!(text.contains("Usage:"), "drsftp {args:?}:\n{text}");
        let lower = text.to_lowercase();
        for word in ["bench", "sweep"] {
            assert!(
                !lower.contains(word),
                "`drsftp {}` mentions {word:?}:\n{text}",
                args.join(" ")
            );
        }
    }
}

#[test]
fn product_subcommands_stay() {
    let top = help(&["--help"]);
    for sub in ["serve", "copy", "ls", "tune", "lab", "plot", "demo"] {
        assert!(
            top.lines().any(|l| l.trim_start().starts_with(sub)),
            "`drsftp --help` lacks {sub}:\n{top}"
        );
    }
    let tune = help(&["tune", "--help"]);
    for flag in ["calibrate", "--rtt", "--rate", "--mem", "--fit"] {
        assert!(
            tune.contains(flag),
            "`drsftp tune --help` lacks {flag}:\n{tune}"
        );
    }
    let lab = help(&["lab", "--help"]);
    for sub in ["up", "down", "exec", "status"] {
        assert!(
            lab.lines().any(|l| l.trim_start().starts_with(sub)),
            "`drsftp lab --help` lacks {sub}:\n{lab}"
        );
    }
}
