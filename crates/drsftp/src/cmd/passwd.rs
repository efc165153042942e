//! `drsftp passwd FILE NAME`: add or update a user in a users file (for `drsftp serve --users FILE`). The
//! password is read from stdin when it is not a terminal (scripts: `printf '%s\n' "$PW" | drsftp passwd ...`),
//! else prompted for twice without echo; it is never taken from the command line, where `ps` would show it.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use drsftp_io::server::{hash_password, UserEntry, UsersFile};

/// Add or update a login in a users file (argon2id hash, mode 0600).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The users file (created if missing).
    pub file: PathBuf,
    /// The login name.
    pub name: String,
    /// Directory this user sees as `/`: a path inside the served root (`/alice` or `alice`, both read from the
    /// served root; it must exist when the server starts). Default: the whole served root.
    #[arg(long, value_name = "DIR")]
    pub root: Option<String>,
    /// The user may read but not change the tree.
    #[arg(long)]
    pub read_only: bool,
}

/// The password: a line of stdin, or typed twice at a prompt.
fn read_password(name: &str) -> Result<String> {
    if !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("reading the password from stdin")?;
        let pw = line.trim_end_matches(['\r', '\n']).to_string();
        if pw.is_empty() {
            bail!("empty password on stdin");
        }
        return Ok(pw);
    }
    let pw = rpassword::prompt_password(format!("Password for {name}: "))?;
    let again = rpassword::prompt_password("Again: ")?;
    if pw != again {
        bail!("the passwords differ");
    }
    if pw.is_empty() {
        bail!("empty password");
    }
    Ok(pw)
}

/// Add or update the user.
pub fn run(args: Args) -> Result<()> {
    if args.name.is_empty() || args.name.contains(char::is_whitespace) || args.name.contains(':') {
        bail!("invalid user name {:?}", args.name);
    }
    let mut file = if args.file.exists() {
        UsersFile::load(&args.file)?
    } else {
        UsersFile::default()
    };
    let password = read_password(&args.name)?;
    let hash = hash_password(&password)?;
    let updated = file.user.iter().any(|u| u.name == args.name);
    file.upsert(UserEntry {
        name: args.name.clone(),
        hash,
        root: args.root,
        read_only: args.read_only,
    });
    file.save(&args.file)?;
    eprintln!(
        "drsftp: {} {} in {}",
        if updated { "updated" } else { "added" },
        args.name,
        args.file.display()
    );
    Ok(())
}
