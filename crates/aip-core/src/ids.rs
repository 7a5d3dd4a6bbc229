//! Identifiers (spec 5.3): opaque strings; generated ones carry the registered prefix and are
//! time-sortable (UUID v7) and collision-resistant.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// Wraps an existing identifier (receivers treat ids as opaque, spec 5.3).
            pub fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            /// The identifier text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// Whether the identifier is the empty string.
            pub fn is_empty(&self) -> bool {
                self.0.is_empty()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl crate::validate::Validate for $name {
            fn validate(&self, v: &mut crate::validate::Checker) {
                let _ = v;
            }
        }
    };
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        id_type!($(#[$doc])* $name);

        impl $name {
            /// The spec 5.3 prefix of generated ids of this kind.
            pub const PREFIX: &'static str = $prefix;

            /// A new time-sortable, collision-resistant id: the prefix then a UUID v7 in lowercase hex.
            pub fn generate() -> Self {
                Self(generate_with_prefix($prefix))
            }
        }
    };
}

/// `prefix` followed by a fresh UUID v7 (48-bit millisecond time, then random bits) in simple hex, so
/// ids sort by creation time as strings.
pub fn generate_with_prefix(prefix: &str) -> String {
    let uuid = uuid::Uuid::now_v7();
    let mut s = String::with_capacity(prefix.len() + 32);
    s.push_str(prefix);
    s.push_str(&uuid.simple().to_string());
    s
}

prefixed_id!(
    /// Message id (`msg_`).
    MessageId, "msg_");
prefixed_id!(
    /// Session id (`sess_`).
    SessionId, "sess_");
prefixed_id!(
    /// Correlation id (`corr_`).
    CorrelationId, "corr_");
prefixed_id!(
    /// Action id (`act_`).
    ActionId, "act_");
prefixed_id!(
    /// Approval id (`appr_`).
    ApprovalId, "appr_");
prefixed_id!(
    /// Delegation id (`dlg_`).
    DelegationId, "dlg_");
prefixed_id!(
    /// Event id (`evt_`).
    EventId, "evt_");
prefixed_id!(
    /// Receipt id (`rcpt_`).
    ReceiptId, "rcpt_");
prefixed_id!(
    /// Transaction id (`txn_`).
    TransactionId, "txn_");
prefixed_id!(
    /// Conversation id (`conv_`).
    ConversationId, "conv_");
id_type!(
    /// Principal id: a non-empty deployment-stable string without a mandatory prefix (spec 5.3).
    PrincipalId);
id_type!(
    /// Capability id: a non-empty deployment-stable string without a mandatory prefix (spec 5.3).
    CapabilityId);
id_type!(
    /// Profile id: a non-empty deployment-stable string without a mandatory prefix (spec 5.3).
    ProfileId);
id_type!(
    /// `in_response_to`: a message id or a correlation id (spec 6.2).
    MessageReference);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_carry_their_prefix_and_sort_by_creation_time() {
        let a = ActionId::generate();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = ActionId::generate();
        assert!(a.as_str().starts_with("act_"));
        assert_eq!(a.as_str().len(), 4 + 32);
        assert!(a < b, "{a} should sort before {b}");
        assert!(MessageId::generate().as_str().starts_with("msg_"));
        assert!(SessionId::generate().as_str().starts_with("sess_"));
        assert!(ReceiptId::generate().as_str().starts_with("rcpt_"));
    }

    #[test]
    fn many_generated_ids_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            assert!(seen.insert(EventId::generate()));
        }
    }
}
