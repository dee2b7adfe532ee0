//! Users and passwords: argon2 hashes from the configuration, or plain `--user NAME:PASSWORD`
//! quick starts hashed at start-up; HTTP Basic credentials as Flight clients send them.

use std::collections::HashMap;

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// Why a user cannot be added or a password hashed; one line naming the user where there is one.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    /// `password_hash` of a `[[server.user]]` is not an argon2 PHC string.
    #[error("user {name}: invalid password hash: {reason}")]
    InvalidHash {
        /// The user's name.
        name: String,
        /// The PHC parser's reason (password-hash's error, which is no `std::error::Error`
        /// without its `std` feature).
        reason: argon2::password_hash::Error,
    },
    /// A `--user` flag is not `NAME:PASSWORD` with a name.
    #[error("--user expects NAME:PASSWORD, got {0:?}")]
    NotNamePassword(String),
    /// An empty password (`--user NAME:`, `hash-password` of nothing).
    #[error("{}an empty password is refused", .0.as_ref().map(|n| format!("--user {n}: ")).unwrap_or_default())]
    EmptyPassword(Option<String>),
    /// argon2 failed to hash (its parameters or the salt).
    #[error("hashing password: {0}")]
    Hashing(argon2::password_hash::Error),
    /// Login is required (`server.auth = "basic"`) and no user is configured.
    #[error(
        "no users configured: add [[server.user]] entries, --user NAME:PASSWORD or \
         [server.jwt] (or set server.auth = \"none\" to serve without login)"
    )]
    NoUsers,
}

/// Known users, their argon2 password hashes (PHC strings) and groups.
#[derive(Debug, Clone, Default)]
pub struct Users {
    hashes: HashMap<String, String>,
    groups: HashMap<String, Vec<String>>,
}

impl Users {
    /// Adds a user with an argon2 PHC hash (`$argon2id$...`). Errors if the hash does not parse.
    pub fn add_hash(&mut self, name: &str, phc: &str) -> Result<(), UserError> {
        PasswordHash::new(phc).map_err(|reason| UserError::InvalidHash {
            name: name.to_string(),
            reason,
        })?;
        self.hashes.insert(name.to_string(), phc.to_string());
        Ok(())
    }

    /// Adds a user from `NAME:PASSWORD`, hashing the password.
    ///
    /// Errors: no `:`, an empty name or an empty password.
    pub fn add_plain(&mut self, spec: &str) -> Result<(), UserError> {
        let (name, password) = spec
            .split_once(':')
            .filter(|(n, _)| !n.is_empty())
            .ok_or_else(|| UserError::NotNamePassword(spec.to_string()))?;
        if password.is_empty() {
            return Err(UserError::EmptyPassword(Some(name.to_string())));
        }
        let hash = hash_password(password)?;
        self.hashes.insert(name.to_string(), hash);
        Ok(())
    }

    /// Puts user `name` in `groups` (which access rules can name).
    pub fn set_groups(&mut self, name: &str, groups: Vec<String>) {
        self.groups.insert(name.to_string(), groups);
    }

    /// The groups of user `name` (none for an unknown user).
    pub fn groups(&self, name: &str) -> Vec<String> {
        self.groups.get(name).cloned().unwrap_or_default()
    }

    /// Whether any user is configured.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// How many users are configured.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Checks a password; unknown users and wrong passwords are both `false`. An unknown user
    /// costs one argon2 verification too (against a hash of no one's password), so the time
    /// taken does not tell which names exist. CPU-bound (tens of milliseconds): call it off the
    /// async runtime.
    pub fn verify(&self, name: &str, password: &str) -> bool {
        static NOBODY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let known = self.hashes.get(name);
        let phc = match known {
            Some(phc) => phc.as_str(),
            None => NOBODY.get_or_init(|| {
                hash_password(&uuid::Uuid::new_v4().to_string()).unwrap_or_default()
            }),
        };
        let Ok(parsed) = PasswordHash::new(phc) else {
            return false;
        };
        let matches = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        matches && known.is_some()
    }
}

/// Hashes a password with argon2id and a random salt (PHC string, for `password_hash` in config).
///
/// Errors: an empty password; a hashing failure.
pub fn hash_password(password: &str) -> Result<String, UserError> {
    if password.is_empty() {
        return Err(UserError::EmptyPassword(None));
    }
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(UserError::Hashing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_passwords() {
        let mut users = Users::default();
        users.add_plain("alice:secret").unwrap();
        assert!(users.verify("alice", "secret"));
        assert!(!users.verify("alice", "wrong"));
        assert!(!users.verify("bob", "secret"));
        assert!(users.add_plain("nocolon").is_err());
        assert!(matches!(
            users.add_plain("alice:"),
            Err(UserError::EmptyPassword(Some(name))) if name == "alice"
        ));
        assert_eq!(
            users.add_plain("alice:").unwrap_err().to_string(),
            "--user alice: an empty password is refused"
        );
        assert!(hash_password("").is_err());
        let phc = hash_password("pw").unwrap();
        users.add_hash("carol", &phc).unwrap();
        assert!(users.verify("carol", "pw"));
        assert!(users.add_hash("dave", "not-a-hash").is_err());
    }
}
