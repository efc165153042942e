//! Who may log in: the users file (TOML, argon2id PHC hashes, per-user root and read-only flag) and the
//! in-memory [`Users`] the server checks `Action::CheckLogin` against, on a blocking thread (argon2 verification
//! takes tens of milliseconds on purpose).
//!
//! ```toml
//! [[user]]
//! name = "alice"
//! hash = "$argon2id$v=19$m=19456,t=2,p=1$...$..."
//! root = "/alice"      # optional: a directory inside the served root, seen as `/` by this user
//! read_only = false    # optional
//! ```
//!
//! A user's `root` is a path *inside the served root* (absolute or relative, both read from the served root), so
//! the per-user tree is confined exactly like the served one: it is resolved beneath the served root's fd once,
//! at start-up, and every later operation resolves beneath the user's own fd.

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use drsftp_storage::{FsStorage, Storage};
use serde::{Deserialize, Serialize};

/// Why the users file could not be read, written or used.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// Reading or writing the file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Not valid TOML of the expected shape.
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Others could change who may log in.
    #[error("{path}: group- or world-writable (mode {mode:o}); run chmod 600 on it")]
    Permissions {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// A hash that is not an argon2 PHC string, or hashing failed.
    #[error("user {user}: {message}")]
    Hash {
        /// The user.
        user: String,
        /// What is wrong.
        message: String,
    },
    /// A user's root cannot be opened beneath the served root.
    #[error("user {user}: root {root:?}: {message}")]
    Root {
        /// The user.
        user: String,
        /// The configured root.
        root: String,
        /// Why.
        message: String,
    },
}

/// One entry of the users file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserEntry {
    /// Login name.
    pub name: String,
    /// argon2id PHC string.
    pub hash: String,
    /// Directory inside the served root that this user sees as `/` (default: the served root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// The user may not change the tree.
    #[serde(default)]
    pub read_only: bool,
}

/// The users file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersFile {
    /// Entries, one per name.
    #[serde(default)]
    pub user: Vec<UserEntry>,
}

impl UsersFile {
    /// Reads `path`, refusing a file that is group- or world-writable.
    pub fn load(path: &Path) -> Result<UsersFile, UsersError> {
        let shown = path.display().to_string();
        let io = |source| UsersError::Io {
            path: shown.clone(),
            source,
        };
        let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(UsersError::Permissions { path: shown, mode });
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Self::parse(&text).map_err(|message| UsersError::Format {
            path: shown,
            message,
        })
    }

    /// Parses the TOML text; duplicate names are an error.
    pub fn parse(text: &str) -> Result<UsersFile, String> {
        let f: UsersFile = toml::from_str(text).map_err(|e| e.to_string())?;
        for (i, u) in f.user.iter().enumerate() {
            if u.name.is_empty() || u.name.contains(char::is_whitespace) {
                return Err(format!("invalid user name {:?}", u.name));
            }
            if f.user[..i].iter().any(|v| v.name == u.name) {
                return Err(format!("user {:?} listed twice", u.name));
            }
        }
        Ok(f)
    }

    /// Writes the file atomically (temporary file in the same directory, then rename) with mode 0600.
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        let text = toml::to_string_pretty(self).map_err(|e| UsersError::Format {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        // An existing file keeps its owner: root editing the service account's users file (the packaged
        // /etc/drsftp/users.toml, in a directory only root may write) must leave it readable by the service.
        let old = std::fs::metadata(path).ok();
        crate::private_file::replace(path, text.as_bytes(), |f| match &old {
            Some(old) => {
                let new = f.metadata()?;
                if (old.uid(), old.gid()) != (new.uid(), new.gid()) {
                    std::os::unix::fs::fchown(f, Some(old.uid()), Some(old.gid()))?;
                }
                Ok(())
            }
            None => Ok(()),
        })
        .map_err(|(at, source)| UsersError::Io {
            path: at.display().to_string(),
            source,
        })
    }

    /// Adds `name` or replaces its entry.
    pub fn upsert(&mut self, entry: UserEntry) {
        match self.user.iter_mut().find(|u| u.name == entry.name) {
            Some(u) => *u = entry,
            None => self.user.push(entry),
        }
    }
}

/// An argon2id PHC string for `password` with a fresh random salt and the crate's default cost
/// (19 MiB, 2 passes: OWASP's recommendation).
pub fn hash_password(password: &str) -> Result<String, UsersError> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| UsersError::Hash {
            user: String::new(),
            message: e.to_string(),
        })
}

/// One account as the server holds it.
struct Account {
    hash: String,
    read_only: bool,
    /// The user's own tree, if the entry named a root.
    storage: Option<Arc<dyn Storage>>,
    /// That root as a normalised path of the served tree (`/alice`), for a frontend's movers.
    root: Option<String>,
}

/// A successful login: how the session continues.
#[derive(Clone)]
pub struct Grant {
    /// The session may not change the tree.
    pub read_only: bool,
    /// The tree the session serves, if not the server's.
    pub storage: Option<Arc<dyn Storage>>,
    /// Where that tree is in the served one (normalised, `/alice`): a striped frontend names its movers' paths
    /// beneath it, since they serve the whole tree.
    pub root: Option<String>,
}

/// The accounts a server accepts (besides anonymous), checked in constant time per attempt: an unknown user is
/// verified against a dummy hash, so timing does not tell which names exist.
#[derive(Default)]
pub struct Users {
    accounts: HashMap<String, Account>,
    dummy: Option<String>,
}

impl fmt::Debug for Users {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names only: hashes stay out of logs.
        let mut names: Vec<&String> = self.accounts.keys().collect();
        names.sort();
        f.debug_struct("Users").field("names", &names).finish()
    }
}

impl Users {
    /// No accounts.
    pub fn new() -> Users {
        Users::default()
    }

    /// Number of accounts.
    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    /// No accounts.
    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }

    /// Adds (or replaces) `name` with a plain password, hashed now (for `--user NAME:PASSWORD`).
    pub fn add_password(&mut self, name: &str, password: &str) -> Result<(), UsersError> {
        let hash = hash_password(password).map_err(|e| UsersError::Hash {
            user: name.into(),
            message: e.to_string(),
        })?;
        self.insert(name, hash, false, None);
        Ok(())
    }

    fn insert(
        &mut self,
        name: &str,
        hash: String,
        read_only: bool,
        storage: Option<(Arc<dyn Storage>, String)>,
    ) {
        if self.dummy.is_none() {
            self.dummy = Some(hash.clone());
        }
        self.accounts.insert(
            name.to_string(),
            Account {
                hash,
                read_only,
                root: storage.as_ref().map(|s| s.1.clone()),
                storage: storage.map(|s| s.0),
            },
        );
    }

    /// Adds every entry of `file`; roots are opened beneath `base` (the served tree) now.
    pub fn add_file(&mut self, file: &UsersFile, base: &FsStorage) -> Result<(), UsersError> {
        for u in &file.user {
            let parsed = PasswordHash::new(&u.hash).map_err(|e| UsersError::Hash {
                user: u.name.clone(),
                message: format!("not a PHC hash string: {e}"),
            })?;
            if parsed.algorithm.as_str() != "argon2id" {
                return Err(UsersError::Hash {
                    user: u.name.clone(),
                    message: format!("hash algorithm {} (want argon2id)", parsed.algorithm),
                });
            }
            let storage = match &u.root {
                None => None,
                Some(r) => {
                    let v = drsftp_storage::join_virtual("/", r);
                    let sub = base.subtree(&v).map_err(|e| UsersError::Root {
                        user: u.name.clone(),
                        root: r.clone(),
                        message: e.to_string(),
                    })?;
                    Some((Arc::new(sub) as Arc<dyn Storage>, v))
                }
            };
            self.insert(&u.name, u.hash.clone(), u.read_only, storage);
        }
        Ok(())
    }

    /// Checks `name`/`password` (blocking: call from a blocking thread). Unknown names cost one verification too.
    pub fn verify(&self, name: &str, password: &str) -> Option<Grant> {
        let account = self.accounts.get(name);
        let hash = account.map(|a| &a.hash).or(self.dummy.as_ref())?;
        let ok = PasswordHash::new(hash).is_ok_and(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        });
        let a = account.filter(|_| ok)?;
        Some(Grant {
            read_only: a.read_only,
            storage: a.storage.clone(),
            root: a.root.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_verify_and_file_round_trip() {
        let h = hash_password("pw").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        let mut f = UsersFile::default();
        f.upsert(UserEntry {
            name: "alice".into(),
            hash: h.clone(),
            root: Some("alice".into()),
            read_only: true,
        });
        f.upsert(UserEntry {
            name: "alice".into(),
            hash: h,
            root: None,
            read_only: false,
        });
        assert_eq!(f.user.len(), 1);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users.toml");
        f.save(&p).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(UsersFile::load(&p).unwrap(), f);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(matches!(
            UsersFile::load(&p),
            Err(UsersError::Permissions { .. })
        ));
        let base = FsStorage::new(dir.path()).unwrap();
        let mut users = Users::new();
        users.add_file(&f, &base).unwrap();
        assert!(users.verify("alice", "pw").is_some());
        assert!(users.verify("alice", "nope").is_none());
        assert!(users.verify("bob", "pw").is_none());
    }

    #[test]
    fn parse_refuses_duplicates_and_bad_roots_fail_to_load() {
        let two = "[[user]]\nname = \"a\"\nhash = \"x\"\n[[user]]\nname = \"a\"\nhash = \"y\"\n";
        assert!(UsersFile::parse(two).unwrap_err().contains("twice"));
        let dir = tempfile::tempdir().unwrap();
        let base = FsStorage::new(dir.path()).unwrap();
        let f = UsersFile {
            user: vec![UserEntry {
                name: "a".into(),
                hash: hash_password("p").unwrap(),
                root: Some("../..".into()),
                read_only: false,
            }],
        };
        // `../..` clamps at the served root's `/`; a missing directory is an error.
        let mut users = Users::new();
        users.add_file(&f, &base).unwrap();
        let f = UsersFile {
            user: vec![UserEntry {
                root: Some("missing".into()),
                ..f.user[0].clone()
            }],
        };
        assert!(matches!(
            Users::new().add_file(&f, &base),
            Err(UsersError::Root { .. })
        ));
    }
}
