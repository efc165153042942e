//! `drsftp serve --config FILE` and `--print-config`: a TOML file whose keys are `serve`'s long flags with the
//! same value syntax (`data-ports = "50000-51000"`, `max-sessions = 256`, `anonymous = true`, `user = [..]`).
//! The file is turned into command-line tokens and parsed by the same clap definition as the command line, so
//! a value means exactly what the flag means and there is one validator; flags given on the command line win
//! (clap's `value_source` tells which were), and a key that is no flag is an error naming it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Args as _, FromArgMatches};

use super::serve::Args;

/// Flags that make no sense in the file (they name the file, or ask for output).
const NOT_KEYS: &[&str] = &["config", "print-config", "help"];

/// Flags whose values are secrets: never printed by `--print-config`.
const SECRET: &[&str] = &["user"];

fn command() -> clap::Command {
    Args::augment_args(clap::Command::new("drsftp serve").no_binary_name(true))
}

/// The tokens one TOML `key = value` stands for.
pub(crate) fn tokens(
    arg: &clap::Arg,
    key: &str,
    v: &toml::Value,
    out: &mut Vec<String>,
) -> Result<()> {
    let flag = matches!(arg.get_action(), ArgAction::SetTrue);
    let scalar = |v: &toml::Value| -> Result<String> {
        Ok(match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => bail!(
                "key {key:?}: expected a string, number or boolean, not {}",
                other.type_str()
            ),
        })
    };
    match v {
        toml::Value::Boolean(b) if flag => {
            if *b {
                out.push(format!("--{key}"));
            }
        }
        _ if flag => bail!("key {key:?}: expected true or false"),
        toml::Value::Array(items) if matches!(arg.get_action(), ArgAction::Append) => {
            for i in items {
                out.push(format!("--{key}={}", scalar(i)?));
            }
        }
        toml::Value::Array(_) => bail!("key {key:?} takes one value, not a list"),
        v => out.push(format!("--{key}={}", scalar(v)?)),
    }
    Ok(())
}

/// The tokens the command line gave for `arg` (from its raw values, so they are parsed again identically).
pub(crate) fn cli_tokens(arg: &clap::Arg, long: &str, m: &ArgMatches, out: &mut Vec<String>) {
    let id = arg.get_id().as_str();
    if m.value_source(id) != Some(ValueSource::CommandLine) {
        return;
    }
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        if m.get_flag(id) {
            out.push(format!("--{long}"));
        }
        return;
    }
    for raw in m.get_raw(id).into_iter().flatten() {
        out.push(format!("--{long}={}", raw.to_string_lossy()));
    }
}

/// Reads `path`: each key must be a `serve` flag.
fn read_file(path: &Path) -> Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--config {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("--config {}", path.display()))?;
    let cmd = command();
    for key in table.keys() {
        let known = !NOT_KEYS.contains(&key.as_str())
            && cmd
                .get_arguments()
                .any(|a| a.get_long() == Some(key.as_str()));
        if !known {
            bail!(
                "--config {}: unknown key {key:?} (keys are `drsftp serve` long flags, e.g. data-ports, \
                 transfer-log, max-sessions)",
                path.display()
            );
        }
    }
    Ok(table)
}

/// The effective serve settings: the config file named on the command line (if any) under the command line's
/// own flags. Returns them with their matches (for `--print-config`) and the config file's path (for reloads).
pub fn resolve(cli: &ArgMatches) -> Result<(Args, ArgMatches, Option<PathBuf>)> {
    let config = cli.get_one::<PathBuf>("config").cloned();
    let cmd = command();
    let mut argv = vec![];
    if let Some(path) = &config {
        let table = read_file(path)?;
        for (key, v) in &table {
            let arg = cmd
                .get_arguments()
                .find(|a| a.get_long() == Some(key.as_str()))
                .expect("checked by read_file");
            // The command line wins: skip keys it set.
            if cli.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
                continue;
            }
            tokens(arg, key, v, &mut argv)
                .with_context(|| format!("--config {}", path.display()))?;
        }
    }
    for arg in cmd.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if NOT_KEYS.contains(&long) {
            continue;
        }
        cli_tokens(arg, long, cli, &mut argv);
    }
    if cli.get_flag("print_config") {
        argv.push("--print-config".into());
    }
    let m = cmd.try_get_matches_from(&argv).map_err(|e| {
        let origin = config.as_ref().map_or(String::new(), |p| {
            format!(" (with --config {})", p.display())
        });
        anyhow!("{}{origin}", e.render().to_string().trim_end())
    })?;
    let args = Args::from_arg_matches(&m).map_err(|e| anyhow!("{e}"))?;
    Ok((args, m, config))
}

/// TOML of every setting in `m` (defaults included), secrets left out; `--config` of the output reproduces it.
pub fn print(m: &ArgMatches) -> String {
    let mut out = String::from(
        "# drsftp serve: effective configuration (command line over --config over defaults)\n",
    );
    for arg in command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let id = arg.get_id().as_str();
        if NOT_KEYS.contains(&long) {
            continue;
        }
        if SECRET.contains(&long) {
            let n = m.get_raw(id).map_or(0, |r| r.len());
            if n > 0 {
                out.push_str(&format!(
                    "# {long}: {n} value(s) not shown (they hold passwords)\n"
                ));
            }
            continue;
        }
        if matches!(arg.get_action(), ArgAction::SetTrue) {
            out.push_str(&format!("{long} = {}\n", m.get_flag(id)));
            continue;
        }
        let raws: Vec<String> = m
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|r| r.to_string_lossy().into_owned())
            .collect();
        let value = |s: &str| -> toml::Value {
            // Plain counts stay numbers (`max-sessions = 256`); sizes, durations and addresses stay strings.
            match s.parse::<i64>() {
                Ok(i) if i.to_string() == s => toml::Value::Integer(i),
                _ => toml::Value::String(s.to_string()),
            }
        };
        match (raws.len(), arg.get_action()) {
            (0, _) => out.push_str(&format!("# {long} = (not set)\n")),
            (_, ArgAction::Append) => {
                let a = toml::Value::Array(raws.iter().map(|r| value(r)).collect());
                out.push_str(&format!("{long} = {a}\n"));
            }
            _ => out.push_str(&format!("{long} = {}\n", value(&raws[0]))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> ArgMatches {
        command().try_get_matches_from(args).unwrap()
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("serve.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn file_values_under_command_line_flags() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "root = \"/srv\"\nmax-sessions = 7\nlogin-timeout = \"5s\"\nanonymous = true\n\
             data-ports = \"50000-50100\"\nlisten = \"127.0.0.1:9\"\n",
        );
        let c = p.to_str().unwrap();
        let (a, m, cfg) = resolve(&cli(&["--config", c, "--listen", "[::1]:0"])).unwrap();
        assert_eq!(cfg.as_deref(), Some(p.as_path()));
        assert_eq!(a.root.as_deref(), Some(Path::new("/srv")));
        assert_eq!(a.max_sessions, 7);
        assert_eq!(a.login_timeout, std::time::Duration::from_secs(5));
        assert!(a.anonymous);
        assert_eq!(a.data_ports, Some((50000, 50100)));
        assert_eq!(a.listen, "[::1]:0", "the command line wins");
        // Printing and reading back gives the same settings.
        let text = print(&m);
        assert!(text.contains("max-sessions = 7\n"), "{text}");
        assert!(text.contains("data-ports = \"50000-50100\"\n"), "{text}");
        let p2 = write(d.path(), &text);
        let (b, _, _) = resolve(&cli(&["--config", p2.to_str().unwrap()])).unwrap();
        assert_eq!(
            format!("{a:?}").replace("[::1]:0", "X"),
            format!("{b:?}").replace("[::1]:0", "X")
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "root = \"/srv\"\nmax-sesions = 7\n");
        let e = resolve(&cli(&["--config", p.to_str().unwrap()])).unwrap_err();
        assert!(
            format!("{e:#}").contains("unknown key \"max-sesions\""),
            "{e:#}"
        );
        let p = write(d.path(), "root = \"/srv\"\nlogin-timeout = \"soon\"\n");
        let e = resolve(&cli(&["--config", p.to_str().unwrap()])).unwrap_err();
        assert!(format!("{e:#}").contains("--login-timeout"), "{e:#}");
        let p = write(d.path(), "max-sessions = 7\n");
        let e = resolve(&cli(&["--config", p.to_str().unwrap()])).unwrap_err();
        assert!(
            format!("{e:#}").contains("--root"),
            "root is still required: {e:#}"
        );
    }

    #[test]
    fn secrets_are_not_printed() {
        let (_, m, _) = resolve(&cli(&[
            "--root",
            "/srv",
            "--user",
            "bob:hunter2",
            "--users",
            "/etc/u.toml",
        ]))
        .unwrap();
        let text = print(&m);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("# user: 1 value(s) not shown"), "{text}");
        assert!(text.contains("users = \"/etc/u.toml\""), "{text}");
    }
}
