//! [`ChannelStore`] in SQL: conversations upserted by the messages and updates connectors record,
//! messages whose (tenant, connector, delivery key) uniqueness is the delivery-replay claim, and the
//! audit event of each write in the same transaction.

use async_trait::async_trait;

use super::page::ListCursor;
use super::{Dialect, SqlStore, opt_part, receipt, to_u64};
use crate::cursor::CursorKind;
use crate::db::{Json, Row, Tx, query};
use crate::error::StoreResult;
use crate::model::*;
use crate::traits::ChannelStore;

const CONVERSATION: &str = "seq, tenant, conversation_id, recorded_by, assignee, contact, status, body, \
     message_count, created_at_ms, updated_at_ms";

const MESSAGE: &str =
    "seq, message_id, tenant, conversation_id, recorded_by, delivery_key, body, created_at_ms";

/// Which conversations a reader sees (`$1` tenant, `$2` reader or NULL, `$3` status, `$4` assignee).
const VISIBLE: &str = "tenant = $1 \
     AND (CAST($2 AS TEXT) IS NULL OR recorded_by = $2 OR assignee = $2 OR contact = $2) \
     AND (CAST($3 AS TEXT) IS NULL OR status = $3) \
     AND (CAST($4 AS TEXT) IS NULL OR assignee = $4)";

#[async_trait]
impl<D: Dialect> ChannelStore for SqlStore<D> {
    async fn record_channel_message(&self, m: NewChannelMessage) -> StoreResult<ChannelWrite> {
        self.write(true, move |tx| {
            Box::pin(async move {
                let claimed = query(
                    "INSERT INTO aip_channel_messages (message_id, tenant, conversation_id, recorded_by, delivery_key, body, created_at_ms) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (tenant, recorded_by, delivery_key) DO NOTHING RETURNING seq",
                )
                .bind(&m.message_id)
                .bind(&m.conversation.tenant)
                .bind(&m.conversation.conversation_id)
                .bind(&m.conversation.recorded_by)
                .bind(&m.delivery_key)
                .bind(Json(&m.body))
                .bind(m.now_ms)
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| e.or_duplicate("channel message id"))?;
                if claimed.is_none() {
                    return Ok(ChannelWrite::Replayed);
                }
                let conversation = tx_upsert(&mut *tx, &m.conversation, 1, m.now_ms).await?;
                receipt::tx_append_audit::<D>(&mut *tx, &m.audit).await?;
                Ok(ChannelWrite::Recorded(Box::new(conversation)))
            })
        })
        .await
    }

    async fn update_conversation(
        &self,
        conversation: ConversationWrite,
        audit: NewAudit,
        delivery_key: Option<String>,
        now_ms: i64,
    ) -> StoreResult<ChannelWrite> {
        self.write(true, move |tx| {
            Box::pin(async move {
                if let Some(key) = &delivery_key {
                    // A claim that never lapses, in the replay-claim table, scoped like a message's.
                    let claimed = query(
                        "INSERT INTO aip_replay_claims (scope, message_id, claimed_at_ms, expires_at_ms) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (scope, message_id) DO NOTHING RETURNING message_id",
                    )
                    .bind(format!(
                        "conversation_update:{}:{}",
                        conversation.tenant, conversation.recorded_by
                    ))
                    .bind(key)
                    .bind(now_ms)
                    .bind(i64::MAX)
                    .fetch_optional(&mut *tx)
                    .await?;
                    if claimed.is_none() {
                        return Ok(ChannelWrite::Replayed);
                    }
                }
                let record = tx_upsert(&mut *tx, &conversation, 0, now_ms).await?;
                receipt::tx_append_audit::<D>(&mut *tx, &audit).await?;
                Ok(ChannelWrite::Recorded(Box::new(record)))
            })
        })
        .await
    }

    async fn get_conversation(
        &self,
        q: &ConversationQuery,
        conversation_id: &str,
    ) -> StoreResult<Option<ConversationRecord>> {
        let row = query(format!(
            "SELECT {CONVERSATION} FROM aip_conversations WHERE {VISIBLE} AND conversation_id = $5"
        ))
        .bind(&q.tenant)
        .bind(q.reader.as_deref())
        .bind(q.status.as_deref())
        .bind(q.assignee.as_deref())
        .bind(conversation_id)
        .fetch_optional(self.reader())
        .await?;
        row.as_ref().map(conversation_record).transpose()
    }

    async fn list_conversations(
        &self,
        q: &ConversationQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ConversationRecord>> {
        let scope = vec![
            q.tenant.clone(),
            opt_part(q.reader.as_deref()),
            opt_part(q.status.as_deref()),
            opt_part(q.assignee.as_deref()),
        ];
        let page = ListCursor::open(&self.key, CursorKind::Conversations, scope, cursor)?;
        let rows = query(format!(
            "SELECT {CONVERSATION} FROM aip_conversations WHERE {VISIBLE} AND seq > $5 ORDER BY seq LIMIT $6"
        ))
        .bind(&q.tenant)
        .bind(q.reader.as_deref())
        .bind(q.status.as_deref())
        .bind(q.assignee.as_deref())
        .bind(page.after)
        .bind(i64::from(limit.get()))
        .fetch_all(self.reader())
        .await?;
        page.page(&rows, "seq", conversation_record)
    }

    async fn list_channel_messages(
        &self,
        tenant: &str,
        conversation_id: &str,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ChannelMessageRecord>> {
        let scope = vec![tenant.to_owned(), conversation_id.to_owned()];
        let page = ListCursor::open(&self.key, CursorKind::ChannelMessages, scope, cursor)?;
        let rows = query(format!(
            "SELECT {MESSAGE} FROM aip_channel_messages WHERE tenant = $1 AND conversation_id = $2 \
             AND seq > $3 ORDER BY seq LIMIT $4"
        ))
        .bind(tenant)
        .bind(conversation_id)
        .bind(page.after)
        .bind(i64::from(limit.get()))
        .fetch_all(self.reader())
        .await?;
        page.page(&rows, "seq", message_record)
    }
}

/// Inserts or replaces the conversation's columns (its first connector stays) unless the stored
/// state is newer by the sender's clock, adding `messages` to its message count.
async fn tx_upsert(
    tx: &mut dyn Tx,
    c: &ConversationWrite,
    messages: i64,
    now_ms: i64,
) -> StoreResult<ConversationRecord> {
    let row = query(format!(
        "INSERT INTO aip_conversations (tenant, conversation_id, recorded_by, assignee, contact, status, body, \
         message_count, created_at_ms, updated_at_ms, as_of_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10) \
         ON CONFLICT (tenant, conversation_id) DO UPDATE SET {newer} \
         message_count = aip_conversations.message_count + excluded.message_count, \
         updated_at_ms = excluded.updated_at_ms RETURNING {CONVERSATION}",
        newer = ["assignee", "contact", "status", "body", "as_of_ms"]
            .map(|c| format!(
                "{c} = CASE WHEN excluded.as_of_ms >= aip_conversations.as_of_ms \
                 THEN excluded.{c} ELSE aip_conversations.{c} END,"
            ))
            .join(" ")
    ))
    .bind(&c.tenant)
    .bind(&c.conversation_id)
    .bind(&c.recorded_by)
    .bind(c.assignee.as_deref())
    .bind(c.contact.as_deref())
    .bind(&c.status)
    .bind(Json(&c.body))
    .bind(messages)
    .bind(now_ms)
    .bind(c.as_of_ms)
    .fetch_one(&mut *tx)
    .await?;
    conversation_record(&row)
}

fn conversation_record(r: &Row) -> StoreResult<ConversationRecord> {
    Ok(ConversationRecord {
        sequence: to_u64(r.try_get("seq")?, "conversation sequence")?,
        tenant: r.try_get("tenant")?,
        conversation_id: r.try_get("conversation_id")?,
        recorded_by: r.try_get("recorded_by")?,
        assignee: r.try_get("assignee")?,
        contact: r.try_get("contact")?,
        status: r.try_get("status")?,
        body: r.json("body")?,
        message_count: to_u64(r.try_get("message_count")?, "message count")?,
        created_at_ms: r.try_get("created_at_ms")?,
        updated_at_ms: r.try_get("updated_at_ms")?,
    })
}

fn message_record(r: &Row) -> StoreResult<ChannelMessageRecord> {
    Ok(ChannelMessageRecord {
        sequence: to_u64(r.try_get("seq")?, "channel message sequence")?,
        message_id: r.try_get("message_id")?,
        tenant: r.try_get("tenant")?,
        conversation_id: r.try_get("conversation_id")?,
        recorded_by: r.try_get("recorded_by")?,
        delivery_key: r.try_get("delivery_key")?,
        body: r.json("body")?,
        created_at_ms: r.try_get("created_at_ms")?,
    })
}
