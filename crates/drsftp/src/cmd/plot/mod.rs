//! `drsftp plot`: SVG plots (plotters, SVG backend only, no fonts needed) of the CSVs drsftp and drsftp-bench write —
//! `plot trace` for a `drsftp copy --trace` CSV, `plot gridftp-bench` for `drsftp-bench gridftp --out`'s
//! `.runs.csv` / `.series.csv` — plus the small CSV reader and colour/axis helpers both share.

mod bench;
mod trace;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Subcommand;
use plotters::style::RGBColor;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Plot a `drsftp copy --trace` CSV: buffer / advertised window / BDP estimate, RTT and throughput over time,
    /// one colour per stream, in three stacked panels.
    Trace {
        /// The trace CSV.
        file: PathBuf,
        /// Output SVG (default: FILE with an .svg extension).
        #[arg(short, long, value_name = "OUT.svg")]
        out: Option<PathBuf>,
    },
    /// Plot a `drsftp-bench gridftp --out X.md` run: per (cc, streams) group, throughput vs file size,
    /// receive window over time (largest size), and Mbit/s per MiB of mean window vs file size.
    GridftpBench {
        /// X (or X.md, X.runs.csv): reads X.runs.csv and, if present, X.series.csv.
        prefix: PathBuf,
        /// Directory for the SVGs (default: X.plots/).
        #[arg(short, long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Trace { file, out } => {
            let out = out.unwrap_or_else(|| file.with_extension("svg"));
            trace::plot(&file, &out)?;
            println!("{}", out.display());
        }
        What::GridftpBench { prefix, out } => {
            let prefix = bench_prefix(&prefix);
            let dir = out.unwrap_or_else(|| PathBuf::from(format!("{}.plots", prefix.display())));
            for p in bench::plot(&prefix, &dir)? {
                println!("{}", p.display());
            }
        }
    }
    Ok(())
}

/// `X`, `X.md`, `X.runs.csv` and `X.series.csv` all name the bench run `X`.
fn bench_prefix(p: &Path) -> PathBuf {
    let s = p.to_string_lossy();
    let stem = [".runs.csv", ".series.csv", ".md"]
        .iter()
        .find_map(|suf| s.strip_suffix(suf))
        .unwrap_or(&s);
    PathBuf::from(stem)
}

/// A numeric CSV as written by drsftp (header line, comma-separated, no quoting; trailing free-text columns may
/// contain commas, so rows may have more fields than the header but never fewer).
pub(crate) struct Table {
    path: PathBuf,
    header: Vec<String>,
    pub(crate) rows: Vec<Row>,
}

pub(crate) struct Row {
    /// 1-based line number in the file, for error messages.
    line: usize,
    fields: Vec<String>,
}

impl Table {
    pub(crate) fn read(path: &Path) -> Result<Table> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(path, &text)
    }

    pub(crate) fn parse(path: &Path, text: &str) -> Result<Table> {
        let mut lines = text.lines().enumerate();
        let Some((_, head)) = lines.find(|(_, l)| !l.trim().is_empty()) else {
            bail!("{}: empty file (no CSV header line)", path.display());
        };
        let header: Vec<String> = head.split(',').map(|s| s.trim().to_string()).collect();
        let mut rows = Vec::new();
        for (i, l) in lines {
            if l.trim().is_empty() {
                continue;
            }
            let fields: Vec<String> = l.split(',').map(|s| s.trim().to_string()).collect();
            if fields.len() < header.len() {
                bail!(
                    "{}: line {}: {} fields, the header has {}",
                    path.display(),
                    i + 1,
                    fields.len(),
                    header.len()
                );
            }
            rows.push(Row {
                line: i + 1,
                fields,
            });
        }
        Ok(Table {
            path: path.to_path_buf(),
            header,
            rows,
        })
    }

    /// The index of column `name`, or an error naming the file and its header.
    pub(crate) fn col(&self, name: &str) -> Result<usize> {
        self.header.iter().position(|h| h == name).with_context(|| {
            format!(
                "{}: line 1: no `{name}` column (header: {})",
                self.path.display(),
                self.header.join(",")
            )
        })
    }

    pub(crate) fn text<'a>(&self, row: &'a Row, col: usize) -> &'a str {
        &row.fields[col]
    }

    /// A number, or `None` for an empty field.
    pub(crate) fn opt_num(&self, row: &Row, col: usize) -> Result<Option<f64>> {
        let s = &row.fields[col];
        if s.is_empty() {
            return Ok(None);
        }
        match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Some(v)),
            _ => bail!(
                "{}: line {}: column `{}`: `{s}` is not a number",
                self.path.display(),
                row.line,
                self.header[col]
            ),
        }
    }

    pub(crate) fn num(&self, row: &Row, col: usize) -> Result<f64> {
        self.opt_num(row, col)?.with_context(|| {
            format!(
                "{}: line {}: column `{}` is empty",
                self.path.display(),
                row.line,
                self.header[col]
            )
        })
    }
}

/// Colour `i` of a qualitative palette (Tableau 10, then a darker variant of it).
pub(crate) fn colour(i: usize) -> RGBColor {
    const TAB10: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let (r, g, b) = TAB10[i % 10];
    if (i / 10).is_multiple_of(2) {
        RGBColor(r, g, b)
    } else {
        RGBColor(r / 2, g / 2, b / 2)
    }
}

/// At most `max` points of `pts`, evenly strided, always keeping the last.
pub(crate) fn decimate(pts: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if pts.len() <= max || max < 2 {
        return pts;
    }
    let stride = pts.len().div_ceil(max - 1);
    let last = *pts.last().expect("non-empty");
    let mut out: Vec<(f64, f64)> = pts.into_iter().step_by(stride).collect();
    if out.last() != Some(&last) {
        out.push(last);
    }
    out
}

/// `hi` rounded up for an axis (at least a small positive span).
pub(crate) fn axis_max(hi: f64) -> f64 {
    if hi.is_finite() && hi > 0.0 {
        hi * 1.08
    } else {
        1.0
    }
}

/// A byte count in binary units, e.g. `8 KiB`, `512 MiB`, `1.5 GiB`.
pub(crate) fn human_bytes(v: f64) -> String {
    drsftp_units::format_bytes(v.max(0.0).round() as u64)
}

/// Create `path`'s parent directory if it has one.
pub(crate) fn ensure_parent(path: &Path) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Polylines with at least `min_points` points (data series; axes, ticks and legend samples have 2).
    pub(crate) fn series_polylines(svg: &str, min_points: usize) -> usize {
        svg.split("<polyline")
            .skip(1)
            .filter(|el| {
                let Some(i) = el.find("points=\"") else {
                    return false;
                };
                let rest = &el[i + 8..];
                let pts = &rest[..rest.find('"').unwrap_or(0)];
                pts.split_whitespace().count() >= min_points
            })
            .count()
    }

    /// Every x/y/cx/cy/points coordinate in the SVG lies within the canvas declared by its width/height.
    pub(crate) fn assert_within_canvas(svg: &str) {
        assert!(
            svg.trim_start().starts_with("<svg"),
            "{}",
            &svg[..80.min(svg.len())]
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        let attr = |name: &str| -> f64 {
            let i = svg.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            svg[i..i + svg[i..].find('"').unwrap()].parse().unwrap()
        };
        let (w, h) = (attr("width"), attr("height"));
        for el in svg.split("<polyline").skip(1) {
            let i = el.find("points=\"").unwrap() + 8;
            for p in el[i..i + el[i..].find('"').unwrap()].split_whitespace() {
                let (x, y) = p.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!(
                    (0.0..=w).contains(&x) && (0.0..=h).contains(&y),
                    "{p} outside {w}x{h}"
                );
            }
        }
    }

    #[test]
    fn table_errors_name_the_file_and_line() {
        let p = Path::new("t.csv");
        let e = Table::parse(p, "").err().unwrap().to_string();
        assert!(e.contains("t.csv") && e.contains("empty"), "{e}");
        let e = Table::parse(p, "a,b\n1,2\n3\n").err().unwrap().to_string();
        assert!(e.contains("t.csv: line 3"), "{e}");
        let t = Table::parse(p, "a,b\n1,2\n3,x\n").unwrap();
        let e = t.num(&t.rows[1], 1).err().unwrap().to_string();
        assert!(e.contains("t.csv: line 3: column `b`: `x`"), "{e}");
        let e = t.col("zz").err().unwrap().to_string();
        assert!(e.contains("no `zz` column"), "{e}");
        // Trailing free text with commas is fine; an empty field is None.
        let t = Table::parse(p, "a,note\n,x,y\n").unwrap();
        assert_eq!(t.opt_num(&t.rows[0], 0).unwrap(), None);
    }

    #[test]
    fn helpers() {
        assert_eq!(human_bytes(8192.0), "8 KiB");
        assert_eq!(human_bytes(536870912.0), "512 MiB");
        assert_eq!(human_bytes(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5 GiB");
        let d = decimate((0..1000).map(|i| (i as f64, 0.0)).collect(), 100);
        assert!(d.len() <= 101 && d.last().unwrap().0 == 999.0);
        assert_eq!(
            bench_prefix(Path::new("/x/main.md")),
            PathBuf::from("/x/main")
        );
        assert_eq!(
            bench_prefix(Path::new("/x/main.runs.csv")),
            PathBuf::from("/x/main")
        );
        assert_eq!(bench_prefix(Path::new("/x/main")), PathBuf::from("/x/main"));
    }
}
