//! The measuring half of `drsftp-bench gridftp`: scratch directory and test files, the `drsftp serve` processes, the
//! sock_diag sampler, one download run, and the duration predictor that skips runs over `--max-secs`.

use super::*;

/// Removes the scratch directory (server files, downloads) when dropped.
pub(super) struct WorkDir(pub(super) PathBuf);

impl WorkDir {
    pub(super) fn new(need: u64) -> Result<WorkDir> {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() && free_bytes(shm).is_some_and(|f| f > need * 3) {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let p = base.join(format!("drsftp-gbench-{}", std::process::id()));
        std::fs::create_dir_all(p.join("srv"))?;
        std::fs::create_dir_all(p.join("dst"))?;
        Ok(WorkDir(p))
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn free_bytes(p: &Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(p)
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
}

pub(super) fn file_name(size: u64) -> String {
    format!("f{}", format_size(size))
}

/// Pseudo-random file content (xorshift), so nothing on the path can compress it.
pub(super) fn make_file(path: &Path, size: u64) -> Result<()> {
    if path.metadata().is_ok_and(|m| m.len() == size) {
        return Ok(());
    }
    crate::scratch::make_file(path, size)
}

/// `drsftp serve` processes in host 2, one per buffer policy; killed (by PID) when dropped.
pub(super) struct Servers {
    pub(super) procs: Vec<(Pol, u16, Child)>,
}

impl Servers {
    pub(super) fn start(
        lab: &Lab,
        exe: &Path,
        work: &Path,
        policies: &[Pol],
        cc: &str,
    ) -> Result<Servers> {
        let mut s = Servers { procs: vec![] };
        for (i, p) in policies.iter().enumerate() {
            let port = CTL_BASE_PORT + i as u16;
            let log = std::fs::File::create(work.join(format!("serve-{cc}-{i}.log")))?;
            let mut child = lab
                .exec(2, &exe.to_string_lossy())
                .args([
                    "serve",
                    "--anonymous",
                    "--anonymous-write",
                    "--print-addr",
                    "--root",
                ])
                .arg(work.join("srv"))
                .args(["--listen", &format!("{}:{port}", lab.addr(2))])
                .args(["--buffer", &p.policy.to_string(), "--congestion", cc])
                .envs(p.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .spawn()
                .context("spawning drsftp serve in host 2")?;
            let out = child.stdout.take().context("serve stdout")?;
            s.procs.push((p.clone(), port, child));
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut line = String::new();
                let _ = BufReader::new(out).read_line(&mut line);
                let _ = tx.send(line);
            });
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(l) if l.starts_with("listening") => {}
                Ok(l) => bail!("drsftp serve --buffer {p}: unexpected first line {l:?}"),
                Err(_) => bail!("drsftp serve --buffer {p} did not start within 20 s"),
            }
        }
        Ok(s)
    }

    pub(super) fn port(&self, p: &Pol) -> u16 {
        self.procs
            .iter()
            .find(|x| x.0 == *p)
            .map(|x| x.1)
            .expect("a server per policy")
    }
    pub(super) fn ports(&self) -> Vec<u16> {
        self.procs.iter().map(|x| x.1).collect()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        for (_, _, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The sock_diag sampler of one run: receiving sockets in host 1, sending sockets in host 2.
pub(super) struct Sampler {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) handle: std::thread::JoinHandle<Result<Sampled>>,
}

#[derive(Default)]
pub(super) struct Sampled {
    pub(super) points: Vec<Point>,
    /// Last TCP_INFO seen per sending socket (cookie): busy, rwnd-limited, sndbuf-limited (µs), retransmits, cc.
    pub(super) senders: Vec<(u64, diag::Sock)>,
    pub(super) peak_sndbuf_half: u64,
}

impl Sampler {
    pub(super) fn start(lab: &Lab, ctl_ports: Vec<u16>) -> Result<Sampler> {
        let mut rx_diag = lab.run_in(1, diag::Diag::open)??;
        let mut tx_diag = lab.run_in(2, diag::Diag::open)??;
        let (client, server) = (lab.addr(1), lab.addr(2));
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let handle = std::thread::spawn(move || -> Result<Sampled> {
            let t0 = Instant::now();
            let mut out = Sampled::default();
            let mut next = t0;
            loop {
                let now = Instant::now();
                let mut p = Point {
                    t: now.duration_since(t0).as_secs_f64(),
                    ..Point::default()
                };
                for s in rx_diag.dump()? {
                    if s.dst != server || ctl_ports.contains(&s.dport) {
                        continue;
                    }
                    p.win += s.rcv_wnd as u64;
                    p.ssthresh += s.rcv_ssthresh as u64;
                    p.rb_half += s.rcvbuf as u64 / 2;
                    p.alloc += s.rmem_alloc as u64;
                    p.bytes_rx += s.bytes_received;
                    p.socks += 1;
                }
                let mut snd_half = 0;
                for s in tx_diag.dump()? {
                    if s.dst != client || ctl_ports.contains(&s.sport) {
                        continue;
                    }
                    snd_half += s.sndbuf as u64 / 2;
                    match out.senders.iter_mut().find(|x| x.0 == s.cookie) {
                        Some(x) => x.1 = s,
                        None => out.senders.push((s.cookie, s)),
                    }
                }
                out.peak_sndbuf_half = out.peak_sndbuf_half.max(snd_half);
                if p.socks > 0 {
                    out.points.push(p);
                }
                if stop2.load(Ordering::Relaxed) {
                    return Ok(out);
                }
                next += SAMPLE_EVERY;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
        });
        Ok(Sampler { stop, handle })
    }

    pub(super) fn finish(self) -> Result<Sampled> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| anyhow!("sampler thread panicked"))?
    }
}

/// Time-weighted mean of `f` over consecutive samples (gaps capped at 5 sample periods).
pub(super) fn time_mean(pts: &[Point], f: impl Fn(&Point) -> u64) -> f64 {
    if pts.len() < 2 {
        return pts.first().map(|p| f(p) as f64).unwrap_or(0.0);
    }
    let cap = SAMPLE_EVERY.as_secs_f64() * 5.0;
    let (mut area, mut span) = (0.0, 0.0);
    for w in pts.windows(2) {
        let dt = (w[1].t - w[0].t).min(cap);
        area += f(&w[0]) as f64 * dt;
        span += dt;
    }
    if span > 0.0 {
        area / span
    } else {
        f(&pts[0]) as f64
    }
}

pub(super) struct Ctx<'a> {
    pub(super) lab: &'a Lab,
    pub(super) exe: &'a Path,
    pub(super) work: &'a Path,
    pub(super) args: &'a Args,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn one_run(
    cx: &Ctx<'_>,
    servers: &Servers,
    cc: &str,
    policy: &Pol,
    streams: Streams,
    size: u64,
    conns: usize,
    deadline: Duration,
) -> Result<Measured> {
    let port = servers.port(policy);
    let url = format!("ftp://{}:{port}/{}", cx.lab.addr(2), file_name(size));
    let sampler = Sampler::start(cx.lab, servers.ports())?;
    let mut kids = vec![];
    let dsts: Vec<PathBuf> = (0..conns)
        .map(|i| cx.work.join("dst").join(format!("c{i}")))
        .collect();
    let spawn_res: Result<()> = (|| {
        for d in &dsts {
            std::fs::create_dir_all(d)?;
            let mut c = cx.lab.exec(1, &cx.exe.to_string_lossy());
            c.args(["copy", &url])
                .arg(d.join("out.bin"))
                .args(["--json", "--quiet", "--timeout", "120s"])
                .args(["--buffer", &policy.policy.to_string(), "--congestion", cc])
                .envs(policy.env.iter().map(|(k, v)| (k, v)));
            if let Streams::ModeE(n) = streams {
                c.args(["--mode-e", "-p", &n.to_string()]);
            }
            if !cx.args.verify {
                c.arg("--no-verify");
            }
            kids.push(
                c.stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .context("spawning drsftp copy in host 1")?,
            );
        }
        Ok(())
    })();
    // Wait for every client (bounded), then stop sampling.
    let t0 = Instant::now();
    let mut outs: Vec<Option<std::process::Output>> = kids.iter().map(|_| None).collect();
    let mut killed = false;
    while outs.iter().any(Option::is_none) {
        for (i, k) in kids.iter_mut().enumerate() {
            if outs[i].is_some() {
                continue;
            }
            if let Some(st) = k.try_wait()? {
                let mut so = vec![];
                let mut se = vec![];
                if let Some(mut o) = k.stdout.take() {
                    let _ = o.read_to_end(&mut so);
                }
                if let Some(mut e) = k.stderr.take() {
                    let _ = e.read_to_end(&mut se);
                }
                outs[i] = Some(std::process::Output {
                    status: st,
                    stdout: so,
                    stderr: se,
                });
            }
        }
        if t0.elapsed() > deadline && !killed {
            for k in kids.iter_mut() {
                let _ = k.kill();
            }
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let sampled = sampler.finish()?;
    for d in &dsts {
        let _ = std::fs::remove_dir_all(d);
    }
    spawn_res?;
    if killed {
        bail!("killed after {:.0} s", deadline.as_secs_f64());
    }
    let mut m = Measured::default();
    for o in outs.into_iter().flatten() {
        let text = String::from_utf8_lossy(&o.stdout);
        let j: serde_json::Value = serde_json::from_str(text.trim()).map_err(|_| {
            anyhow!(
                "drsftp copy ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            )
        })?;
        if let Some(e) = j.get("error") {
            bail!("drsftp copy: {e}");
        }
        let bytes = j["bytes"].as_u64().context("json bytes")?;
        let secs = j["seconds"].as_f64().context("json seconds")?;
        if bytes != size {
            bail!("drsftp copy moved {bytes} bytes, expected {size}");
        }
        m.bytes += bytes;
        m.secs = m.secs.max(secs);
        m.client_mbps
            .push(bytes as f64 * 8.0 / secs.max(1e-9) / 1e6);
        m.gauge_peak += j["buffer_bytes"].as_u64().unwrap_or(0);
    }
    let pts = &sampled.points;
    m.samples = pts.len();
    m.mean_win = time_mean(pts, |p| p.win);
    m.mean_ssthresh = time_mean(pts, |p| p.ssthresh);
    m.mean_rb_half = time_mean(pts, |p| p.rb_half);
    m.peak_win = pts.iter().map(|p| p.win).max().unwrap_or(0);
    m.peak_alloc = pts.iter().map(|p| p.alloc).max().unwrap_or(0);
    let (mut busy, mut rwnd, mut sndbuf) = (0u64, 0u64, 0u64);
    let mut ccs = BTreeSet::new();
    for (_, s) in &sampled.senders {
        busy += s.busy_us;
        rwnd += s.rwnd_limited_us;
        sndbuf += s.sndbuf_limited_us;
        m.retrans += s.total_retrans as u64;
        ccs.insert(s.cong.clone());
    }
    if busy > 0 {
        m.rwnd_frac = rwnd as f64 / busy as f64;
        m.sndbuf_frac = sndbuf as f64 / busy as f64;
    }
    m.sender_cc = ccs.into_iter().collect::<Vec<_>>().join("+");
    m.peak_sndbuf_half = sampled.peak_sndbuf_half;
    if size >= cx.args.series_min {
        let t_first = pts.first().map(|p| p.t).unwrap_or(0.0);
        let mut last = f64::NEG_INFINITY;
        for p in pts {
            if p.t - last >= 0.0999 {
                m.series.push(Point {
                    t: p.t - t_first,
                    ..*p
                });
                last = p.t;
            }
        }
    }
    Ok(m)
}

/// Predicted seconds for `size` from the same policy's time at the largest smaller size already run.
pub(super) fn predict(
    runs: &[Run],
    cc: &str,
    st: Streams,
    p: &Pol,
    size: u64,
    conns: usize,
) -> Option<f64> {
    // Small files are dominated by round trips; extrapolate linearly from the largest one of at least 1 MiB
    // (conservative: larger files amortise slow start better).
    let _ = conns;
    let (prev, m) = runs
        .iter()
        .filter(|r| {
            r.cc == cc && r.streams == st && r.policy == *p && r.size < size && r.size >= 1 << 20
        })
        .filter_map(|r| r.done().map(|m| (r.size, m)))
        .max_by_key(|(s, _)| *s)?;
    Some(m.secs * size as f64 / prev as f64)
}
