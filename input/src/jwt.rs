//! Bearer JSON Web Tokens from an identity provider (`[server.jwt]`): the signature checked
//! against the provider's published keys (a JWKS), then the issuer, audience, expiry and
//! not-before, then the user and groups read from the configured claims. The token is
//! untrusted text from any client: every outcome is a value or a [`JwtError`], never a panic.
//!
//! ```text
//!   header (alg, kid) ──► the JWKS key of that kid (the only key when there is no kid)
//!     alg: an asymmetric one (RS*, PS*, ES256/384, EdDSA) and the key's own `alg` when it
//!     names one; HS* never (a public key must not become an HMAC secret)
//!   ──► jsonwebtoken: signature, exp, nbf (± leeway), iss, aud ──► user claim, groups claim
//! ```
//!
//! Verification is jsonwebtoken's (12, RustCrypto backend: pure Rust, so the fuzz build needs
//! no C toolchain); this module chooses the key and algorithm and reads the claims.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};

/// Why a token does not log anyone in: one line for the client (`Unauthenticated`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not a JWT, or a header or claim that does not parse.
    #[error("the bearer token is not a valid JWT: {0}")]
    Malformed(String),
    /// Signed with an algorithm this server does not accept for the key.
    #[error("the JWT's algorithm {0} is not accepted (asymmetric keys of the provider only)")]
    Algorithm(String),
    /// No key of the provider's set matches the token's `kid`.
    #[error("the JWT names key {0:?}, which the identity provider's keys do not hold")]
    UnknownKey(String),
    /// The signature does not verify with the provider's key.
    #[error("the JWT's signature does not verify")]
    Signature,
    /// `exp` has passed (beyond the leeway).
    #[error("the JWT has expired")]
    Expired,
    /// `nbf` is still ahead (beyond the leeway).
    #[error("the JWT is not valid yet")]
    NotYetValid,
    /// `iss` is not the configured issuer.
    #[error("the JWT's issuer is not the configured one")]
    Issuer,
    /// `aud` does not hold the configured audience.
    #[error("the JWT's audience is not the configured one")]
    Audience,
    /// A claim the server needs is missing or not of its type.
    #[error("the JWT has no usable {0} claim")]
    Claim(String),
}

/// Who a valid token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtIdentity {
    /// The user claim's value.
    pub user: String,
    /// The groups claim's strings (none when the token has no such claim).
    pub groups: Vec<String>,
    /// When the token expires (`exp`).
    pub expires: SystemTime,
}

/// What a token must satisfy besides its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtRules {
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud` (or one of them).
    pub audience: String,
    /// The claim naming the user.
    pub user_claim: String,
    /// The claim listing the groups.
    pub groups_claim: String,
    /// Clock skew allowed for `exp` and `nbf`.
    pub leeway: Duration,
}

/// Algorithms a provider's public keys may sign with.
const ASYMMETRIC: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// Parses a JWKS document (`{"keys": [...]}`).
///
/// Errors: one line when it is not a JWKS.
pub fn parse_jwks(text: &str) -> Result<JwkSet, String> {
    serde_json::from_str(text).map_err(|e| format!("not a JSON Web Key Set: {e}"))
}

/// The key id a token names, if any (to decide whether to read the keys again).
pub fn key_id(token: &str) -> Option<String> {
    decode_header(token).ok()?.kid
}

/// Verifies `token` against `keys` and `rules` (module docs).
///
/// Errors: [`JwtError`], one per reason.
pub fn verify(token: &str, keys: &JwkSet, rules: &JwtRules) -> Result<JwtIdentity, JwtError> {
    let header = decode_header(token).map_err(|e| JwtError::Malformed(e.to_string()))?;
    let allowed = ASYMMETRIC.contains(&header.alg) || header.alg == Algorithm::EdDSA;
    if !allowed {
        return Err(JwtError::Algorithm(format!("{:?}", header.alg)));
    }
    let jwk: &Jwk = match &header.kid {
        Some(kid) => keys
            .find(kid)
            .ok_or_else(|| JwtError::UnknownKey(kid.clone()))?,
        None => match keys.keys.as_slice() {
            [only] => only,
            _ => return Err(JwtError::UnknownKey(String::new())),
        },
    };
    // A key published for encryption signs nothing.
    if jwk.common.public_key_use == Some(jsonwebtoken::jwk::PublicKeyUse::Encryption) {
        return Err(JwtError::UnknownKey(header.kid.clone().unwrap_or_default()));
    }
    if let Some(alg) = jwk.common.key_algorithm
        && alg.to_string() != format!("{:?}", header.alg)
    {
        return Err(JwtError::Algorithm(format!("{:?}", header.alg)));
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|e| JwtError::Malformed(e.to_string()))?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&rules.issuer]);
    validation.set_audience(&[&rules.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.validate_nbf = true;
    validation.leeway = rules.leeway.as_secs();
    let data = decode::<serde_json::Value>(token, &key, &validation).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind;
        match e.kind() {
            ErrorKind::ExpiredSignature => JwtError::Expired,
            ErrorKind::ImmatureSignature => JwtError::NotYetValid,
            ErrorKind::InvalidIssuer => JwtError::Issuer,
            ErrorKind::InvalidAudience => JwtError::Audience,
            ErrorKind::InvalidSignature => JwtError::Signature,
            ErrorKind::MissingRequiredClaim(c) => JwtError::Claim(c.clone()),
            ErrorKind::InvalidAlgorithm => JwtError::Algorithm(format!("{:?}", header.alg)),
            _ => JwtError::Malformed(e.to_string()),
        }
    })?;
    let claims = data.claims;
    let user = claims
        .get(&rules.user_claim)
        .and_then(|v| v.as_str())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| JwtError::Claim(rules.user_claim.clone()))?
        .to_string();
    let groups = match claims.get(&rules.groups_claim) {
        None | Some(serde_json::Value::Null) => vec![],
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .map(|g| g.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| JwtError::Claim(rules.groups_claim.clone()))?,
        Some(_) => return Err(JwtError::Claim(rules.groups_claim.clone())),
    };
    let exp = claims
        .get("exp")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| JwtError::Claim("exp".into()))?;
    Ok(JwtIdentity {
        user,
        groups,
        expires: UNIX_EPOCH + Duration::from_secs(exp),
    })
}
