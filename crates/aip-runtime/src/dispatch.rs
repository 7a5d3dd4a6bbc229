//! The one table from message type to the module that serves it (spec 7). Every binding enters
//! here: decode (bounded), authenticate the envelope (skew, signature, replay), then the row of its
//! message type. A registered type without a row answers `aip.core.unsupported_message_type`; adding
//! a feature means adding its module and its rows, nothing else.

use std::sync::Arc;

use aip_core::{Envelope, MessageBody, MessageType};
use serde_json::Value;

use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::reply::Reply;
use crate::runtime::Runtime;

/// Which envelopes an entry point accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Accept {
    /// Any message type the runtime serves (`POST /aip/v1/messages`, WebSocket, NATS).
    AnyMessage,
    /// Actions only (`POST /aip/v1/actions`).
    ActionsOnly,
}

/// The message types this runtime serves, grouped by area (what the dispatch table has rows for).
pub const SERVED: &[MessageType] = &[
    MessageType::Handshake,
    MessageType::Action,
    MessageType::Cancel,
    MessageType::Heartbeat,
    MessageType::ActionStatusRequest,
    MessageType::ActionResultRequest,
    MessageType::ActionListRequest,
    MessageType::ActionEventsRequest,
    MessageType::SessionRequest,
    MessageType::SessionListRequest,
    MessageType::SessionCloseRequest,
    MessageType::SessionResumeRequest,
    MessageType::ManifestRequest,
    MessageType::EventStreamRequest,
    MessageType::ReceiptQueryRequest,
    MessageType::AuditQueryRequest,
    MessageType::ApprovalDecision,
    MessageType::ApprovalQueryRequest,
    MessageType::ApprovalListRequest,
    MessageType::Escalation,
    MessageType::EscalationResolution,
    MessageType::ResourceListRequest,
    MessageType::ResourceReadRequest,
    MessageType::TransactionRequest,
    MessageType::TransactionQueryRequest,
    MessageType::CallbackDeliveryQueryRequest,
    MessageType::CallbackDeliveryListRequest,
    MessageType::DelegationRequest,
    MessageType::ChannelMessage,
    MessageType::Conversation,
    MessageType::BatchSettlement,
];

impl Runtime {
    /// Decodes, authenticates and serves one native envelope (spec 20.1). Never panics; every
    /// rejection is an `aip.core.v1.error` envelope with its typed code.
    pub async fn handle(self: &Arc<Self>, caller: &Caller, bytes: &[u8], accept: Accept) -> Reply {
        match aip_core::decode_envelope_value(bytes, self.decode_limits()) {
            Ok((envelope, raw)) => self.handle_decoded(caller, &envelope, &raw, accept).await,
            Err(err) => {
                // Past the size and depth bounds the JSON is readable: the reply can name the
                // request it answers.
                let readable = !matches!(
                    err,
                    aip_core::DecodeError::Limit { .. }
                        | aip_core::DecodeError::MalformedJson { .. }
                );
                let raw = readable
                    .then(|| serde_json::from_slice::<Value>(bytes).ok())
                    .flatten();
                Reply::undecodable(raw.as_ref(), err)
            }
        }
    }

    /// [`Runtime::handle`] for an envelope a binding has already decoded (with
    /// [`aip_core::decode_envelope_value`] under [`Runtime::decode_limits`]): `raw` is the JSON as
    /// received, which signature checks hash.
    pub async fn handle_decoded(
        self: &Arc<Self>,
        caller: &Caller,
        envelope: &Envelope,
        raw: &Value,
        accept: Accept,
    ) -> Reply {
        match self.serve(caller, envelope, raw, accept).await {
            Ok(reply) => reply,
            Err(err) => Reply::error(Some(envelope), &err),
        }
    }

    async fn serve(
        self: &Arc<Self>,
        caller: &Caller,
        envelope: &Envelope,
        raw: &Value,
        accept: Accept,
    ) -> Result<Reply, RuntimeError> {
        if accept == Accept::ActionsOnly && !matches!(envelope.body, MessageBody::Action(_)) {
            return Err(RuntimeError::UnsupportedMessage(format!(
                "{} on an actions-only endpoint",
                envelope.message_type.as_str()
            )));
        }
        let data = || serde_json::json!({ "message_type": envelope.message_type.as_str(), "message_id": envelope.message_id });
        let caller = &match self.authenticate_envelope(caller, envelope, raw).await {
            Ok(authenticated) => authenticated,
            // Aggregated per (tenant, signer, reason): a caller claiming a peer's key needs no
            // credential, so a forged-signature flood must not cost a write per request.
            Err(err) if err.is_security_refusal() => {
                let mut facts = data();
                facts["code"] = serde_json::Value::String(err.code().as_str().to_owned());
                let refusal = crate::security::refusals::Refusal {
                    tenant: Some(caller.tenant.clone()),
                    source: caller.id.clone(),
                    reason: crate::security::refusals::RefusalReason::EnvelopeRejected,
                    label: "envelope.rejected",
                    data: facts,
                };
                return Err(match self.note_refusal(refusal).await {
                    Ok(()) => err,
                    Err(unwritten) => unwritten,
                });
            }
            Err(err) => return Err(err),
        };
        match self.serve_authenticated(caller, envelope).await {
            // Actions audit their own refusals (every profile submits them, not only envelopes).
            Err(err) if !matches!(envelope.body, MessageBody::Action(_)) => Err(self
                .audit_refusal(caller, "request.denied", err, data(), (None, None))
                .await),
            served => served,
        }
    }

    async fn serve_authenticated(
        self: &Arc<Self>,
        caller: &Caller,
        envelope: &Envelope,
    ) -> Result<Reply, RuntimeError> {
        let request = envelope;
        use MessageBody as B;
        Ok(match &envelope.body {
            B::Handshake(b) => crate::session::serve_handshake(self, caller, request, b).await?,
            B::Action(b) => {
                let submitted = self
                    .submit_action(caller, ActionRequest::from_envelope(request, b))
                    .await?;
                crate::action::reply(request, submitted)
            }
            B::Cancel(b) => crate::action::cancel::serve(self, caller, request, b).await?,
            B::Heartbeat(b) => crate::session::heartbeat(request, b),
            B::ActionStatusRequest(b) => Reply::done(
                request,
                B::ActionStatus(self.read_action_status(caller, b).await?),
            ),
            B::ActionResultRequest(b) => Reply::done(
                request,
                B::ActionResult(self.read_action_result(caller, b).await?),
            ),
            B::ActionListRequest(b) => Reply::done(
                request,
                B::ActionList(self.read_action_list(caller, b).await?),
            ),
            B::ActionEventsRequest(b) => Reply::done(
                request,
                B::ActionEvents(self.read_action_events(caller, b, None).await?),
            ),
            B::SessionRequest(b) => {
                Reply::done(request, B::SessionView(self.read_session(caller, b).await?))
            }
            B::SessionListRequest(b) => Reply::done(
                request,
                B::SessionList(self.read_sessions(caller, b).await?),
            ),
            B::SessionCloseRequest(b) => Reply::done(
                request,
                B::SessionView(
                    self.close_session(caller, b.session_id.as_str(), b.reason.as_deref())
                        .await?,
                ),
            ),
            B::SessionResumeRequest(b) => Reply::done(
                request,
                B::SessionResume(self.read_resume(caller, b).await?),
            ),
            B::ManifestRequest(b) => Reply::done(
                request,
                B::Manifest(self.manifest(caller, b.filter.as_ref(), &b.profiles)),
            ),
            B::EventStreamRequest(b) => Reply::done(
                request,
                B::EventStream(self.read_events(caller, b, None).await?),
            ),
            B::ReceiptQueryRequest(b) => Reply::done(
                request,
                B::ReceiptChain(self.read_receipts(caller, b).await?),
            ),
            B::AuditQueryRequest(b) => Reply::done(
                request,
                B::AuditQueryResult(self.read_audit(caller, b).await?),
            ),
            B::ApprovalDecision(b) => Reply::done(
                request,
                B::ApprovalRecordView(self.decide_approval(caller, b).await?),
            ),
            B::ApprovalQueryRequest(b) => Reply::done(
                request,
                B::ApprovalRecordView(self.read_approval(caller, b).await?),
            ),
            B::ApprovalListRequest(b) => Reply::done(
                request,
                B::ApprovalList(self.read_approvals(caller, b).await?),
            ),
            B::ResourceListRequest(b) => Reply::done(
                request,
                B::ResourceList(self.read_resources(caller, b).await?),
            ),
            B::ResourceReadRequest(b) => Reply::done(
                request,
                B::ResourceReadResult(self.read_resource(caller, b).await?),
            ),
            B::TransactionRequest(b) => self.serve_transaction_request(caller, request, b).await?,
            B::TransactionQueryRequest(b) => Reply::done(
                request,
                B::TransactionView(self.read_transaction(caller, b).await?),
            ),
            B::CallbackDeliveryQueryRequest(b) => Reply::done(
                request,
                B::CallbackDeliveryRecord(self.read_callback_delivery(caller, b).await?),
            ),
            B::CallbackDeliveryListRequest(b) => Reply::done(
                request,
                B::CallbackDeliveryList(self.read_callback_deliveries(caller, b).await?),
            ),
            B::DelegationRequest(b) => self.serve_delegation_request(caller, request, b).await?,
            // Recording answers with the conversation as it now is.
            B::ChannelMessage(b) => {
                let recorded = self
                    .record_channel_message(caller, b, channel_source(request))
                    .await?;
                Reply::done(
                    request,
                    B::Conversation(aip_core::ConversationUpdated {
                        conversation: recorded.conversation,
                        identity: None,
                        changed_fields: vec!["messages".into()],
                    }),
                )
            }
            // Closing a batch answers with the batch (signed, with its chain: `read_settlement`).
            B::BatchSettlement(b) => {
                let view = self.close_settlement(caller, b).await?;
                let batch =
                    serde_json::from_value(view.envelope["body"]["batch_settlement"].clone())
                        .map_err(|_| {
                            RuntimeError::Internal("a stored settlement batch does not decode")
                        })?;
                Reply::done(request, B::BatchSettlement(batch))
            }
            B::Conversation(b) => Reply::done(
                request,
                B::Conversation(aip_core::ConversationUpdated {
                    conversation: self
                        .update_conversation(caller, b, channel_source(request))
                        .await?,
                    identity: None,
                    changed_fields: b.changed_fields.clone(),
                }),
            ),
            B::Escalation(b) => self.raise_escalation(caller, request, b).await?,
            B::EscalationResolution(b) => {
                self.serve_escalation_resolution(caller, request, b).await?
            }
            other => {
                return Err(RuntimeError::UnsupportedMessage(
                    other.message_type().as_str().to_owned(),
                ));
            }
        })
    }
}

/// A channel write's source as an envelope states it: its `sent_at` (checked against the clock skew
/// before dispatch), the delivery id from the message.
fn channel_source(request: &Envelope) -> crate::channel::ChannelSource<'static> {
    crate::channel::ChannelSource {
        delivery_id: None,
        sent_at_ms: request.sent_at.unix_millis(),
    }
}
