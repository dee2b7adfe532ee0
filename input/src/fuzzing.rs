//! The fuzz targets' bodies (`fuzz/fuzz_targets/*.rs` call them; `tests/corpus.rs` replays the
//! committed corpora through them on the stable toolchain). Each takes arbitrary bytes, feeds
//! them to the decoder it is named after, and checks what the decoder promises beyond not
//! panicking: a decoded command or header encodes back to itself, a decoded parameter upload
//! has one value per placeholder, a duration formats and parses back to itself, SQL text
//! without a form to rewrite comes back unchanged, no JWT verifies without the provider's key,
//! a decoded deletion vector encodes back to itself.

use arrow_array::Array;
use arrow_flight::FlightData;
use arrow_flight::sql::{Any, Command};
use base64::Engine;
use prost::Message;

use crate::auth_header::{parse_basic, parse_bearer};
use crate::config::Config;
use crate::deletion_vector;
use crate::flight::{SERVER_STATUS_ACTION, decode_action, handle};
use crate::jwt::{JwtRules, key_id, parse_jwks, verify};
use crate::parameters::ParameterMessages;
use crate::sql_text::time_travel::Version;
use crate::units::{format_duration, parse_duration, parse_size};

/// The action types `flight_action` picks from with its first byte.
pub const ACTION_TYPES: [&str; 6] = [
    "SetSessionOptions",
    "GetSessionOptions",
    "CloseSession",
    "CancelFlightInfo",
    SERVER_STATUS_ACTION,
    "Unknown",
];

/// Decodes the bytes of a `FlightDescriptor.cmd` or a `Ticket` with the two calls
/// arrow-flight's `FlightSqlService` makes before it dispatches: `Any::decode`, then
/// `Command::try_from` (a well-formed `Any` of a type Flight SQL does not define is
/// `Command::Unknown`).
///
/// Errors: prost's or arrow-flight's message.
pub fn decode_command(bytes: &[u8]) -> Result<Command, String> {
    let any = Any::decode(bytes).map_err(|e| e.to_string())?;
    Command::try_from(any).map_err(|e| e.to_string())
}

/// Target `flight_command`: bytes of a descriptor's `cmd` or a ticket.
pub fn flight_command(data: &[u8]) {
    if let Ok(command) = decode_command(data) {
        let again = decode_command(&command.clone().into_any().encode_to_vec())
            .expect("a decoded command encodes to a decodable one");
        assert_eq!(again, command);
    }
    let _ = handle(data, "statement");
}

/// Target `flight_action`: the first byte picks the action type, the rest is its body.
pub fn flight_action(data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let kind = ACTION_TYPES[pick as usize % ACTION_TYPES.len()];
    let _ = decode_action(kind, body);
}

/// Target `auth_header`: the header value as text.
pub fn auth_header(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((user, password)) = parse_basic(text) {
        assert!(!user.contains(':'), "the user name ends at the first ':'");
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        assert_eq!(
            parse_basic(&format!("Basic {encoded}")),
            Some((user, password))
        );
    }
    if let Some(token) = parse_bearer(text) {
        assert_eq!(token, token.trim());
    }
}

/// The placeholders the `parameters` target binds: four.
pub const PARAMETERS: usize = 4;

/// Target `parameters`: `FlightData` messages framed by [`frame`].
///
/// libFuzzer's panic hook aborts the process at any panic, before it can unwind; this target
/// puts the default hook back once, so the panics `parameters.rs` catches from arrow-ipc
/// (`input/UPSTREAM.md`) are answered as errors, and any other panic still ends in
/// libfuzzer-sys's abort.
pub fn parameters(data: &[u8]) {
    static DEFAULT_HOOK: std::sync::Once = std::sync::Once::new();
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    let mut messages = ParameterMessages::default();
    for message in unframe(data) {
        if messages.push(message).is_err() {
            return;
        }
    }
    if let Ok(bound) = messages.decode(PARAMETERS) {
        if bound.rows > 0 {
            assert_eq!(bound.columns.len(), PARAMETERS);
        }
        for column in bound.columns {
            assert_eq!(column.len(), bound.rows);
        }
    }
}

/// Target `config`: the text of a configuration file.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(config) = Config::from_toml(&text) {
        let _ = config.validate();
        let _ = config.effective_default_catalog();
    }
    if let Ok(size) = parse_size(&text) {
        assert!(size >= 1);
    }
    if let Some(d) = parse_duration(&text) {
        let again = parse_duration(&format_duration(d)).expect("a formatted duration parses");
        assert_eq!(
            again.as_millis(),
            d.as_millis(),
            "{text:?}: {d:?} → {again:?}"
        );
        assert_eq!(
            again.subsec_nanos() % 1_000_000,
            0,
            "{text:?}: whole milliseconds"
        );
    }
}

/// Target `sql_rewrites`: SQL text through every rewrite made before DataFusion parses it
/// (`sql_text/`). Text with none of the words a rewrite looks for comes back unchanged.
pub fn sql_rewrites(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let name = |base: &str, v: &Version| format!("{base}@{v:?}");
    let rewritten = crate::sql_text::rewrite(&text, "generic", &name);
    let upper = text.to_ascii_uppercase();
    let triggers = ["FOR", "EXECUTE", "PROPERTIES", "LOCAL"];
    let generic = sqlparser::dialect::GenericDialect {};
    let shallow = crate::sql_text::depth::expression_depth(&text, &generic)
        <= crate::sql_text::depth::MAX_EXPRESSION_DEPTH;
    if shallow && !triggers.iter().any(|t| upper.contains(t)) {
        assert_eq!(rewritten.as_deref(), Ok(text.as_ref()));
    }
}

/// The identity provider's keys the `jwt` target verifies against: one RSA key nobody holds
/// the private half of, so no token may verify.
pub const FUZZ_JWKS: &str = r#"{"keys":[{"kty":"RSA","kid":"k1","alg":"RS256","use":"sig","n":"wJ8Gf6yq1Y6vK3m9b5fQ3x2tP1d0cE7a4s8uR6hW2zL5nB9oJ3kV1iX7gY4eT0qM2pA6cD8fH1jK5lN9rS3uW7yZ0bC4eG8iK2mO6qS0uY4wA8cE2gI6kM0oQ4sU8wY2aC6eG0iK4mO8qS2uW6yA0cE4gI8kM2oQ6sU0wY4aC8eG2iK6mO0qS4uW8yA2cE6gI0kM4oQ8sU2wY6aC0eG4iK8mO2qS6uW0yA4cE8gI2kM6oQ0sU4wY8aC2eG6iK0mO4qS8uW2yA6cE0gI4kM8oQ2sU6wY0aC4eG8iK2mO6qS0uW4yA8cE2gI6kM0oQ4sU8wY2aC6eG0iK4mO8qS2uW6yA0cE4gI8kM2oQ6sU0wY4aC8eG2iK6mO0qS4uW8yA2cE6gI0kM4oQ8sU2wY6aC0eG4iK8mO2qS6uW0yA4cE8gI2kM6oQ0sU4wY8aC2eG6iK0mO4qS8uW2yA6cE0gI4kM8oQ2sU6wY0aC4eG8iK2mO6qQ","e":"AQAB"}]}"#;

/// Target `jwt`: the first byte picks what the rest is: a bearer token verified against
/// [`FUZZ_JWKS`] (it never verifies), or a key set to parse.
pub fn jwt(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    if pick % 2 == 0 {
        let _ = key_id(&text);
        let keys = parse_jwks(FUZZ_JWKS).expect("the fuzz key set parses");
        let rules = JwtRules {
            issuer: "https://idp.example".into(),
            audience: "iceflight".into(),
            user_claim: "sub".into(),
            groups_claim: "groups".into(),
            leeway: std::time::Duration::from_secs(60),
        };
        assert!(
            verify(&text, &keys, &rules).is_err(),
            "a token verified without the provider's private key"
        );
    } else {
        let _ = parse_jwks(&text);
    }
}

/// Target `deletion_vector`: a Puffin `deletion-vector-v1` blob; what decodes encodes back to
/// the same blob.
pub fn deletion_vector(data: &[u8]) {
    if let Ok(positions) = deletion_vector::decode(data, "fuzz") {
        let again = deletion_vector::decode(&deletion_vector::encode(&positions), "again")
            .expect("an encoded vector decodes");
        assert_eq!(again, positions);
    }
}

/// Frames `FlightData` messages for [`parameters`]: per message, a little-endian `u16` header
/// length, the IPC header, a little-endian `u32` body length, the body.
pub fn frame(messages: &[FlightData]) -> Vec<u8> {
    let mut out = vec![];
    for m in messages {
        let header = u16::try_from(m.data_header.len()).expect("an IPC header under 64 KiB");
        out.extend_from_slice(&header.to_le_bytes());
        out.extend_from_slice(&m.data_header);
        out.extend_from_slice(&(m.data_body.len() as u32).to_le_bytes());
        out.extend_from_slice(&m.data_body);
    }
    out
}

/// The messages [`frame`] wrote; a truncated header or body is read as far as it goes, a
/// single byte left over (too short for a length) is dropped.
pub fn unframe(data: &[u8]) -> Vec<FlightData> {
    fn take<'a>(data: &'a [u8], at: &mut usize, n: usize) -> &'a [u8] {
        let end = at.saturating_add(n).min(data.len());
        let part = &data[*at..end];
        *at = end;
        part
    }
    let mut at = 0;
    let mut out = vec![];
    while data.len() - at >= 2 {
        let len = take(data, &mut at, 2);
        let header = take(data, &mut at, u16::from_le_bytes([len[0], len[1]]) as usize).to_vec();
        let body = match take(data, &mut at, 4) {
            &[a, b, c, d] => {
                take(data, &mut at, u32::from_le_bytes([a, b, c, d]) as usize).to_vec()
            }
            _ => vec![],
        };
        out.push(
            FlightData::new()
                .with_data_header(header)
                .with_data_body(body),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt, TicketStatementQuery};

    use super::*;

    #[test]
    fn commands_round_trip_and_garbage_is_an_error() {
        let query = CommandStatementQuery {
            query: "SELECT 1".into(),
            transaction_id: None,
        };
        let bytes = query.as_any().encode_to_vec();
        assert_eq!(
            decode_command(&bytes).unwrap(),
            Command::CommandStatementQuery(query)
        );
        let ticket = TicketStatementQuery {
            statement_handle: "h".into(),
        };
        assert!(matches!(
            decode_command(&ticket.as_any().encode_to_vec()).unwrap(),
            Command::TicketStatementQuery(_)
        ));
        assert!(decode_command(&[0xff, 0xff]).is_err());
    }
}
