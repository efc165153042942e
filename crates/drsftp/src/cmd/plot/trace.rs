//! `drsftp plot trace`: reads a `drsftp copy --trace` CSV (`t_s,stream,buffer_bytes,rtt_ms,bdp_bytes,bytes,...,
//! rcv_wnd,...`) and draws three stacked panels sharing the time axis — buffer / advertised window / BDP estimate
//! (MiB), RTT (ms), and throughput (Mbit/s, the `bytes` column differentiated per stream and summed) — one colour
//! per stream.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{axis_max, colour, decimate, ensure_parent, Table};

/// Points drawn per series at most (the SVG stays small for long traces).
const MAX_POINTS: usize = 1500;
/// Streams named in a legend at most.
const MAX_LEGEND: usize = 12;
const MIB: f64 = 1024.0 * 1024.0;

/// One row of one stream.
#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    t: f64,
    buffer: f64,
    rtt_ms: f64,
    bdp: f64,
    bytes: f64,
    rcv_wnd: f64,
}

/// The trace's rows by stream, each in time order.
pub(super) fn load(path: &Path) -> Result<BTreeMap<u32, Vec<Sample>>> {
    let t = Table::read(path)?;
    let (ct, cs, cb, cr, cd, cy, cw) = (
        t.col("t_s")?,
        t.col("stream")?,
        t.col("buffer_bytes")?,
        t.col("rtt_ms")?,
        t.col("bdp_bytes")?,
        t.col("bytes")?,
        t.col("rcv_wnd")?,
    );
    let mut by: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
    for r in &t.rows {
        let stream = t.num(r, cs)?;
        if stream < 0.0 || stream.fract() != 0.0 || stream > u32::MAX as f64 {
            bail!(
                "{}: line {}: column `stream`: `{}` is not a stream index",
                path.display(),
                r.line,
                t.text(r, cs)
            );
        }
        by.entry(stream as u32).or_default().push(Sample {
            t: t.num(r, ct)?,
            buffer: t.num(r, cb)?,
            rtt_ms: t.num(r, cr)?,
            bdp: t.num(r, cd)?,
            bytes: t.num(r, cy)?,
            rcv_wnd: t.num(r, cw)?,
        });
    }
    if by.is_empty() {
        bail!(
            "{}: no rows (the transfer carried no traced data)",
            path.display()
        );
    }
    for rows in by.values_mut() {
        rows.sort_by(|a, b| a.t.total_cmp(&b.t));
    }
    Ok(by)
}

/// A stream's cumulative bytes at time `t`, linear between samples and held outside them.
fn bytes_at(rows: &[Sample], t: f64) -> f64 {
    let i = rows.partition_point(|s| s.t <= t);
    if i == 0 {
        return rows[0].bytes;
    }
    if i == rows.len() {
        return rows[i - 1].bytes;
    }
    let (a, b) = (rows[i - 1], rows[i]);
    let f = if b.t > a.t {
        (t - a.t) / (b.t - a.t)
    } else {
        1.0
    };
    a.bytes + (b.bytes - a.bytes) * f
}

/// Throughput in Mbit/s on a common grid of equal buckets over `[0, t_end]` (about 200, none shorter than
/// 100 ms): bucket mid-times, each stream's rate, and their sum.
pub(super) type Rates = (Vec<f64>, BTreeMap<u32, Vec<f64>>, Vec<f64>);

pub(super) fn throughput(streams: &BTreeMap<u32, Vec<Sample>>) -> Rates {
    let t_end = streams
        .values()
        .filter_map(|r| r.last())
        .map(|s| s.t)
        .fold(0.0, f64::max);
    if t_end <= 0.0 {
        return (vec![], BTreeMap::new(), vec![]);
    }
    let n = ((t_end / (t_end / 200.0).max(0.1)).floor() as usize).max(1);
    let w = t_end / n as f64;
    let mids: Vec<f64> = (0..n).map(|k| (k as f64 + 0.5) * w).collect();
    let mut total = vec![0.0; n];
    let mut per = BTreeMap::new();
    for (&id, rows) in streams {
        let rates: Vec<f64> = (0..n)
            .map(|k| {
                let d = bytes_at(rows, (k + 1) as f64 * w) - bytes_at(rows, k as f64 * w);
                d.max(0.0) * 8.0 / w / 1e6
            })
            .collect();
        for (t, r) in total.iter_mut().zip(&rates) {
            *t += r;
        }
        per.insert(id, rates);
    }
    (mids, per, total)
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// One panel: time on x, `0..y_max` on y.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    t_max: f64,
    y_max: f64,
    y_desc: &str,
) -> Result<Chart<'a, 'b>> {
    let mut c = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..t_max, 0f64..y_max)?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc(y_desc)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    Ok(c)
}

/// Draw the trace at `path` into the SVG `out`.
pub(super) fn plot(path: &Path, out: &Path) -> Result<()> {
    let streams = load(path)?;
    ensure_parent(out)?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (mids, per, total) = throughput(&streams);
    let t_max = axis_max(
        streams
            .values()
            .flat_map(|r| r.iter().map(|s| s.t))
            .fold(0.0, f64::max),
    );
    let legend = streams.len() <= MAX_LEGEND;

    let root = SVGBackend::new(out, (1200, 1100)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "{name}: {} stream{}",
        streams.len(),
        if streams.len() == 1 { "" } else { "s" }
    );
    let root = root.titled(&title, ("sans-serif", 24))?;
    let panels = root.split_evenly((3, 1));
    // Panel 1: buffer (thick), advertised window (thin, lighter), BDP estimate (dotted), MiB.
    let y1 = streams
        .values()
        .flatten()
        .map(|s| s.buffer.max(s.rcv_wnd).max(s.bdp) / MIB)
        .fold(0.0, f64::max);
    let mut c = panel(
        &panels[0],
        t_max,
        axis_max(y1),
        "buffer / adv. window / BDP est. (MiB)",
    )?;
    for (i, (id, rows)) in streams.iter().enumerate() {
        let col = colour(i);
        let pts = |f: fn(&Sample) -> f64| {
            decimate(rows.iter().map(|s| (s.t, f(s) / MIB)).collect(), MAX_POINTS)
        };
        let s = c.draw_series(LineSeries::new(pts(|s| s.buffer), col.stroke_width(2)))?;
        if legend {
            s.label(format!("stream {id}"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], col.stroke_width(2)));
        }
        if rows.iter().any(|s| s.rcv_wnd > 0.0) {
            c.draw_series(LineSeries::new(
                pts(|s| s.rcv_wnd),
                col.mix(0.45).stroke_width(1),
            ))?;
        }
        if rows.iter().any(|s| s.bdp > 0.0) {
            c.draw_series(DottedLineSeries::new(pts(|s| s.bdp), 0, 6, move |p| {
                Circle::new(p, 1, col.filled())
            }))?;
        }
    }
    // A key for the three styles, in grey.
    let grey = RGBColor(90, 90, 90);
    c.draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
        .label("buffer (thick)")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], grey.stroke_width(2)));
    c.draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
        .label("adv. window (thin)")
        .legend(move |(x, y)| {
            PathElement::new([(x, y), (x + 20, y)], grey.mix(0.45).stroke_width(1))
        });
    c.draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
        .label("BDP estimate (dotted)")
        .legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + Circle::new((4, 0), 1, grey.filled())
                + Circle::new((10, 0), 1, grey.filled())
                + Circle::new((16, 0), 1, grey.filled())
        });
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    // Panel 2: RTT (rows without an RTT yet, 0, are left out).
    let y2 = streams
        .values()
        .flatten()
        .map(|s| s.rtt_ms)
        .fold(0.0, f64::max);
    let mut c = panel(&panels[1], t_max, axis_max(y2), "RTT (ms)")?;
    for (i, (id, rows)) in streams.iter().enumerate() {
        let col = colour(i);
        let pts: Vec<_> = rows
            .iter()
            .filter(|s| s.rtt_ms > 0.0)
            .map(|s| (s.t, s.rtt_ms))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let s = c.draw_series(LineSeries::new(
            decimate(pts, MAX_POINTS),
            col.stroke_width(1),
        ))?;
        if legend {
            s.label(format!("stream {id}"))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], col.stroke_width(2)));
        }
    }
    if legend {
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }

    // Panel 3: throughput per stream (thin) and the sum (thick black).
    let y3 = total.iter().copied().fold(0.0, f64::max);
    let mut c = panel(&panels[2], t_max, axis_max(y3), "throughput (Mbit/s)")?;
    for (i, rates) in per.values().enumerate() {
        let pts = mids.iter().copied().zip(rates.iter().copied());
        c.draw_series(LineSeries::new(pts, colour(i).stroke_width(1)))?;
    }
    c.draw_series(LineSeries::new(
        mids.iter().copied().zip(total.iter().copied()),
        BLACK.stroke_width(2),
    ))?
    .label("total")
    .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], BLACK.stroke_width(2)));
    c.draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
        .label("per stream (thin)")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], grey.stroke_width(1)));
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_within_canvas, series_polylines};
    use super::*;

    const HEADER: &str =
        "t_s,stream,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps,rcv_wnd,rcv_ssthresh,cwnd_bytes";

    /// Two streams at 100 Mbit/s each (12.5 MB/s) for 2 s, rows every 50 ms.
    fn synthetic() -> String {
        let mut s = format!("{HEADER}\n");
        for k in 0..=40 {
            let t = k as f64 * 0.05;
            for stream in 0..2u32 {
                let bytes = (t * 12.5e6) as u64;
                let buf = 1_000_000 + 100_000 * k + 50_000 * stream as usize;
                s += &format!(
                    "{t:.3},{stream},{buf},{:.3},{},{bytes},0,{},{},{}\n",
                    20.0 + k as f64 * 0.1,
                    buf / 2,
                    buf / 3,
                    buf / 3,
                    buf / 4
                );
            }
        }
        s
    }

    #[test]
    fn renders_three_panels_with_one_series_per_stream() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("down.csv");
        std::fs::write(&csv, synthetic()).unwrap();
        let out = dir.path().join("sub/down.svg");
        plot(&csv, &out).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        assert_within_canvas(&svg);
        // Per stream: buffer + window (panel 1), RTT (panel 2), throughput (panel 3); plus the total.
        assert_eq!(series_polylines(&svg, 5), 2 * 4 + 1, "{svg}");
        // The BDP estimate is dotted (circles).
        assert!(svg.matches("<circle").count() > 20);
        for label in [
            "down.csv",
            "time (s)",
            "RTT (ms)",
            "throughput (Mbit/s)",
            "buffer / adv. window / BDP est. (MiB)",
            "stream 0",
            "stream 1",
            "total",
        ] {
            assert!(svg.contains(label), "no {label:?}");
        }
    }

    #[test]
    fn throughput_is_differentiated_per_stream_and_summed() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("t.csv");
        std::fs::write(&csv, synthetic()).unwrap();
        let (mids, per, total) = throughput(&load(&csv).unwrap());
        assert_eq!(mids.len(), 20);
        for r in per.values().flatten() {
            assert!((r - 100.0).abs() < 1.0, "{r}");
        }
        for r in total {
            assert!((r - 200.0).abs() < 2.0, "{r}");
        }
    }

    #[test]
    fn bad_csv_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.csv");
        let e = format!(
            "{:#}",
            plot(&missing, &dir.path().join("x.svg")).unwrap_err()
        );
        assert!(e.contains("nope.csv"), "{e}");

        let csv = dir.path().join("bad.csv");
        std::fs::write(
            &csv,
            format!("{HEADER}\n0.000,0,1,2,3,4,5,6,7,8\n0.050,0,1,abc,3,4,5,6,7,8\n"),
        )
        .unwrap();
        let e = format!("{:#}", plot(&csv, &dir.path().join("x.svg")).unwrap_err());
        assert!(e.contains("bad.csv: line 3: column `rtt_ms`: `abc`"), "{e}");

        std::fs::write(&csv, "a,b,c\n1,2,3\n").unwrap();
        let e = format!("{:#}", plot(&csv, &dir.path().join("x.svg")).unwrap_err());
        assert!(e.contains("bad.csv: line 1: no `t_s` column"), "{e}");

        std::fs::write(&csv, format!("{HEADER}\n")).unwrap();
        let e = format!("{:#}", plot(&csv, &dir.path().join("x.svg")).unwrap_err());
        assert!(e.contains("bad.csv: no rows"), "{e}");
        assert!(!dir.path().join("x.svg").exists());
    }
}
