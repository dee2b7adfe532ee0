//! Flight RPC session messages (`SetSessionOptions`, `GetSessionOptions`, `CloseSession`) from
//! `Flight.proto`, which arrow-flight 58.4.1 does not generate; clients send them as `DoAction`s
//! that reach `do_action_fallback`. Field numbers follow `Flight.proto` exactly.

use std::collections::HashMap;

/// `arrow.flight.protocol.SessionOptionValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SessionOptionValue {
    /// The value.
    #[prost(oneof = "OptionValue", tags = "1, 2, 3, 4, 5")]
    pub option_value: Option<OptionValue>,
}

/// `SessionOptionValue.StringListValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StringListValue {
    /// Values.
    #[prost(string, repeated, tag = "1")]
    pub values: Vec<String>,
}

/// The `option_value` oneof.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum OptionValue {
    /// A string.
    #[prost(string, tag = "1")]
    StringValue(String),
    /// A bool.
    #[prost(bool, tag = "2")]
    BoolValue(bool),
    /// An int64.
    #[prost(sfixed64, tag = "3")]
    Int64Value(i64),
    /// A double.
    #[prost(double, tag = "4")]
    DoubleValue(f64),
    /// A list of strings.
    #[prost(message, tag = "5")]
    StringListValue(StringListValue),
}

impl SessionOptionValue {
    /// A string-valued option.
    pub fn string(s: impl Into<String>) -> Self {
        Self {
            option_value: Some(OptionValue::StringValue(s.into())),
        }
    }

    /// The value as text, as `SET key = value` would take it.
    pub fn as_text(&self) -> Option<String> {
        Some(match self.option_value.as_ref()? {
            OptionValue::StringValue(s) => s.clone(),
            OptionValue::BoolValue(b) => b.to_string(),
            OptionValue::Int64Value(i) => i.to_string(),
            OptionValue::DoubleValue(d) => d.to_string(),
            OptionValue::StringListValue(l) => l.values.join(","),
        })
    }
}

/// `arrow.flight.protocol.SetSessionOptionsRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsRequest {
    /// Options to set.
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `arrow.flight.protocol.SetSessionOptionsResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsResult {
    /// Per-option errors; absent options were set.
    #[prost(map = "string, message", tag = "1")]
    pub errors: HashMap<String, SetSessionOptionsError>,
}

/// `SetSessionOptionsResult.Error`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SetSessionOptionsError {
    /// `ErrorValue`: 0 unspecified, 1 invalid name, 2 invalid value, 3 error.
    #[prost(int32, tag = "1")]
    pub value: i32,
}

/// `SetSessionOptionsResult.ErrorValue.INVALID_NAME`.
pub const INVALID_NAME: i32 = 1;
/// `SetSessionOptionsResult.ErrorValue.INVALID_VALUE`.
pub const INVALID_VALUE: i32 = 2;
/// `SetSessionOptionsResult.ErrorValue.ERROR`: the option exists and this caller may not set it.
pub const ERROR: i32 = 3;

/// `arrow.flight.protocol.GetSessionOptionsResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetSessionOptionsResult {
    /// Current options.
    #[prost(map = "string, message", tag = "1")]
    pub session_options: HashMap<String, SessionOptionValue>,
}

/// `arrow.flight.protocol.CloseSessionResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseSessionResult {
    /// `Status`: 1 closed.
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `CloseSessionResult.Status.CLOSED`.
pub const CLOSED: i32 = 1;
