//! Conversations and channel messages (spec 15).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Conversations and the channel messages recorded in them by authenticated connectors.
#[async_trait]
pub trait ChannelStore: Send + Sync + 'static {
    /// Records a channel message, upserts its conversation and appends its audit event, all or
    /// nothing. A delivery key the same connector already recorded in the tenant is
    /// [`ChannelWrite::Replayed`] and writes nothing.
    async fn record_channel_message(&self, message: NewChannelMessage)
    -> StoreResult<ChannelWrite>;

    /// Upserts a conversation (`conversation_updated`) and appends `audit`, all or nothing. With a
    /// `delivery_key`, the update is claimed like a message's delivery: the same connector's key
    /// again is [`ChannelWrite::Replayed`] and writes nothing (a replayed old update never rolls
    /// the conversation back).
    async fn update_conversation(
        &self,
        conversation: ConversationWrite,
        audit: NewAudit,
        delivery_key: Option<String>,
        now_ms: i64,
    ) -> StoreResult<ChannelWrite>;

    /// One conversation, if `q`'s reader may see it.
    async fn get_conversation(
        &self,
        q: &ConversationQuery,
        conversation_id: &str,
    ) -> StoreResult<Option<ConversationRecord>>;

    /// The conversations `q` selects, oldest first, behind a cursor bound to `q`.
    async fn list_conversations(
        &self,
        q: &ConversationQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ConversationRecord>>;

    /// A conversation's messages, oldest first (the caller has checked the conversation's
    /// visibility), behind a cursor bound to the conversation.
    async fn list_channel_messages(
        &self,
        tenant: &str,
        conversation_id: &str,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ChannelMessageRecord>>;
}
