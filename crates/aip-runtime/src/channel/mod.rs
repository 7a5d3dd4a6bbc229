//! Conversations and channel messages (spec 15): what authenticated connectors record, with the
//! delivery-replay claim, bounds on inline content and the raw-payload policy, and the
//! principal-scoped reads.
//!
//! A connector is a principal holding `channel:write`: it has verified the provider's authenticity
//! before sending (spec 15.3), or it is this server's own webhook profile, which verifies the
//! provider's signature over the raw bytes itself. Every message names a delivery id (`delivery.id`,
//! or the profile's delivery id); the same connector recording it again in the tenant is a replay
//! and stores nothing, on every node and after restarts (the message row is the claim).

mod read;

pub use read::{ConversationFilter, ConversationPage, ConversationView, MessagePage, MessageView};

use aip_core::{ChannelMessage, Conversation, ConversationUpdated, MessagePart};
use aip_store::{ChannelWrite, ConversationWrite, NewAudit, NewChannelMessage};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::caller::Caller;
use crate::clock::now_ms;
use crate::error::RuntimeError;
use crate::runtime::Runtime;
use crate::scope::{SCOPE_ALL, SCOPE_CHANNEL_RAW, SCOPE_CHANNEL_READ, SCOPE_CHANNEL_WRITE};

/// The resource kind conversations are listed under (`resource_list_request`).
pub const CONVERSATION_KIND: &str = "aip.channel.conversation";

/// Longest conversation id, delivery id or label.
const MAX_ID_CHARS: usize = 256;
/// Most labels on a conversation.
const MAX_LABELS: usize = 64;
/// Placeholder of a redacted raw-payload value.
pub const REDACTED: &str = "[redacted]";

/// Deployment policy for channel messages (spec 15.2-15.3).
#[derive(Debug, Clone)]
pub struct ChannelPolicy {
    /// Keep `raw_payload` (redacted) with the message; otherwise it is dropped before storage.
    pub retain_raw_payload: bool,
    /// Object keys whose values are replaced by [`REDACTED`] anywhere in a retained raw payload
    /// (compared case-insensitively).
    pub redact_keys: Vec<String>,
    /// Most parts in one message.
    pub max_parts: usize,
    /// Largest inline `data` of one part, in bytes once base64-decoded.
    pub max_inline_bytes: usize,
}

impl Default for ChannelPolicy {
    fn default() -> Self {
        ChannelPolicy {
            retain_raw_payload: false,
            redact_keys: [
                "password",
                "secret",
                "token",
                "authorization",
                "api_key",
                "cookie",
            ]
            .map(str::to_owned)
            .to_vec(),
            max_parts: 64,
            max_inline_bytes: 1024 * 1024,
        }
    }
}

/// A recorded channel message: its id and the conversation as it now is.
#[derive(Debug, Clone)]
pub struct ChannelRecorded {
    /// Message id (`chm_…`).
    pub message_id: String,
    /// The stored conversation.
    pub conversation: Conversation,
    /// Whether a raw payload was kept (redacted) with it.
    pub raw_payload_retained: bool,
}

impl Caller {
    /// Whether the caller may record channel messages and conversation updates.
    pub fn may_write_channels(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_CHANNEL_WRITE)
    }

    fn reads_all_conversations(&self) -> bool {
        self.reads_whole_tenant() || self.has(SCOPE_CHANNEL_READ)
    }

    fn reads_raw_payloads(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_CHANNEL_RAW)
    }
}

/// Where a channel write came from, as its transport verified it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChannelSource<'a> {
    /// The delivery id a profile verified (the webhook id); `None` takes the message's
    /// `delivery.id`.
    pub delivery_id: Option<&'a str>,
    /// The sender's time of the write (the envelope's `sent_at`, the webhook timestamp), epoch
    /// ms: a write older than the conversation's stored state is recorded without rolling the
    /// conversation back. `None` is now.
    pub sent_at_ms: Option<i64>,
}

impl Runtime {
    /// `aip.channel.v1.message_created` from an authenticated connector. A delivery already
    /// recorded by this connector is [`RuntimeError::Replay`], nothing stored.
    pub async fn record_channel_message(
        &self,
        caller: &Caller,
        message: &ChannelMessage,
        source: ChannelSource<'_>,
    ) -> Result<ChannelRecorded, RuntimeError> {
        let delivery_id = source.delivery_id;
        if !caller.may_write_channels() {
            return Err(RuntimeError::ScopeDenied(format!(
                "recording channel messages (it needs {SCOPE_CHANNEL_WRITE})"
            )));
        }
        caller.check_identity_tenant(message.identity.as_ref())?;
        let policy = &self.config().channels;
        let conversation = conversation_write(caller, &message.conversation, source)?;
        let delivery = match delivery_id {
            Some(id) => id.to_owned(),
            None => message
                .delivery
                .as_ref()
                .and_then(|d| d.get("id"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    RuntimeError::InvalidInput(
                        "a channel message needs `delivery.id`: the provider's delivery id, claimed against replays".into(),
                    )
                })?,
        };
        bounded_id("delivery.id", &delivery)?;
        check_parts(policy, &message.parts)?;
        let raw = match (&message.raw_payload, policy.retain_raw_payload) {
            (Some(raw), true) => Some(redact(raw, &policy.redact_keys)),
            _ => None,
        };
        let message_id = aip_core::generate_with_prefix("chm_");
        let mut body = json!({
            "message": message.message,
            "sender": message.sender,
            "parts": message.parts,
        });
        for (key, value) in [
            ("identity", message.identity.as_ref().map(|i| json!(i))),
            ("delivery", message.delivery.clone()),
            ("raw_payload", raw.clone()),
        ] {
            if let Some(v) = value {
                body[key] = v;
            }
        }
        let now = now_ms();
        let audit = audit(
            caller,
            "channel.message_recorded",
            now,
            json!({ "conversation_id": conversation.conversation_id, "message_id": message_id,
                    "delivery_id": delivery, "parts": message.parts.len(),
                    "raw_payload_retained": raw.is_some() }),
        );
        let written = self
            .store()
            .record_channel_message(NewChannelMessage {
                conversation,
                message_id: message_id.clone(),
                delivery_key: delivery,
                body,
                audit,
                now_ms: now,
            })
            .await?;
        match written {
            ChannelWrite::Recorded(record) => Ok(ChannelRecorded {
                message_id,
                conversation: read::conversation(&record.body)?,
                raw_payload_retained: raw.is_some(),
            }),
            ChannelWrite::Replayed => Err(RuntimeError::Replay),
        }
    }

    /// `aip.channel.v1.conversation_updated` from an authenticated connector: the conversation's
    /// stored state becomes this one, unless the stored one is newer by the sender's clock. With a
    /// profile's verified delivery id, a replayed delivery is [`RuntimeError::Replay`] and changes
    /// nothing.
    pub async fn update_conversation(
        &self,
        caller: &Caller,
        update: &ConversationUpdated,
        source: ChannelSource<'_>,
    ) -> Result<Conversation, RuntimeError> {
        let delivery_id = source.delivery_id;
        if !caller.may_write_channels() {
            return Err(RuntimeError::ScopeDenied(format!(
                "updating conversations (it needs {SCOPE_CHANNEL_WRITE})"
            )));
        }
        caller.check_identity_tenant(update.identity.as_ref())?;
        if update.changed_fields.len() > MAX_LABELS
            || update.changed_fields.iter().any(|f| f.len() > MAX_ID_CHARS)
        {
            return Err(RuntimeError::InvalidInput(
                "changed_fields: at most 64 names of at most 256 characters".into(),
            ));
        }
        let conversation = conversation_write(caller, &update.conversation, source)?;
        let now = now_ms();
        let audit = audit(
            caller,
            "channel.conversation_updated",
            now,
            json!({ "conversation_id": conversation.conversation_id,
                    "status": conversation.status, "changed_fields": update.changed_fields }),
        );
        match self
            .store()
            .update_conversation(conversation, audit, delivery_id.map(str::to_owned), now)
            .await?
        {
            ChannelWrite::Recorded(record) => read::conversation(&record.body),
            ChannelWrite::Replayed => Err(RuntimeError::Replay),
        }
    }
}

fn conversation_write(
    caller: &Caller,
    c: &Conversation,
    source: ChannelSource<'_>,
) -> Result<ConversationWrite, RuntimeError> {
    bounded_id("conversation.id", c.id.as_str())?;
    if c.labels.len() > MAX_LABELS || c.labels.iter().any(|l| l.len() > MAX_ID_CHARS) {
        return Err(RuntimeError::InvalidInput(
            "conversation.labels: at most 64 labels of at most 256 characters".into(),
        ));
    }
    Ok(ConversationWrite {
        tenant: caller.tenant.clone(),
        conversation_id: c.id.as_str().to_owned(),
        recorded_by: caller.id.clone(),
        assignee: c.assignee.as_ref().map(|p| p.id.as_str().to_owned()),
        contact: c.contact.as_ref().map(|p| p.id.as_str().to_owned()),
        status: c.status.as_str().to_owned(),
        body: serde_json::to_value(c)
            .map_err(|_| RuntimeError::Internal("a conversation does not serialize"))?,
        as_of_ms: source.sent_at_ms.unwrap_or_else(now_ms),
    })
}

fn bounded_id(what: &str, id: &str) -> Result<(), RuntimeError> {
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS {
        return Err(RuntimeError::InvalidInput(format!(
            "{what} must have 1 to {MAX_ID_CHARS} characters"
        )));
    }
    Ok(())
}

/// Spec 15.2 bounds: a part count, inline data that is base64 within the policy's size, media that
/// carries a URL or data, and a stated file size that matches its inline data.
fn check_parts(policy: &ChannelPolicy, parts: &[MessagePart]) -> Result<(), RuntimeError> {
    if parts.len() > policy.max_parts {
        return Err(RuntimeError::InvalidInput(format!(
            "a channel message has at most {} parts",
            policy.max_parts
        )));
    }
    for (i, part) in parts.iter().enumerate() {
        let (url, data, size) = match part {
            MessagePart::Image { url, data, .. } | MessagePart::Audio { url, data, .. } => {
                (url, data, None)
            }
            MessagePart::File {
                url,
                data,
                size_bytes,
                ..
            } => (url, data, *size_bytes),
            _ => continue,
        };
        if url.is_none() && data.is_none() {
            return Err(RuntimeError::InvalidInput(format!(
                "parts[{i}]: media needs a `url` or inline `data`"
            )));
        }
        if let Some(url) = url
            && (url.len() > 4096 || !url.contains(':'))
        {
            return Err(RuntimeError::InvalidInput(format!(
                "parts[{i}].url must be an absolute URI of at most 4096 bytes"
            )));
        }
        let Some(data) = data else { continue };
        // The encoded length bounds the decoded one before anything is decoded.
        if data.len() / 4 * 3 > policy.max_inline_bytes.saturating_add(3) {
            return Err(RuntimeError::InvalidInput(format!(
                "parts[{i}].data is larger than {} bytes: use a resource URI",
                policy.max_inline_bytes
            )));
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| RuntimeError::InvalidInput(format!("parts[{i}].data is not base64")))?;
        if bytes.len() > policy.max_inline_bytes {
            return Err(RuntimeError::InvalidInput(format!(
                "parts[{i}].data is larger than {} bytes: use a resource URI",
                policy.max_inline_bytes
            )));
        }
        if size.is_some_and(|s| usize::try_from(s).ok() != Some(bytes.len())) {
            return Err(RuntimeError::InvalidInput(format!(
                "parts[{i}].size_bytes does not match its inline data"
            )));
        }
    }
    Ok(())
}

/// `value` with the value of every key in `keys` (at any depth, case-insensitive) replaced.
pub fn redact(value: &Value, keys: &[String]) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let hidden = keys.iter().any(|r| r.eq_ignore_ascii_case(k));
                    let v = if hidden {
                        Value::String(REDACTED.into())
                    } else {
                        redact(v, keys)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| redact(v, keys)).collect()),
        other => other.clone(),
    }
}

fn audit(caller: &Caller, label: &str, now: i64, data: Value) -> NewAudit {
    crate::events::new_audit(caller, label, now, data, (None, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_listed_keys_at_any_depth_whatever_their_case() {
        let keys = ChannelPolicy::default().redact_keys;
        let raw = json!({ "Token": "t0p", "user": { "password": "p", "name": "ann" },
                          "items": [{ "api_key": 1 }] });
        assert_eq!(
            redact(&raw, &keys),
            json!({ "Token": REDACTED, "user": { "password": REDACTED, "name": "ann" },
                    "items": [{ "api_key": REDACTED }] })
        );
    }

    #[test]
    fn media_parts_are_bounded_and_checked() {
        let policy = ChannelPolicy {
            max_inline_bytes: 4,
            ..ChannelPolicy::default()
        };
        let image = |url: Option<&str>, data: Option<&str>| MessagePart::Image {
            url: url.map(str::to_owned),
            data: data.map(str::to_owned),
            mime_type: "image/png".into(),
            alt: None,
        };
        let file = |data: &str, size: u64| MessagePart::File {
            url: None,
            data: Some(data.into()),
            mime_type: "text/plain".into(),
            filename: "a.txt".into(),
            size_bytes: Some(size),
        };
        assert!(check_parts(&policy, &[image(Some("https://x/a.png"), None)]).is_ok());
        assert!(check_parts(&policy, &[image(None, Some("AAEC"))]).is_ok());
        assert!(check_parts(&policy, &[file("AAEC", 3)]).is_ok());
        for bad in [
            image(None, None),
            image(Some("no-scheme"), None),
            image(None, Some("not base64!")),
            image(None, Some("AAECAwQF")),
            file("AAEC", 4),
        ] {
            assert!(
                check_parts(&policy, std::slice::from_ref(&bad)).is_err(),
                "{bad:?}"
            );
        }
        let many = vec![
            MessagePart::Text {
                text: "x".into(),
                format: None
            };
            65
        ];
        assert!(check_parts(&ChannelPolicy::default(), &many).is_err());
    }
}
