//! Flight SQL requests as bytes arrive: statement and prepared-statement handles, and the
//! actions iceflight serves beyond arrow-flight's own. (Commands in descriptors and tickets
//! are decoded by arrow-flight's `FlightSqlService`; the fuzz target `flight_command` feeds
//! them to the same calls, `crate::fuzzing::decode_command`.)
//!
//! ```text
//!   TicketStatementQuery.statement_handle,
//!   prepared_statement_handle            ──► handle          ──► &str (session map key)
//!   Action { type, body }                ──► decode_action   ──► SessionAction
//! ```

use arrow_flight::CancelFlightInfoRequest;
use prost::Message;

use crate::session_options::SetSessionOptionsRequest;

/// Name of iceflight's status action: returns JSON
/// `{"sessions":N,"prepared_statements":N,"planned_statements":N,"running_queries":N}`.
pub const SERVER_STATUS_ACTION: &str = "iceflight.ServerStatus";

/// Longest statement or prepared-statement handle accepted, in bytes. iceflight's handles are
/// UUIDs in their 32-character simple form (`server/src/flight/sessions.rs`); anything much
/// longer is not one of ours.
pub const MAX_HANDLE_BYTES: usize = 128;

/// A request that cannot be decoded; each message is one line for the client
/// (`InvalidArgument`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A handle that is not UTF-8 or is too long to be one of ours.
    #[error("malformed {0} handle")]
    Handle(&'static str),
    /// An action body that is not the message its type names.
    #[error("malformed {kind}: {message}")]
    ActionBody {
        /// The message expected.
        kind: &'static str,
        /// prost's message.
        message: String,
    },
    /// An action type iceflight does not serve.
    #[error("unknown action {0:?}")]
    UnknownAction(String),
}

/// A statement or prepared-statement handle as the session map keys it. `kind` names the handle
/// in the error (`"statement"`, `"prepared statement"`).
///
/// Errors: [`DecodeError::Handle`] for bytes that are not UTF-8 or longer than
/// [`MAX_HANDLE_BYTES`].
pub fn handle<'a>(bytes: &'a [u8], kind: &'static str) -> Result<&'a str, DecodeError> {
    if bytes.len() > MAX_HANDLE_BYTES {
        return Err(DecodeError::Handle(kind));
    }
    std::str::from_utf8(bytes).map_err(|_| DecodeError::Handle(kind))
}

/// A `DoAction` iceflight serves itself (arrow-flight serves the prepared-statement actions).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionAction {
    /// `SetSessionOptions`: options to set.
    SetSessionOptions(SetSessionOptionsRequest),
    /// `GetSessionOptions`.
    GetSessionOptions,
    /// `CloseSession`: ends the caller's session (its token stops working).
    CloseSession,
    /// `CancelFlightInfo`: the tickets of the endpoints to cancel.
    CancelFlightInfo {
        /// Ticket bytes, in the order the request lists them.
        tickets: Vec<Vec<u8>>,
    },
    /// [`SERVER_STATUS_ACTION`].
    ServerStatus,
}

/// Decodes a `DoAction` by its type.
///
/// Errors: [`DecodeError::ActionBody`] for a body that is not the type's message,
/// [`DecodeError::UnknownAction`] for a type iceflight does not serve.
pub fn decode_action(kind: &str, body: &[u8]) -> Result<SessionAction, DecodeError> {
    let body_error = |kind: &'static str| {
        move |e: prost::DecodeError| DecodeError::ActionBody {
            kind,
            message: e.to_string(),
        }
    };
    Ok(match kind {
        "SetSessionOptions" => SessionAction::SetSessionOptions(
            SetSessionOptionsRequest::decode(body)
                .map_err(body_error("SetSessionOptionsRequest"))?,
        ),
        "GetSessionOptions" => SessionAction::GetSessionOptions,
        "CloseSession" => SessionAction::CloseSession,
        "CancelFlightInfo" => {
            let req = CancelFlightInfoRequest::decode(body)
                .map_err(body_error("CancelFlightInfoRequest"))?;
            SessionAction::CancelFlightInfo {
                tickets: req
                    .info
                    .iter()
                    .flat_map(|i| i.endpoint.iter())
                    .filter_map(|e| e.ticket.as_ref().map(|t| t.ticket.to_vec()))
                    .collect(),
            }
        }
        SERVER_STATUS_ACTION => SessionAction::ServerStatus,
        other => return Err(DecodeError::UnknownAction(other.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use arrow_flight::{FlightEndpoint, FlightInfo, Ticket};

    use super::*;

    #[test]
    fn handles_are_short_utf8() {
        assert_eq!(handle(b"abc", "statement"), Ok("abc"));
        assert_eq!(
            handle(&[0xc3], "statement").unwrap_err().to_string(),
            "malformed statement handle"
        );
        assert!(handle(&[b'a'; MAX_HANDLE_BYTES + 1], "statement").is_err());
    }

    #[test]
    fn actions() {
        let info = FlightInfo::new()
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new("t1")))
            .with_endpoint(FlightEndpoint::new().with_ticket(Ticket::new("t2")));
        let body = CancelFlightInfoRequest::new(info).encode_to_vec();
        assert_eq!(
            decode_action("CancelFlightInfo", &body).unwrap(),
            SessionAction::CancelFlightInfo {
                tickets: vec![b"t1".to_vec(), b"t2".to_vec()]
            }
        );
        assert_eq!(
            decode_action("CloseSession", b"").unwrap(),
            SessionAction::CloseSession
        );
        assert_eq!(
            decode_action("SetSessionOptions", &[0x0a])
                .unwrap_err()
                .to_string(),
            "malformed SetSessionOptionsRequest: failed to decode Protobuf message: \
             SetSessionOptionsRequest.session_options: invalid varint"
        );
        assert_eq!(
            decode_action("Nope", b"").unwrap_err(),
            DecodeError::UnknownAction("Nope".into())
        );
    }
}
