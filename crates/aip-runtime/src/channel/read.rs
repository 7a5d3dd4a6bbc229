//! Conversation reads (spec 15, 16.3): a reader sees the conversations of its tenant it recorded,
//! is assigned or is the contact of, or all of them with `channel:read` (or `read:tenant`); any
//! other is missing exactly like an unknown id, in lists and in counts. Over envelopes the same
//! reads are resources of kind [`super::CONVERSATION_KIND`].

use aip_core::{
    Conversation, ConversationStatus, MessagePart, Resource, ResourceList, ResourceListRequest,
    ResourceReadResult,
};
use aip_store::{ChannelMessageRecord, ConversationQuery, ConversationRecord, Limit};
use serde::Serialize;
use serde_json::Value;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::read::views::{corrupt, ts};
use crate::runtime::Runtime;

/// A stored conversation with what the runtime knows of it.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationView {
    /// The conversation as last recorded.
    pub conversation: Conversation,
    /// Messages recorded in it.
    pub message_count: u64,
    /// The connector that first recorded it.
    pub recorded_by: String,
    /// First recorded.
    pub created_at: aip_core::Timestamp,
    /// Last written.
    pub updated_at: aip_core::Timestamp,
}

/// A page of conversations.
#[derive(Debug, Clone, Serialize)]
pub struct ConversationPage {
    /// The conversations, oldest first.
    pub conversations: Vec<ConversationView>,
    /// Continue after the last one.
    pub cursor: String,
}

/// A recorded channel message as a reader sees it.
#[derive(Debug, Clone, Serialize)]
pub struct MessageView {
    /// Message id (`chm_…`).
    pub id: String,
    /// Its conversation.
    pub conversation_id: String,
    /// The connector that recorded it.
    pub recorded_by: String,
    /// When it was recorded.
    pub recorded_at: aip_core::Timestamp,
    /// The message as recorded (message, sender, parts, identity, delivery; the raw payload only
    /// for readers holding `channel:raw`).
    #[serde(flatten)]
    pub body: serde_json::Map<String, Value>,
}

/// A page of a conversation's messages.
#[derive(Debug, Clone, Serialize)]
pub struct MessagePage {
    /// The messages, oldest first.
    pub messages: Vec<MessageView>,
    /// Continue after the last one.
    pub cursor: String,
}

/// Filters of a conversation list.
#[derive(Debug, Clone, Default)]
pub struct ConversationFilter {
    /// Only this status.
    pub status: Option<ConversationStatus>,
    /// Only this assignee.
    pub assignee: Option<String>,
}

impl Runtime {
    fn conversation_query(
        &self,
        caller: &Caller,
        filter: &ConversationFilter,
    ) -> ConversationQuery {
        ConversationQuery {
            tenant: caller.tenant.clone(),
            reader: (!caller.reads_all_conversations()).then(|| caller.id.clone()),
            status: filter.status.map(|s| s.as_str().to_owned()),
            assignee: filter.assignee.clone(),
        }
    }

    /// The conversations `caller` may see, filtered, behind a cursor bound to reader and filters.
    pub async fn list_conversations(
        &self,
        caller: &Caller,
        filter: &ConversationFilter,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<ConversationPage, RuntimeError> {
        let limit = self.limit(limit)?;
        let q = self.conversation_query(caller, filter);
        let page = self.store().list_conversations(&q, cursor, limit).await?;
        Ok(ConversationPage {
            conversations: page.items.iter().map(view).collect::<Result<_, _>>()?,
            cursor: page.next_cursor,
        })
    }

    /// One conversation; `NotFound` when `caller` may not see it, as for an unknown id.
    pub async fn read_conversation(
        &self,
        caller: &Caller,
        conversation_id: &str,
    ) -> Result<ConversationView, RuntimeError> {
        view(&self.visible_conversation(caller, conversation_id).await?)
    }

    async fn visible_conversation(
        &self,
        caller: &Caller,
        conversation_id: &str,
    ) -> Result<ConversationRecord, RuntimeError> {
        let q = self.conversation_query(caller, &ConversationFilter::default());
        self.store()
            .get_conversation(&q, conversation_id)
            .await?
            .ok_or(RuntimeError::NotFound("conversation"))
    }

    /// A conversation's messages, oldest first; `NotFound` when `caller` may not see it.
    pub async fn conversation_messages(
        &self,
        caller: &Caller,
        conversation_id: &str,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<MessagePage, RuntimeError> {
        let limit = self.limit(limit)?;
        let record = self.visible_conversation(caller, conversation_id).await?;
        self.message_page(caller, &record, cursor, limit).await
    }

    async fn message_page(
        &self,
        caller: &Caller,
        record: &ConversationRecord,
        cursor: Option<&str>,
        limit: Limit,
    ) -> Result<MessagePage, RuntimeError> {
        let page = self
            .store()
            .list_channel_messages(&record.tenant, &record.conversation_id, cursor, limit)
            .await?;
        let raw = caller.reads_raw_payloads();
        Ok(MessagePage {
            messages: page
                .items
                .iter()
                .map(|m| message_view(m, raw))
                .collect::<Result<_, _>>()?,
            cursor: page.next_cursor,
        })
    }

    /// An action's conversation context (spec 11.1) must name a conversation its caller may see.
    pub(crate) async fn check_conversation_reference(
        &self,
        caller: &Caller,
        conversation: &Conversation,
    ) -> Result<(), RuntimeError> {
        self.visible_conversation(caller, conversation.id.as_str())
            .await
            .map(|_| ())
    }

    /// `resource_list_request` of kind [`super::CONVERSATION_KIND`]: the conversations `caller`
    /// may see, as resources.
    pub(crate) async fn conversation_resources(
        &self,
        caller: &Caller,
        request: &ResourceListRequest,
    ) -> Result<ResourceList, RuntimeError> {
        if request.capability_id.is_some() {
            // Conversations belong to no capability.
            return Ok(ResourceList {
                resources: Vec::new(),
                cursor: request.cursor.clone(),
            });
        }
        let page = self
            .list_conversations(
                caller,
                &ConversationFilter::default(),
                request.cursor.as_deref(),
                request.limit,
            )
            .await?;
        Ok(ResourceList {
            resources: page.conversations.iter().map(resource).collect(),
            cursor: Some(page.cursor),
        })
    }

    /// `resource_read_request` of a conversation: the conversation view, then its first page of
    /// messages, as two JSON parts.
    pub(crate) async fn read_conversation_resource(
        &self,
        caller: &Caller,
        conversation_id: &str,
    ) -> Result<ResourceReadResult, RuntimeError> {
        let record = self.visible_conversation(caller, conversation_id).await?;
        let limit = self.limit(None)?;
        let messages = self.message_page(caller, &record, None, limit).await?;
        let conversation = view(&record)?;
        let etag = format!("{}:{}", record.message_count, record.updated_at_ms);
        Ok(ResourceReadResult {
            resource: resource(&conversation),
            content: vec![
                MessagePart::Json {
                    data: to_json(&conversation)?,
                    schema: None,
                },
                MessagePart::Json {
                    data: to_json(&messages)?,
                    schema: None,
                },
            ],
            etag: Some(etag),
            expires_at: None,
        })
    }
}

fn to_json<T: Serialize>(v: &T) -> Result<Value, RuntimeError> {
    serde_json::to_value(v).map_err(|_| RuntimeError::Internal("a view does not serialize"))
}

fn resource(v: &ConversationView) -> Resource {
    let id = v.conversation.id.as_str();
    Resource {
        id: id.to_owned(),
        name: format!("conversation {id}"),
        kind: Some(super::CONVERSATION_KIND.into()),
        capability_id: None,
        description: Some(format!(
            "{} conversation, {} messages",
            v.conversation.status.as_str(),
            v.message_count
        )),
        mime_type: Some("application/json".into()),
        tenant_id: None,
        access: None,
        expires_at: None,
    }
}

/// The stored conversation object.
pub(super) fn conversation(body: &Value) -> Result<Conversation, RuntimeError> {
    serde_json::from_value(body.clone()).map_err(|e| corrupt(format!("stored conversation: {e}")))
}

fn view(r: &ConversationRecord) -> Result<ConversationView, RuntimeError> {
    Ok(ConversationView {
        conversation: conversation(&r.body)?,
        message_count: r.message_count,
        recorded_by: r.recorded_by.clone(),
        created_at: ts(r.created_at_ms)?,
        updated_at: ts(r.updated_at_ms)?,
    })
}

fn message_view(m: &ChannelMessageRecord, raw: bool) -> Result<MessageView, RuntimeError> {
    let Value::Object(mut body) = m.body.clone() else {
        return Err(corrupt(format!("stored channel message {}", m.message_id)));
    };
    if !raw {
        body.remove("raw_payload");
    }
    Ok(MessageView {
        id: m.message_id.clone(),
        conversation_id: m.conversation_id.clone(),
        recorded_by: m.recorded_by.clone(),
        recorded_at: ts(m.created_at_ms)?,
        body,
    })
}
