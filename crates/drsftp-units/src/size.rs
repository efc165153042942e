//! Byte sizes: `65536`, `64K`, `212.5K`, `16MB`, `1GiB`. Every suffix is binary (K = 1024), as the socket-buffer
//! sizes of the seeds ("64 KB" = 65536) and `--tcp-bs`/`--buffer` always meant.

use crate::number::{one_decimal, split, to_u64};
use crate::UnitError;

const UNITS: [(&str, u64); 4] = [
    ("T", 1 << 40),
    ("G", 1 << 30),
    ("M", 1 << 20),
    ("K", 1 << 10),
];

/// Parse a byte count: a number with an optional suffix `B`, `K`/`KB`/`KiB`, `M`/`MB`/`MiB`, `G`/`GB`/`GiB`,
/// `T`/`TB`/`TiB` (any case, all 1024-based). Fractions round to the nearest byte (`212.5K` = 217600).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let err = || UnitError::Size(s.to_string());
    let (v, unit) = split(s).ok_or_else(err)?;
    let unit = unit.to_ascii_lowercase();
    let mult = match unit.as_str() {
        "" | "b" => 1,
        _ => {
            let prefix = unit
                .strip_suffix("ib")
                .or_else(|| unit.strip_suffix('b'))
                .unwrap_or(&unit);
            UNITS
                .iter()
                .find(|(p, _)| p.eq_ignore_ascii_case(prefix))
                .ok_or_else(err)?
                .1
        }
    };
    to_u64(v * mult as f64).ok_or_else(err)
}

/// Format a byte count with the largest binary suffix it reaches and at most one decimal ("4M", "212.5K",
/// "123"); [`parse_size`] reads it back to within 0.05 of that suffix.
pub fn format_size(b: u64) -> String {
    for (unit, m) in UNITS {
        if b >= m {
            return format!("{}{unit}", one_decimal(b as f64 / m as f64));
        }
    }
    b.to_string()
}

/// Format a byte count for people: binary units spelled out, one decimal at most ("512 B", "8 KiB", "1.5 GiB");
/// [`parse_size`] reads it back like [`format_size`]'s output.
pub fn format_bytes(b: u64) -> String {
    for (unit, m) in UNITS {
        if b >= m {
            return format!("{} {unit}iB", one_decimal(b as f64 / m as f64));
        }
    }
    format!("{b} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("64KB").unwrap(), 65536);
        assert_eq!(parse_size("64 kib").unwrap(), 65536);
        assert_eq!(parse_size("4M").unwrap(), 4 << 20);
        assert_eq!(parse_size("16MB").unwrap(), 16 << 20);
        assert_eq!(parse_size("212.5K").unwrap(), 217_600);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("2T").unwrap(), 2 << 40);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size("123B").unwrap(), 123);
        assert_eq!(parse_size("0").unwrap(), 0);
        for bad in [
            "",
            "K",
            "1x",
            "-1K",
            "1.2.3K",
            "1e3",
            "NaN",
            "inf",
            "17000000T",
            "1KK",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(format_size(217_600), "212.5K");
        assert_eq!(format_size(16 << 20), "16M");
        assert_eq!(format_size(3 << 40), "3T");
        assert_eq!(format_size(1000), "1000");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(8192), "8 KiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
    }
}
