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
        // An action is charged at its admission; every other request here, to the read buckets.
        if !matches!(envelope.body, MessageBody::Action(_)) {
            self.check_read_rate(caller).await?;
        }
        match self.serve_authenticated(caller, envelope).await {
            // Actions audit their own refusals (every profile submits them, not only envelopes).
            Err(err) if !matches!(envelope.body, MessageBody::Action(_)) => Err(self
                .audit_refusal(caller, "request.denied", err, data(), (None, None))
                .await),
            served => served,
        }
    }
}

/// The table: one row per message type served, `Type(body) => reply`. It generates [`SERVED`] and
/// the dispatch, so the two cannot disagree.
macro_rules! dispatch_table {
    (
        async fn $name:ident($this:ident, $caller:ident, $request:ident) {
            $( $variant:ident($body:pat) => $serve:expr, )+
        }
    ) => {
        /// The message types this runtime serves: the rows of its dispatch table, grouped by area.
        pub const SERVED: &[MessageType] = &[$(MessageType::$variant),+];

        impl Runtime {
            async fn $name(
                $this: &Arc<Self>,
                $caller: &Caller,
                $request: &Envelope,
            ) -> Result<Reply, RuntimeError> {
                use MessageBody as B;
                Ok(match &$request.body {
                    $( B::$variant($body) => $serve, )+
                    other => {
                        return Err(RuntimeError::UnsupportedMessage(
                            other.message_type().as_str().to_owned(),
                        ));
                    }
                })
            }
        }
    };
}

dispatch_table! {
    async fn serve_authenticated(self, caller, request) {
        Handshake(b) => crate::session::serve_handshake(self, caller, request, b).await?,
        Action(b) => {
            let submitted = self
                .submit_action(caller, ActionRequest::from_envelope(request, b))
                .await?;
            crate::action::reply(request, submitted)
        },
        Cancel(b) => crate::action::cancel::serve(self, caller, request, b).await?,
        Heartbeat(b) => crate::session::heartbeat(request, b),
        ActionStatusRequest(b) => Reply::done(
            request,
            B::ActionStatus(self.read_action_status(caller, b).await?),
        ),
        ActionResultRequest(b) => Reply::done(
            request,
            B::ActionResult(self.read_action_result(caller, b).await?),
        ),
        ActionListRequest(b) => Reply::done(
            request,
            B::ActionList(self.read_action_list(caller, b).await?),
        ),
        ActionEventsRequest(b) => Reply::done(
            request,
            B::ActionEvents(self.read_action_events(caller, b, None).await?),
        ),
        SessionRequest(b) => {
            Reply::done(request, B::SessionView(self.read_session(caller, b).await?))
        },
        SessionListRequest(b) => Reply::done(
            request,
            B::SessionList(self.read_sessions(caller, b).await?),
        ),
        SessionCloseRequest(b) => Reply::done(
            request,
            B::SessionView(
                self.close_session(caller, b.session_id.as_str(), b.reason.as_deref())
                    .await?,
            ),
        ),
        SessionResumeRequest(b) => Reply::done(
            request,
            B::SessionResume(self.read_resume(caller, b).await?),
        ),
        ManifestRequest(b) => Reply::done(
            request,
            B::Manifest(self.manifest(caller, b.filter.as_ref(), &b.profiles)),
        ),
        EventStreamRequest(b) => Reply::done(
            request,
            B::EventStream(self.read_events(caller, b, None).await?),
        ),
        ReceiptQueryRequest(b) => Reply::done(
            request,
            B::ReceiptChain(self.read_receipts(caller, b).await?),
        ),
        AuditQueryRequest(b) => Reply::done(
            request,
            B::AuditQueryResult(self.read_audit(caller, b).await?),
        ),
        ApprovalDecision(b) => Reply::done(
            request,
            B::ApprovalRecordView(self.decide_approval(caller, b).await?),
        ),
        ApprovalQueryRequest(b) => Reply::done(
            request,
            B::ApprovalRecordView(self.read_approval(caller, b).await?),
        ),
        ApprovalListRequest(b) => Reply::done(
            request,
            B::ApprovalList(self.read_approvals(caller, b).await?),
        ),
        Escalation(b) => self.raise_escalation(caller, request, b).await?,
        EscalationResolution(b) => {
            self.serve_escalation_resolution(caller, request, b).await?
        },
        ResourceListRequest(b) => Reply::done(
            request,
            B::ResourceList(self.read_resources(caller, b).await?),
        ),
        ResourceReadRequest(b) => Reply::done(
            request,
            B::ResourceReadResult(self.read_resource(caller, b).await?),
        ),
        TransactionRequest(b) => self.serve_transaction_request(caller, request, b).await?,
        TransactionQueryRequest(b) => Reply::done(
            request,
            B::TransactionView(self.read_transaction(caller, b).await?),
        ),
        CallbackDeliveryQueryRequest(b) => Reply::done(
            request,
            B::CallbackDeliveryRecord(self.read_callback_delivery(caller, b).await?),
        ),
        CallbackDeliveryListRequest(b) => Reply::done(
            request,
            B::CallbackDeliveryList(self.read_callback_deliveries(caller, b).await?),
        ),
        DelegationRequest(b) => self.serve_delegation_request(caller, request, b).await?,
        // Recording answers with the conversation as it now is.
        ChannelMessage(b) => {
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
        },
        Conversation(b) => Reply::done(
            request,
            B::Conversation(aip_core::ConversationUpdated {
                conversation: self
                    .update_conversation(caller, b, channel_source(request))
                    .await?,
                identity: None,
                changed_fields: b.changed_fields.clone(),
            }),
        ),
        // Closing a batch answers with the batch (signed, with its chain: `read_settlement`).
        BatchSettlement(b) => {
            let view = self.close_settlement(caller, b).await?;
            let batch =
                serde_json::from_value(view.envelope["body"]["batch_settlement"].clone())
                    .map_err(|_| {
                        RuntimeError::Internal("a stored settlement batch does not decode")
                    })?;
            Reply::done(request, B::BatchSettlement(batch))
        },
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
