//! Conversations, message parts and channel messages (spec 15).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{Checker, ConversationId, ExternalRef, IdentityContext, Principal, Validate};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Customer or user-facing conversation thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    /// Stable AIP conversation id.
    pub id: ConversationId,
    /// Channel metadata.
    pub channel: Value,
    /// Conversation status.
    pub status: ConversationStatus,
    /// Product-specific ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_refs: Vec<ExternalRef>,
    /// Customer/contact principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<Principal>,
    /// Human or bot assignee.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<Principal>,
    /// Priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// Labels/tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Extension metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl Validate for Conversation {
    fn validate(&self, v: &mut Checker) {
        v.field("external_refs", |v| v.each(&self.external_refs));
        if let Some(x) = &self.contact {
            v.field("contact", |v| x.validate(v));
        }
        if let Some(x) = &self.assignee {
            v.field("assignee", |v| x.validate(v));
        }
    }
}

/// Conversation state in a user-facing channel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    /// Conversation is open.
    Open,
    /// Conversation is pending.
    Pending,
    /// Conversation is resolved.
    Resolved,
    /// Conversation is snoozed.
    Snoozed,
    /// Conversation is archived.
    Archived,
}

crate::wire_enum!(ConversationStatus { Open => "open", Pending => "pending", Resolved => "resolved", Snoozed => "snoozed", Archived => "archived" });

/// Conversation priority.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Low priority.
    Low,
    /// Medium priority.
    Medium,
    /// High priority.
    High,
    /// Urgent priority.
    Urgent,
}

crate::wire_enum!(Priority { Low => "low", Medium => "medium", High => "high", Urgent => "urgent" });

/// Rich content part carried by a message, result, or channel event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum MessagePart {
    /// Text content.
    Text {
        /// Text body.
        text: String,
        /// Optional text format, for example `plain` or `markdown`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        format: Option<String>,
    },
    /// Image content.
    Image {
        /// Remote URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// Inline data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// MIME type.
        mime_type: String,
        /// Accessibility alt text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        alt: Option<String>,
    },
    /// File content.
    File {
        /// Remote URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// Inline data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// MIME type.
        mime_type: String,
        /// File name.
        filename: String,
        /// File size in bytes.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "crate::num::opt_u64"
        )]
        size_bytes: Option<u64>,
    },
    /// Audio content.
    Audio {
        /// Remote URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        /// Inline data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<String>,
        /// MIME type.
        mime_type: String,
        /// Optional transcript.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transcript: Option<String>,
    },
    /// Interactive form.
    Form {
        /// Form fields.
        fields: Vec<Value>,
        /// Form actions.
        actions: Vec<Value>,
    },
    /// Rich card.
    Card {
        /// Card title.
        title: String,
        /// Card body.
        body: String,
        /// Card actions.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        actions: Vec<Value>,
        /// Card media.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media: Option<Value>,
    },
    /// Structured JSON payload.
    Json {
        /// JSON data.
        data: Value,
        /// Optional JSON Schema.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
    },
    /// Tool result payload.
    ToolResult {
        /// Tool call id.
        tool_call_id: String,
        /// Result data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        data: Option<Value>,
        /// Error data.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    },
}

impl Validate for MessagePart {
    fn validate(&self, v: &mut Checker) {
        match self {
            MessagePart::Text { .. } => {}
            MessagePart::Image { .. } => {}
            MessagePart::File { .. } => {}
            MessagePart::Audio { .. } => {}
            MessagePart::Form { .. } => {}
            MessagePart::Card { .. } => {}
            MessagePart::Json { .. } => {}
            MessagePart::ToolResult { .. } => {}
        }
        crate::rules::message_part(self, v);
    }
}

/// External channel message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChannelMessage {
    /// Conversation/thread.
    pub conversation: Conversation,
    /// Identity context used by policy, audit, and credential mapping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
    /// Message metadata.
    pub message: Value,
    /// Sender.
    pub sender: Principal,
    /// Message parts.
    pub parts: Vec<MessagePart>,
    /// Delivery/idempotency metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Value>,
    /// Original product payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_payload: Option<Value>,
}

impl Validate for ChannelMessage {
    fn validate(&self, v: &mut Checker) {
        v.field("conversation", |v| self.conversation.validate(v));
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
        v.field("sender", |v| self.sender.validate(v));
        v.field("parts", |v| v.each(&self.parts));
    }
}

/// Conversation update payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConversationUpdated {
    /// Updated conversation.
    pub conversation: Conversation,
    /// Identity context used by policy and audit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityContext>,
    /// Changed field names.
    pub changed_fields: Vec<String>,
}

impl Validate for ConversationUpdated {
    fn validate(&self, v: &mut Checker) {
        v.field("conversation", |v| self.conversation.validate(v));
        if let Some(x) = &self.identity {
            v.field("identity", |v| x.validate(v));
        }
    }
}
