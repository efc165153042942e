//! `drsftp plot gridftp-bench`: reads `X.runs.csv` (and `X.series.csv` if present) written by
//! `drsftp-bench gridftp --out X.md` and draws, per (cc, streams) group, `<cc>-<streams>-throughput.svg`
//! (Mbit/s vs file size, log x, one line per buffer policy; seed 000 fig 13 / seed 003 fig 7),
//! `-window.svg` (receive window over time at the largest size in the series; seed 000 fig 14) and
//! `-efficiency.svg` (Mbit/s per MiB of mean window vs file size, log-log; seed 000 fig 15).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;

use super::{axis_max, colour, decimate, human_bytes, Table};

const MIB: f64 = 1024.0 * 1024.0;
const MAX_POINTS: usize = 1500;

/// A (cc, streams) group, e.g. ("cubic", "E2").
type Group = (String, String);

/// The mean over repetitions of one (group, policy, size) cell.
#[derive(Debug, Default, Clone, Copy)]
struct Cell {
    mbps: f64,
    n: u32,
    per_mib: f64,
    n_per_mib: u32,
}

/// The `ok` runs of a `.runs.csv`, averaged over repetitions.
struct Runs {
    /// In order of first appearance.
    groups: Vec<Group>,
    /// Buffer policies in order of first appearance (their colour index, the same in every plot).
    policies: Vec<String>,
    cells: BTreeMap<(Group, String), BTreeMap<u64, Cell>>,
}

fn push_new(v: &mut Vec<String>, s: &str) -> usize {
    match v.iter().position(|x| x == s) {
        Some(i) => i,
        None => {
            v.push(s.to_string());
            v.len() - 1
        }
    }
}

fn load_runs(path: &Path) -> Result<Runs> {
    let t = Table::read(path)?;
    let (ccc, cst, csz, cbu, cstat, cmb, cpm) = (
        t.col("cc")?,
        t.col("streams")?,
        t.col("size")?,
        t.col("buffer")?,
        t.col("status")?,
        t.col("mbps")?,
        t.col("mbps_per_mib")?,
    );
    let mut runs = Runs {
        groups: vec![],
        policies: vec![],
        cells: BTreeMap::new(),
    };
    for r in &t.rows {
        let group = (t.text(r, ccc).to_string(), t.text(r, cst).to_string());
        if !runs.groups.contains(&group) {
            runs.groups.push(group.clone());
        }
        let policy = t.text(r, cbu);
        push_new(&mut runs.policies, policy);
        if t.text(r, cstat) != "ok" {
            continue;
        }
        let size = t.num(r, csz)? as u64;
        let cell = runs
            .cells
            .entry((group, policy.to_string()))
            .or_default()
            .entry(size)
            .or_default();
        cell.mbps += t.num(r, cmb)?;
        cell.n += 1;
        if let Some(v) = t.opt_num(r, cpm)? {
            cell.per_mib += v;
            cell.n_per_mib += 1;
        }
    }
    if runs.groups.is_empty() {
        bail!("{}: no runs", path.display());
    }
    Ok(runs)
}

/// One group's window samples: the file size they belong to and, per policy index, (t_s, MiB) points.
type GroupWindows = (u64, BTreeMap<usize, Vec<(f64, f64)>>);

/// Window samples of one group at its largest size in the series: per policy, the first run's (t_s, MiB).
fn load_windows(path: &Path, policies: &mut Vec<String>) -> Result<BTreeMap<Group, GroupWindows>> {
    let t = Table::read(path)?;
    let (crun, ccc, cst, csz, cbu, ct, cw) = (
        t.col("run")?,
        t.col("cc")?,
        t.col("streams")?,
        t.col("size")?,
        t.col("buffer")?,
        t.col("t_s")?,
        t.col("window")?,
    );
    // (group) -> size -> policy -> run -> points
    type Runs = BTreeMap<u64, Vec<(f64, f64)>>;
    let mut all: BTreeMap<Group, BTreeMap<u64, BTreeMap<usize, Runs>>> = BTreeMap::new();
    for r in &t.rows {
        let group = (t.text(r, ccc).to_string(), t.text(r, cst).to_string());
        let p = push_new(policies, t.text(r, cbu));
        let run = t.num(r, crun)? as u64;
        let size = t.num(r, csz)? as u64;
        let pt = (t.num(r, ct)?, t.num(r, cw)? / MIB);
        all.entry(group)
            .or_default()
            .entry(size)
            .or_default()
            .entry(p)
            .or_default()
            .entry(run)
            .or_default()
            .push(pt);
    }
    Ok(all
        .into_iter()
        .filter_map(|(g, sizes)| {
            let (size, by_policy) = sizes.into_iter().next_back()?;
            let lines = by_policy
                .into_iter()
                .filter_map(|(p, runs)| Some((p, runs.into_iter().next()?.1)))
                .collect();
            Some((g, (size, lines)))
        })
        .collect())
}

/// One labelled line.
struct Line {
    label: String,
    colour: RGBColor,
    pts: Vec<(f64, f64)>,
}

/// Draw `lines` (with point markers if `markers`) on a chart with the given axes and write it to `out`.
fn draw<X, Y>(
    out: &Path,
    title: &str,
    (x_range, x_desc): (X, &str),
    (y_range, y_desc): (Y, &str),
    x_fmt: &dyn Fn(&f64) -> String,
    lines: &[Line],
    markers: bool,
) -> Result<()>
where
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64> + Ranged<ValueType = f64>,
    Y::CoordDescType: ValueFormatter<f64> + Ranged<ValueType = f64>,
{
    let root = SVGBackend::new(out, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range, y_range)?;
    c.configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(x_fmt)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for l in lines {
        let col = l.colour;
        c.draw_series(LineSeries::new(l.pts.iter().copied(), col.stroke_width(2)))?
            .label(l.label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], col.stroke_width(2)));
        if markers {
            c.draw_series(l.pts.iter().map(|&p| Circle::new(p, 3, col.filled())))?;
        }
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

/// `cubic`, `E2` -> `cubic-E2` (anything but [A-Za-z0-9._] becomes `_`).
fn file_stem((cc, streams): &Group) -> String {
    format!("{cc}-{streams}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Draw every group's plots for the bench run `prefix` into `dir`; the files written.
pub(super) fn plot(prefix: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    let runs_path = PathBuf::from(format!("{}.runs.csv", prefix.display()));
    let series_path = PathBuf::from(format!("{}.series.csv", prefix.display()));
    let mut runs = load_runs(&runs_path)?;
    let windows = if series_path.exists() {
        load_windows(&series_path, &mut runs.policies)?
    } else {
        eprintln!("drsftp: no {}: no window plots", series_path.display());
        BTreeMap::new()
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = prefix
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let size_fmt = |v: &f64| human_bytes(*v);
    let mut written = vec![];
    for g in &runs.groups {
        let (cc, streams) = g;
        let stem = file_stem(g);
        let cells: Vec<(usize, &BTreeMap<u64, Cell>)> = runs
            .policies
            .iter()
            .enumerate()
            .filter_map(|(i, p)| Some((i, runs.cells.get(&(g.clone(), p.clone()))?)))
            .collect();
        let line = |i: usize, pts: Vec<(f64, f64)>| Line {
            label: runs.policies[i].clone(),
            colour: colour(i),
            pts,
        };
        let mut sizes: Vec<u64> = cells.iter().flat_map(|(_, m)| m.keys().copied()).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let (lo, hi) = (
            *sizes.first().unwrap_or(&0) as f64,
            *sizes.last().unwrap_or(&0) as f64,
        );
        if hi > 0.0 {
            // Ticks at the sizes measured (8 KiB, 64 KiB, ...), not at powers of ten.
            let x = || {
                ((lo / 1.5).max(1.0)..hi * 1.5)
                    .log_scale()
                    .with_key_points(sizes.iter().map(|&s| s as f64).collect())
            };
            // (a) throughput vs size.
            let lines: Vec<Line> = cells
                .iter()
                .map(|(i, m)| {
                    line(
                        *i,
                        m.iter()
                            .map(|(&s, c)| (s as f64, c.mbps / c.n as f64))
                            .collect(),
                    )
                })
                .collect();
            let y_hi = lines
                .iter()
                .flat_map(|l| l.pts.iter().map(|p| p.1))
                .fold(0.0, f64::max);
            let out = dir.join(format!("{stem}-throughput.svg"));
            draw(
                &out,
                &format!("{name}: {cc}, {streams}: throughput vs file size"),
                (x(), "file size"),
                (0f64..axis_max(y_hi), "throughput (Mbit/s)"),
                &size_fmt,
                &lines,
                true,
            )?;
            written.push(out);
            // (c) Mbit/s per MiB of mean window vs size (log-log; cells without a value are left out).
            let lines: Vec<Line> = cells
                .iter()
                .map(|(i, m)| {
                    let pts = m
                        .iter()
                        .filter(|(_, c)| c.n_per_mib > 0 && c.per_mib > 0.0)
                        .map(|(&s, c)| (s as f64, c.per_mib / c.n_per_mib as f64))
                        .collect();
                    line(*i, pts)
                })
                .filter(|l| !l.pts.is_empty())
                .collect();
            let ys = lines.iter().flat_map(|l| l.pts.iter().map(|p| p.1));
            let (y_lo, y_hi) = ys.fold((f64::MAX, 0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
            if y_hi > 0.0 {
                let out = dir.join(format!("{stem}-efficiency.svg"));
                draw(
                    &out,
                    &format!("{name}: {cc}, {streams}: Mbit/s per MiB of mean window"),
                    (x(), "file size"),
                    (
                        (y_lo / 1.5..y_hi * 1.5).log_scale(),
                        "Mbit/s per MiB of mean window",
                    ),
                    &size_fmt,
                    &lines,
                    true,
                )?;
                written.push(out);
            }
        }
        // (b) receive window over time at the largest size in the series.
        if let Some((size, by_policy)) = windows.get(g) {
            let lines: Vec<Line> = by_policy
                .iter()
                .map(|(&i, pts)| line(i, decimate(pts.clone(), MAX_POINTS)))
                .collect();
            let pts = || lines.iter().flat_map(|l| l.pts.iter());
            let t_hi = pts().map(|p| p.0).fold(0.0, f64::max);
            let y_hi = pts().map(|p| p.1).fold(0.0, f64::max);
            let out = dir.join(format!("{stem}-window.svg"));
            draw(
                &out,
                &format!(
                    "{name}: {cc}, {streams}: receive window, {} file",
                    human_bytes(*size as f64)
                ),
                (0f64..axis_max(t_hi), "time (s)"),
                (0f64..axis_max(y_hi), "receive window (MiB)"),
                &|v: &f64| format!("{v}"),
                &lines,
                false,
            )?;
            written.push(out);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_within_canvas, series_polylines};
    use super::*;

    const RUNS_HEADER: &str = "run,cc,streams,size,buffer,rep,conns,status,bytes,seconds,mbps,mean_window,peak_window,mean_rcv_ssthresh,mean_rcvbuf_half,peak_rmem_alloc,gauge_peak,mbps_per_mib,rwnd_limited,sndbuf_limited,retrans,sender_cc,peak_sndbuf_half,samples,note";
    const SERIES_HEADER: &str =
        "run,cc,streams,size,buffer,t_s,window,rcv_ssthresh,rcvbuf_half,rmem_alloc,bytes_received,sockets";

    /// cubic/stream and bbr/E2, policies 64K and drs, sizes 8 KiB / 1 MiB / 64 MiB (two reps of each), one
    /// skipped run; window series for 1 MiB and 64 MiB.
    fn write_synthetic(prefix: &Path) {
        let mut runs = format!("{RUNS_HEADER}\n");
        let mut series = format!("{SERIES_HEADER}\n");
        let mut id = 0;
        for (cc, st) in [("cubic", "stream"), ("bbr", "E2")] {
            for size in [8192u64, 1 << 20, 64 << 20] {
                for (pi, pol) in ["64K", "drs"].iter().enumerate() {
                    for rep in 0..2 {
                        id += 1;
                        let mbps = 10.0 * (pi + 1) as f64 * (size as f64).log2() + rep as f64;
                        runs += &format!(
                            "{id},{cc},{st},{size},{pol},{rep},1,ok,{size},1.0,{mbps:.3},65536,70000,1,1,0,0,{:.3},0,0,0,cubic,0,10,a note, with a comma\n",
                            mbps / (pi + 1) as f64
                        );
                        if rep == 0 && size > 8192 {
                            for k in 0..30 {
                                series += &format!(
                                    "{id},{cc},{st},{size},{pol},{:.3},{},0,0,0,0,1\n",
                                    k as f64 * 0.1,
                                    65536 * (k + 1) * (pi + 1)
                                );
                            }
                        }
                    }
                }
            }
            id += 1;
            runs +=
                &format!("{id},{cc},{st},1073741824,64K,0,1,skipped,,,,,,,,,,,,,,,,,too slow\n");
        }
        std::fs::write(format!("{}.runs.csv", prefix.display()), runs).unwrap();
        std::fs::write(format!("{}.series.csv", prefix.display()), series).unwrap();
    }

    #[test]
    fn renders_three_plots_per_group() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("main");
        write_synthetic(&prefix);
        let out = dir.path().join("plots");
        let written = plot(&prefix, &out).unwrap();
        assert_eq!(written.len(), 6, "{written:?}");
        for stem in ["cubic-stream", "bbr-E2"] {
            for (kind, label) in [
                ("throughput", "throughput (Mbit/s)"),
                ("efficiency", "Mbit/s per MiB of mean window"),
                ("window", "receive window (MiB)"),
            ] {
                let p = out.join(format!("{stem}-{kind}.svg"));
                let svg = std::fs::read_to_string(&p).unwrap();
                assert_within_canvas(&svg);
                // One line per policy (64K, drs): 3 sizes or 30 samples; axes and legend samples have 2 points.
                assert_eq!(series_polylines(&svg, 3), 2, "{kind}: {svg}");
                for l in [label, "64K", "drs", "main:"] {
                    assert!(svg.contains(l), "{kind}: no {l:?}");
                }
                if kind == "window" {
                    assert!(
                        svg.contains("time (s)") && svg.contains("64 MiB file"),
                        "{svg}"
                    );
                } else {
                    assert!(svg.contains("file size") && svg.contains("MiB"), "{svg}");
                }
            }
        }
    }

    #[test]
    fn averages_repetitions_and_skips_skipped_runs() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("r");
        write_synthetic(&prefix);
        let runs = load_runs(&PathBuf::from(format!("{}.runs.csv", prefix.display()))).unwrap();
        assert_eq!(runs.policies, ["64K", "drs"]);
        let g = ("cubic".to_string(), "stream".to_string());
        let m = &runs.cells[&(g, "64K".to_string())];
        assert_eq!(m.len(), 3);
        let c = m[&8192];
        assert_eq!(c.n, 2);
        assert!((c.mbps / 2.0 - 130.5).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn missing_or_garbled_csv_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("gone");
        let e = format!("{:#}", plot(&prefix, dir.path()).unwrap_err());
        assert!(e.contains("gone.runs.csv"), "{e}");

        let prefix = dir.path().join("bad");
        write_synthetic(&prefix);
        let runs = format!("{RUNS_HEADER}\n1,cubic,stream,8192,64K,0,1,ok,8192,1.0,fast,1,1,1,1,0,0,,0,0,0,cubic,0,1,\n");
        std::fs::write(format!("{}.runs.csv", prefix.display()), runs).unwrap();
        let e = format!("{:#}", plot(&prefix, dir.path()).unwrap_err());
        assert!(
            e.contains("bad.runs.csv: line 2: column `mbps`: `fast`"),
            "{e}"
        );

        write_synthetic(&prefix);
        std::fs::write(
            format!("{}.series.csv", prefix.display()),
            format!("{SERIES_HEADER}\n1,cubic\n"),
        )
        .unwrap();
        let e = format!("{:#}", plot(&prefix, dir.path()).unwrap_err());
        assert!(
            e.contains("bad.series.csv: line 2: 2 fields, the header has 12"),
            "{e}"
        );
    }
}
