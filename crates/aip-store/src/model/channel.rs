//! Conversations and channel messages (spec 15) as the store keeps them: promoted columns for the
//! filters and visibility, the wire objects as JSON the runtime owns.

use serde_json::Value;

use super::NewAudit;

/// The conversation columns a write sets (every write replaces them with the connector's latest view).
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationWrite {
    /// Tenant.
    pub tenant: String,
    /// Conversation id.
    pub conversation_id: String,
    /// The authenticated connector writing it (kept from the first write).
    pub recorded_by: String,
    /// Assignee principal id, if any (may read it).
    pub assignee: Option<String>,
    /// Contact principal id, if any (may read it).
    pub contact: Option<String>,
    /// Status (`open`, `pending`, ...).
    pub status: String,
    /// The conversation object.
    pub body: Value,
    /// The sender's time of this state, epoch ms: an older state than the stored one is not
    /// applied (its message is still recorded).
    pub as_of_ms: i64,
}

/// A channel message to record, with its conversation and its audit event, in one transaction.
#[derive(Debug, Clone)]
pub struct NewChannelMessage {
    /// The conversation as of this message.
    pub conversation: ConversationWrite,
    /// Message id (`chm_…`).
    pub message_id: String,
    /// The provider delivery id: unique per (tenant, connector), the replay claim.
    pub delivery_key: String,
    /// The message without its conversation (identity, message, sender, parts, delivery, raw payload).
    pub body: Value,
    /// The audit event of the recording, written in the same transaction.
    pub audit: NewAudit,
    /// Time, epoch ms.
    pub now_ms: i64,
}

/// What recording a channel message did.
#[derive(Debug, Clone, PartialEq)]
pub enum ChannelWrite {
    /// Stored: the conversation as it now is.
    Recorded(Box<ConversationRecord>),
    /// The delivery was already recorded by this connector: nothing was written.
    Replayed,
}

/// A stored conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationRecord {
    /// Per-store list position.
    pub sequence: u64,
    /// Tenant.
    pub tenant: String,
    /// Conversation id.
    pub conversation_id: String,
    /// The connector that first recorded it.
    pub recorded_by: String,
    /// Assignee principal id.
    pub assignee: Option<String>,
    /// Contact principal id.
    pub contact: Option<String>,
    /// Status.
    pub status: String,
    /// The conversation object.
    pub body: Value,
    /// Messages recorded in it.
    pub message_count: u64,
    /// First recorded, epoch ms.
    pub created_at_ms: i64,
    /// Last written, epoch ms.
    pub updated_at_ms: i64,
}

/// A stored channel message.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelMessageRecord {
    /// Per-store list position.
    pub sequence: u64,
    /// Message id.
    pub message_id: String,
    /// Tenant.
    pub tenant: String,
    /// Conversation id.
    pub conversation_id: String,
    /// The connector that recorded it.
    pub recorded_by: String,
    /// The provider delivery id.
    pub delivery_key: String,
    /// The message (without its conversation).
    pub body: Value,
    /// Recorded, epoch ms.
    pub created_at_ms: i64,
}

/// Which conversations a reader sees: always one tenant's, and without `reader` all of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationQuery {
    /// Tenant.
    pub tenant: String,
    /// Only conversations this principal recorded, is assigned or is the contact of; `None` for
    /// tenant-wide readers.
    pub reader: Option<String>,
    /// Only this status.
    pub status: Option<String>,
    /// Only this assignee.
    pub assignee: Option<String>,
}
