//! Runs the lab benchmark (same as `drsftp lab bench`) without the CLI: `cargo run --release -p drsftp-lab
//! --example lab_bench -- [secs] [parts] [out.md]`.

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if let Err(why) = drsftp_lab::check_prerequisites() {
        eprintln!("lab bench cannot run: {why}");
        std::process::exit(2);
    }
    let secs = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let parts = a
        .get(2)
        .cloned()
        .unwrap_or_else(|| "rtt,rate,loss,ceiling,baseline,perpacket".into());
    let has = |p: &str| parts.split(',').any(|x| x == p);
    let opts = drsftp_lab::bench::BenchOptions {
        prefix: format!("b{}x", std::process::id() % 100_000),
        secs,
        rtt: has("rtt"),
        rate: has("rate"),
        loss: has("loss"),
        ceiling: has("ceiling"),
        baseline: has("baseline"),
        perpacket: has("perpacket"),
    };
    let md = drsftp_lab::bench::run(&opts);
    if let Some(p) = a.get(3) {
        std::fs::write(p, md).expect("write report");
    }
}
