//! The rules in force: read from `[server] access_rules` at start, read again when the file
//! changes (Trino's `security.refresh-period`, here at most once a second, checked when rules
//! are asked for), so a change takes effect without a restart.
//!
//! ```text
//!   current() ──(≥ 1 s since the last look)──► stat the file: modified time and length changed?
//!        └─► parse ──ok──► the new rules from now on
//!                  └─fails──► the previous rules stay; the error is logged (a half-written
//!                             file never opens access)
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::rules::{Rules, RulesError};

/// How often the file is looked at, at most.
const REFRESH: Duration = Duration::from_secs(1);

/// The rules of a server (module docs).
#[derive(Debug)]
pub struct RulesSource {
    path: Option<PathBuf>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    rules: Arc<Rules>,
    /// The file's (modified, length) when `rules` were read from it.
    stamp: Option<(SystemTime, u64)>,
    looked: Instant,
}

/// Why the rules file cannot be used at start: its path and the reason.
#[derive(Debug, thiserror::Error)]
#[error("server.access_rules {}: {reason}", path.display())]
pub struct RulesFileError {
    /// The file.
    pub path: PathBuf,
    /// An I/O error or [`RulesError`], on one line.
    pub reason: String,
}

impl RulesSource {
    /// No rules file: every user holds every privilege.
    pub fn allow_all() -> Self {
        Self {
            path: None,
            state: Mutex::new(State {
                rules: Arc::new(Rules::allow_all()),
                stamp: None,
                looked: Instant::now(),
            }),
        }
    }

    /// The rules of the file at `path`, followed from now on.
    ///
    /// Errors: the file cannot be read or is not a valid rules file ([`RulesError`]).
    pub fn load(path: &Path) -> Result<Self, RulesFileError> {
        let (rules, stamp) = read(path).map_err(|reason| RulesFileError {
            path: path.to_path_buf(),
            reason,
        })?;
        Ok(Self {
            path: Some(path.to_path_buf()),
            state: Mutex::new(State {
                rules: Arc::new(rules),
                stamp: Some(stamp),
                looked: Instant::now(),
            }),
        })
    }

    /// The rules in force now (the file is looked at again at most once a second).
    pub fn current(&self) -> Arc<Rules> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(path) = &self.path
            && state.looked.elapsed() >= REFRESH
        {
            state.looked = Instant::now();
            let stamp = stamp_of(path).ok();
            if stamp.is_some() && stamp != state.stamp {
                match read(path) {
                    Ok((rules, stamp)) => {
                        tracing::info!(path = %path.display(), "access rules read again");
                        state.rules = Arc::new(rules);
                        state.stamp = Some(stamp);
                    }
                    Err(reason) => {
                        // Not again until the file changes once more.
                        state.stamp = stamp;
                        tracing::error!(
                            path = %path.display(),
                            %reason,
                            "access rules changed but cannot be used; the previous rules stay"
                        );
                    }
                }
            }
        }
        Arc::clone(&state.rules)
    }
}

fn stamp_of(path: &Path) -> std::io::Result<(SystemTime, u64)> {
    let meta = std::fs::metadata(path)?;
    Ok((meta.modified()?, meta.len()))
}

fn read(path: &Path) -> Result<(Rules, (SystemTime, u64)), String> {
    let stamp = stamp_of(path).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let rules = Rules::parse(&text).map_err(|e: RulesError| e.to_string())?;
    Ok((rules, stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::rules::{Identity, Privilege};

    /// A changed file takes effect after the refresh; a broken one keeps the rules before it.
    #[test]
    fn a_changed_file_is_read_again_and_a_broken_one_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.json");
        let bob = Identity {
            user: "bob".into(),
            groups: vec![],
        };
        let selects = |source: &RulesSource| {
            source
                .current()
                .table_privileges(&bob, "local", "s", "t")
                .contains(&Privilege::Select)
        };
        std::fs::write(&path, r#"{"tables": []}"#).unwrap();
        let source = RulesSource::load(&path).unwrap();
        assert!(!selects(&source));
        std::fs::write(
            &path,
            r#"{"tables": [{"user": "bob", "privileges": ["SELECT"]}]}"#,
        )
        .unwrap();
        std::thread::sleep(REFRESH + Duration::from_millis(50));
        assert!(selects(&source));
        std::fs::write(&path, r#"{"tables": [{"user": "bob""#).unwrap();
        std::thread::sleep(REFRESH + Duration::from_millis(50));
        assert!(selects(&source), "a broken file keeps the rules in force");
        let e = RulesSource::load(&path).unwrap_err().to_string();
        assert!(e.starts_with("server.access_rules "), "{e}");
    }
}
