//! The `authorization` header of a Flight call: `Basic` on the handshake, `Bearer` after it.

use base64::Engine;

/// Parses `Basic <base64(user:password)>`, accepting base64 with or without padding. `None`
/// for anything else: another scheme, bad base64, text that is not UTF-8, no `:`.
pub fn parse_basic(header: &str) -> Option<(String, String)> {
    let encoded = header
        .strip_prefix("Basic ")
        .or_else(|| header.strip_prefix("basic "))?
        .trim();
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// Extracts the token from `Bearer <token>`. `None` for another scheme.
pub fn parse_bearer(header: &str) -> Option<&str> {
    header
        .strip_prefix("Bearer ")
        .or_else(|| header.strip_prefix("bearer "))
        .map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_with_and_without_padding() {
        // "alice:secret" → YWxpY2U6c2VjcmV0 (no padding needed); "al:x" → YWw6eA==
        assert_eq!(
            parse_basic("Basic YWxpY2U6c2VjcmV0"),
            Some(("alice".into(), "secret".into()))
        );
        assert_eq!(
            parse_basic("Basic YWw6eA=="),
            Some(("al".into(), "x".into()))
        );
        assert_eq!(parse_basic("Basic YWw6eA"), Some(("al".into(), "x".into())));
        assert_eq!(parse_basic("Basic !!!"), None);
        assert_eq!(parse_basic("Bearer abc"), None);
        // "a:b:c": the password keeps its colons.
        assert_eq!(
            parse_basic("Basic YTpiOmM="),
            Some(("a".into(), "b:c".into()))
        );
    }

    #[test]
    fn bearer() {
        assert_eq!(parse_bearer("Bearer  tok "), Some("tok"));
        assert_eq!(parse_bearer("Basic tok"), None);
    }
}
