//! Login with a bearer JWT (`[server.jwt]`): the identity provider's keys, read from a file or
//! URL and read again when a token names a key they lack, and the verification of
//! `input/src/jwt.rs`.
//!
//! ```text
//!   authorization: Bearer <jwt> (handshake, or any call: ADBC's authorization_header, JDBC's
//!   token) ──► verify with the keys held ──(unknown kid, keys older than a minute)──►
//!   keys read again, verified once more ──► user, groups, expiry ──► a session until `exp`
//! ```

use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use iceflight_input::config::JwtConfig;
use iceflight_input::jwt::{JwtError, JwtIdentity, JwtRules, parse_jwks, verify};
use jsonwebtoken::jwk::JwkSet;

/// Keys are read again on an unknown key id at most this often.
const REFRESH: Duration = Duration::from_secs(60);

/// The JWT login of a server (module docs).
#[derive(Debug)]
pub struct JwtLogin {
    rules: JwtRules,
    /// A file path or an `http(s)://` URL.
    jwks: String,
    keys: RwLock<JwkSet>,
    read_at: Mutex<Instant>,
}

impl JwtLogin {
    /// Reads the provider's keys named by `config`.
    ///
    /// Errors: the keys cannot be read or are not a JWKS (one line naming where).
    pub async fn load(config: &JwtConfig) -> Result<Self, String> {
        let keys = read_keys(&config.jwks).await?;
        Ok(Self {
            rules: JwtRules {
                issuer: config.issuer.clone(),
                audience: config.audience.clone(),
                user_claim: config.user_claim.clone(),
                groups_claim: config.groups_claim.clone(),
                leeway: config.leeway,
            },
            jwks: config.jwks.clone(),
            keys: RwLock::new(keys),
            read_at: Mutex::new(Instant::now()),
        })
    }

    /// Who `token` names, when it verifies (`input/src/jwt.rs`); an unknown key id has the
    /// keys read again first (at most once a minute), as a provider rotates its keys.
    ///
    /// Errors: [`JwtError`].
    pub async fn verify(&self, token: &str) -> Result<JwtIdentity, JwtError> {
        let first = verify(
            token,
            &self.keys.read().unwrap_or_else(|p| p.into_inner()),
            &self.rules,
        );
        let Err(JwtError::UnknownKey(kid)) = first else {
            return first;
        };
        let due = {
            let mut read_at = self.read_at.lock().unwrap_or_else(|p| p.into_inner());
            let due = read_at.elapsed() >= REFRESH;
            if due {
                *read_at = Instant::now();
            }
            due
        };
        if !due {
            return Err(JwtError::UnknownKey(kid));
        }
        match read_keys(&self.jwks).await {
            Ok(keys) => *self.keys.write().unwrap_or_else(|p| p.into_inner()) = keys,
            Err(e) => {
                tracing::warn!(jwks = %self.jwks, error = %e, "reading the JWT keys again failed")
            }
        }
        verify(
            token,
            &self.keys.read().unwrap_or_else(|p| p.into_inner()),
            &self.rules,
        )
    }
}

/// Whether a bearer token has a JWT's shape (three dot-separated parts), not a session's.
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3
}

async fn read_keys(jwks: &str) -> Result<JwkSet, String> {
    let text = if jwks.starts_with("https://") || jwks.starts_with("http://") {
        let response = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?
            .get(jwks)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| format!("server.jwt.jwks {jwks}: {e}"))?;
        response
            .text()
            .await
            .map_err(|e| format!("server.jwt.jwks {jwks}: {e}"))?
    } else {
        tokio::fs::read_to_string(jwks)
            .await
            .map_err(|e| format!("server.jwt.jwks {jwks}: {e}"))?
    };
    parse_jwks(&text).map_err(|e| format!("server.jwt.jwks {jwks}: {e}"))
}
