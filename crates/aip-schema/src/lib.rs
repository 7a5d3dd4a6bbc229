//! JSON Schemas generated from the `aip-core` wire types (never hand-maintained), the 52 files of
//! spec Appendix A with `$id` `https://aip.dev/schemas/aip/<file>`, a compiled validator registry,
//! typed validation by schema-file stem, and bounded compilation of capability input/output schemas
//! (spec 9.3, 11.3 step 4, 22.8).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capability;
mod registry;

use aip_core::*;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

pub use capability::{CapabilitySchema, SchemaBounds, SchemaError, SchemaViolation};
pub use registry::Validators;

/// Base of every exported `$id` (spec Appendix A).
pub const ID_BASE: &str = "https://aip.dev/schemas/aip/";

/// One schema file of Appendix A.
#[derive(Debug, Clone, Copy)]
pub struct SchemaFile {
    /// File stem, e.g. `action_status` (the `--kind` of `aip validate`).
    pub stem: &'static str,
    /// Name of the root type (the normative schema's `title`).
    pub title: &'static str,
    generate: fn() -> Value,
    check: fn(&Value) -> Result<Vec<String>, DecodeError>,
}

impl SchemaFile {
    /// File name, e.g. `action_status.schema.json`.
    pub fn file_name(&self) -> String {
        format!("{}.schema.json", self.stem)
    }

    /// The `$id` of the exported schema.
    pub fn id(&self) -> String {
        format!("{ID_BASE}{}", self.file_name())
    }

    /// The JSON Schema (Draft 2020-12) generated from the Rust type, with this file's `$id`.
    pub fn schema(&self) -> Value {
        let mut s = (self.generate)();
        if let Some(o) = s.as_object_mut() {
            o.insert("$id".into(), Value::String(self.id()));
        }
        s
    }

    /// Decodes `value` as this file's type with the typed decoder: schema layer then semantic rules.
    /// For `envelope`, the full spec 6.4 order applies (without byte limits: the value is parsed).
    pub fn decode(&self, value: &Value) -> Result<(), DecodeError> {
        (self.check)(value).map(drop)
    }

    /// [`SchemaFile::decode`], also returning the JSON pointers of the receipt chains inside the
    /// decoded value ([`chain::embedded_chains`]), so a caller can verify their hashes over
    /// `value` as received without knowing this file's type.
    pub fn decode_receipt_chains(&self, value: &Value) -> Result<Vec<String>, DecodeError> {
        (self.check)(value)
    }
}

/// Looks a file up by stem (`action`) or file name (`action.schema.json`).
pub fn file(stem_or_name: &str) -> Option<&'static SchemaFile> {
    let stem = stem_or_name
        .strip_suffix(".schema.json")
        .unwrap_or(stem_or_name);
    FILES.iter().find(|f| f.stem == stem)
}

/// Every generated schema as `(file name, schema)`, in file-name order.
pub fn generate_all() -> Vec<(String, Value)> {
    FILES.iter().map(|f| (f.file_name(), f.schema())).collect()
}

fn generate<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

fn check<T: serde::de::DeserializeOwned + Validate>(
    value: &Value,
) -> Result<Vec<String>, DecodeError> {
    decode_value::<T>(value).map(|t| chain::embedded_chains(&t))
}

fn check_envelope(value: &Value) -> Result<Vec<String>, DecodeError> {
    decode::envelope_from_value(value).map(|e| chain::embedded_chains(&e))
}

macro_rules! files {
    ($($stem:tt => $ty:ident,)*) => {
        /// The 52 schema files of Appendix A, in file-name order.
        pub static FILES: &[SchemaFile] = &[
            $(files!(@one $stem => $ty),)*
        ];
    };
    (@one "envelope" => $ty:ident) => {
        SchemaFile { stem: "envelope", title: stringify!($ty), generate: generate::<$ty>, check: check_envelope }
    };
    (@one $stem:tt => $ty:ident) => {
        SchemaFile { stem: $stem, title: stringify!($ty), generate: generate::<$ty>, check: check::<$ty> }
    };
}

files! {
    "ack" => Ack,
    "action" => Action,
    "action_events" => ActionEvents,
    "action_events_request" => ActionEventsRequest,
    "action_list" => ActionList,
    "action_list_request" => ActionListRequest,
    "action_result" => ActionResult,
    "action_result_request" => ActionResultRequest,
    "action_status" => ActionStatus,
    "action_status_request" => ActionStatusRequest,
    "approval_decision" => ApprovalDecision,
    "approval_list" => ApprovalList,
    "approval_list_request" => ApprovalListRequest,
    "approval_query_request" => ApprovalQueryRequest,
    "approval_record_view" => ApprovalRecordView,
    "approval_request" => ApprovalRequest,
    "audit_query_request" => AuditQueryRequest,
    "audit_query_result" => AuditQueryResult,
    "callback_delivery_list" => CallbackDeliveryList,
    "callback_delivery_list_request" => CallbackDeliveryListRequest,
    "callback_delivery_policy" => CallbackDeliveryPolicy,
    "callback_delivery_query_request" => CallbackDeliveryQueryRequest,
    "callback_delivery_record" => CallbackDeliveryRecord,
    "capability_contract" => CapabilityContract,
    "channel_message" => ChannelMessage,
    "delegation_request" => DelegationRequest,
    "delegation_result" => DelegationResult,
    "envelope" => Envelope,
    "escalation" => Escalation,
    "event" => Event,
    "event_stream" => EventStream,
    "identity_context" => IdentityContext,
    "manifest" => Manifest,
    "manifest_filter" => ManifestFilter,
    "receipt_query_request" => ReceiptQueryRequest,
    "resource_list" => ResourceList,
    "resource_list_request" => ResourceListRequest,
    "resource_read_request" => ResourceReadRequest,
    "resource_read_result" => ResourceReadResult,
    "session_close_request" => SessionCloseRequest,
    "session_list" => SessionList,
    "session_list_request" => SessionListRequest,
    "session_request" => SessionRequest,
    "session_resume" => SessionResume,
    "session_resume_request" => SessionResumeRequest,
    "session_view" => SessionView,
    "stream_chunk" => StreamChunk,
    "transaction_plan" => TransactionPlan,
    "transaction_query_request" => TransactionQueryRequest,
    "transaction_request" => TransactionRequest,
    "transaction_result" => TransactionResult,
    "transaction_view" => TransactionView,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_52_files_with_aip_dev_ids() {
        assert_eq!(FILES.len(), 52);
        for f in FILES {
            let s = f.schema();
            assert_eq!(
                s["$id"],
                Value::String(format!(
                    "https://aip.dev/schemas/aip/{}.schema.json",
                    f.stem
                ))
            );
            assert_eq!(s["$schema"], "https://json-schema.org/draft/2020-12/schema");
        }
        assert_eq!(file("action.schema.json").map(|f| f.title), Some("Action"));
        assert!(file("nope").is_none());
    }

    #[test]
    fn decoding_a_kind_names_the_receipt_chains_inside_it() {
        let status = serde_json::json!({
            "action_id": "act_1", "state": "completed", "updated_at": "2026-07-14T08:30:00Z",
            "receipt_chain": {"chain_id": "c", "receipts": []}
        });
        let f = file("action_status").map(|f| f.decode_receipt_chains(&status));
        assert_eq!(f, Some(Ok(vec!["/receipt_chain".to_owned()])));
        let f = file("ack").map(|f| {
            f.decode_receipt_chains(&serde_json::json!({"action_id": "a", "status": "accepted"}))
        });
        assert_eq!(f, Some(Ok(vec![])));
    }
}
