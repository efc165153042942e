//! `drsftp ls URL`: list a directory on a GridFTP/FTP server with MLSD (falling back to NLST/LIST when the server
//! does not know MLSD), printing names, a long form (type, size, modification time), or JSON.

use std::time::Duration;

use anyhow::{Context, Result};
use drsftp_io::client::{Client, ListKind};
use serde_json::json;

use crate::url::parse_url;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory (or file) to list: ftp://[user[:pass]@]host[:port]/path
    url: String,
    /// Long form: type, size, modification time (UTC) and name; with a server that lacks MLSD, its raw LIST lines.
    #[arg(short, long)]
    long: bool,
    /// Print one JSON object {"url", "entries": [{"name", "type", "size", "modify", ...}]} on stdout.
    #[arg(long)]
    json: bool,
    /// Timeout for connecting and for each server reply, e.g. 30s.
    #[arg(long, value_name = "DURATION", default_value = "60s",
          value_parser = super::units_arg::duration)]
    timeout: Duration,
    #[command(flatten)]
    tls: super::tls_arg::TlsArgs,
}

/// One MLSD entry: its name and facts (lower-cased fact names).
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    name: String,
    facts: Vec<(String, String)>,
}

impl Entry {
    fn fact(&self, name: &str) -> Option<&str> {
        self.facts
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn kind(&self) -> &str {
        self.fact("type").unwrap_or("?")
    }
}

/// Parses MLSD lines (`fact=value;fact=value; name`, RFC 3659 §7). `.`/`..` (cdir/pdir) are dropped.
fn parse_mlsd(text: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let Some((facts, name)) = line.split_once(' ') else {
            continue;
        };
        if name.is_empty() {
            continue;
        }
        let facts: Vec<(String, String)> = facts
            .split(';')
            .filter_map(|f| f.split_once('='))
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
            .collect();
        let e = Entry {
            name: name.to_string(),
            facts,
        };
        let kind = e.kind().to_ascii_lowercase();
        if kind == "cdir" || kind == "pdir" || e.name == "." || e.name == ".." {
            continue;
        }
        out.push(e);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `YYYYMMDDHHMMSS[.sss]` → `YYYY-MM-DD HH:MM`.
fn format_modify(m: &str) -> String {
    if m.len() >= 12 && m[..12].bytes().all(|b| b.is_ascii_digit()) {
        format!(
            "{}-{}-{} {}:{}",
            &m[..4],
            &m[4..6],
            &m[6..8],
            &m[8..10],
            &m[10..12]
        )
    } else {
        m.to_string()
    }
}

fn long_line(e: &Entry) -> String {
    let t = match e.kind().to_ascii_lowercase().as_str() {
        "dir" => 'd',
        "file" => '-',
        k if k.starts_with("os.unix=slink") => 'l',
        _ => '?',
    };
    let size = e.fact("size").unwrap_or("-");
    let modify = e.fact("modify").map(format_modify).unwrap_or_default();
    format!("{t} {size:>14} {modify:16} {}", e.name)
}

fn entry_json(e: &Entry) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    m.insert("name".into(), json!(e.name));
    for (k, v) in &e.facts {
        let val = match k.as_str() {
            "size" => v
                .parse::<u64>()
                .map(|n| json!(n))
                .unwrap_or_else(|_| json!(v)),
            "type" => json!(v.to_ascii_lowercase()),
            _ => json!(v),
        };
        m.insert(k.clone(), val);
    }
    serde_json::Value::Object(m)
}

/// What the server gave.
enum Listing {
    Mlsd(Vec<Entry>),
    /// NLST names or LIST lines (no MLSD on this server).
    Lines(Vec<String>),
}

async fn fetch(args: &Args) -> Result<Listing> {
    let mut url = parse_url(&args.url)?;
    crate::credentials::fill(&mut url)?;
    let tls = args.tls.settings()?;
    let mut client =
        Client::connect_tls(&url.authority(), &url.user, &url.pass, args.timeout, &tls)
            .await
            .with_context(|| format!("logging in to {}", url.authority()))?;
    let listing = match client.list(&url.path, ListKind::Mlsd).await {
        Ok(text) => Listing::Mlsd(parse_mlsd(&text)),
        Err(e) if matches!(e.reply_code(), Some(500 | 502 | 504)) => {
            tracing::info!("MLSD refused ({e}); falling back");
            let kind = if args.long {
                ListKind::List
            } else {
                ListKind::Nlst
            };
            let text = client
                .list(&url.path, kind)
                .await
                .with_context(|| format!("listing {url}"))?;
            Listing::Lines(
                text.lines()
                    .map(|l| l.trim_end_matches('\r').to_string())
                    .filter(|l| !l.is_empty())
                    .collect(),
            )
        }
        Err(e) => return Err(anyhow::Error::new(e).context(format!("listing {url}"))),
    };
    if let Err(e) = client.quit().await {
        tracing::debug!("QUIT: {e}");
    }
    Ok(listing)
}

pub fn run(args: Args) -> Result<()> {
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let listing = rt.block_on(fetch(&args));
    let listing = match listing {
        Ok(l) => l,
        Err(e) => {
            if args.json {
                println!("{}", json!({"url": args.url, "error": format!("{e:#}")}));
            }
            return Err(e);
        }
    };
    match (listing, args.json) {
        (Listing::Mlsd(entries), true) => {
            let list: Vec<_> = entries.iter().map(entry_json).collect();
            println!("{}", json!({"url": args.url, "entries": list}));
        }
        (Listing::Lines(lines), true) => {
            let list: Vec<_> = lines.iter().map(|l| json!({"line": l})).collect();
            println!("{}", json!({"url": args.url, "entries": list}));
        }
        (Listing::Mlsd(entries), false) => {
            for e in &entries {
                if args.long {
                    println!("{}", long_line(e));
                } else {
                    println!("{}", e.name);
                }
            }
        }
        (Listing::Lines(lines), false) => {
            for l in lines {
                println!("{l}");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlsd_globus_lines() {
        let text = "Type=cdir;Modify=20261122145117;Size=4096;Perm=cfmpel; .\r\n\
                    Type=pdir;Modify=20261122145117;Size=4096;Perm=cfmpel; ..\r\n\
                    Type=file;Modify=20261122145117;Size=209715200;Perm=r;UNIX.mode=0644; f200M\r\n\
                    Type=dir;Modify=20261122145000;Size=4096;Perm=el; a dir\r\n";
        let e = parse_mlsd(text);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].name, "a dir");
        assert_eq!(e[1].fact("size"), Some("209715200"));
        assert_eq!(
            long_line(&e[0]),
            format!("d {:>14} 2026-11-22 14:50 a dir", "4096")
        );
        let j = entry_json(&e[1]);
        assert_eq!(j["size"], json!(209715200u64));
        assert_eq!(j["type"], json!("file"));
        assert_eq!(j["name"], json!("f200M"));
    }
}
