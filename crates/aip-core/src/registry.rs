//! The message-type registry (spec 7): all 58 registered types, their body keys and body types.
//!
//! One table, the `message_types!` invocation below, in the normative `MessageBody` union's order:
//! the type enum, its wire strings and body keys, the body enum, its validation and its conversions
//! are all generated from it, so a type is added or changed on one line.

use crate::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! message_types {
    ($( #[doc = $doc:tt] $variant:ident($body:ident) = $wire:tt, $key:tt; )+) => {
        /// A registered, fully qualified message type (spec 7).
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
            JsonSchema,
        )]
        pub enum MessageType {
            $(
                #[doc = concat!("`", $wire, "`:", $doc)]
                #[serde(rename = $wire)]
                $variant,
            )+
        }

        impl MessageType {
            /// Every registered type, in schema order.
            pub const ALL: &[MessageType] = &[$(MessageType::$variant),+];

            /// The registered wire string, e.g. `aip.core.v1.action`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(MessageType::$variant => $wire,)+
                }
            }

            /// The body key that carries this type's payload (spec 6.1; some differ from the
            /// suffix).
            pub fn body_key(self) -> &'static str {
                match self {
                    $(MessageType::$variant => $key,)+
                }
            }

            /// Looks a registered wire string up; `None` for an unregistered type (spec 7.3 last
            /// paragraph).
            pub fn from_wire(s: &str) -> Option<MessageType> {
                match s {
                    $($wire => Some(MessageType::$variant),)+
                    _ => None,
                }
            }

            /// The type whose body key is `key`.
            pub fn from_body_key(key: &str) -> Option<MessageType> {
                match key {
                    $($key => Some(MessageType::$variant),)+
                    _ => None,
                }
            }

            /// The Rust body type name, as in the normative `$defs`.
            pub fn body_type_name(self) -> &'static str {
                match self {
                    $(MessageType::$variant => stringify!($body),)+
                }
            }
        }

        /// Exactly one externally tagged message body (spec 6.1).
        ///
        // The generated schema's description keeps the wording and line break of the normative
        // union's doc, so the schema files (and their digest) are unchanged.
        #[doc = " Variants are stored inline: an envelope owns exactly one body, so boxing would add \
                 an allocation"]
        /// per message without saving memory.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub enum MessageBody {
            $(
                #[doc = $doc]
                #[serde(rename = $key)]
                $variant($body),
            )+
        }

        impl MessageBody {
            /// The message type this body implies (spec 6.1).
            pub fn message_type(&self) -> MessageType {
                match self {
                    $(MessageBody::$variant(_) => MessageType::$variant,)+
                }
            }
        }

        impl Validate for MessageBody {
            fn validate(&self, v: &mut Checker) {
                match self {
                    $(MessageBody::$variant(b) => v.field($key, |v| b.validate(v)),)+
                }
            }
        }

        $(
            impl From<$body> for MessageBody {
                fn from(b: $body) -> Self {
                    MessageBody::$variant(b)
                }
            }
        )+
    };
}

message_types! {
    /// Session negotiation request.
    Handshake(Handshake) = "aip.core.v1.handshake", "handshake";
    /// Session negotiation response.
    HandshakeResponse(HandshakeResponse) = "aip.core.v1.handshake_response", "handshake_response";
    /// Capability invocation.
    Action(Action) = "aip.core.v1.action", "action";
    /// Action acknowledgement.
    Ack(Ack) = "aip.core.v1.ack", "ack";
    /// Stream chunk.
    StreamChunk(StreamChunk) = "aip.core.v1.stream_chunk", "stream_chunk";
    /// Action result.
    ActionResult(ActionResult) = "aip.core.v1.action_result", "action_result";
    /// Action status query.
    ActionStatusRequest(ActionStatusRequest)
        = "aip.lifecycle.v1.action_status_request", "action_status_request";
    /// Action status response.
    ActionStatus(ActionStatus) = "aip.lifecycle.v1.action_status", "action_status";
    /// Action result query.
    ActionResultRequest(ActionResultRequest)
        = "aip.lifecycle.v1.action_result_request", "action_result_request";
    /// Action list query.
    ActionListRequest(ActionListRequest)
        = "aip.lifecycle.v1.action_list_request", "action_list_request";
    /// Action list response.
    ActionList(ActionList) = "aip.lifecycle.v1.action_list", "action_list";
    /// Action-scoped events query.
    ActionEventsRequest(ActionEventsRequest)
        = "aip.lifecycle.v1.action_events_request", "action_events_request";
    /// Action-scoped events response.
    ActionEvents(ActionEvents) = "aip.lifecycle.v1.action_events", "action_events";
    /// Approval request.
    ApprovalRequest(ApprovalRequest) = "aip.policy.v1.approval_request", "approval_request";
    /// Approval decision.
    ApprovalDecision(ApprovalDecision) = "aip.policy.v1.approval_decision", "approval_decision";
    /// Approval query request.
    ApprovalQueryRequest(ApprovalQueryRequest)
        = "aip.policy.v1.approval_query_request", "approval_query_request";
    /// Approval list request.
    ApprovalListRequest(ApprovalListRequest)
        = "aip.policy.v1.approval_list_request", "approval_list_request";
    /// Approval record view.
    ApprovalRecordView(ApprovalRecordView)
        = "aip.policy.v1.approval_record_view", "approval_record_view";
    /// Approval list response.
    ApprovalList(ApprovalList) = "aip.policy.v1.approval_list", "approval_list";
    /// Callback delivery query request.
    CallbackDeliveryQueryRequest(CallbackDeliveryQueryRequest)
        = "aip.callback.v1.delivery_query_request", "callback_delivery_query_request";
    /// Callback delivery list request.
    CallbackDeliveryListRequest(CallbackDeliveryListRequest)
        = "aip.callback.v1.delivery_list_request", "callback_delivery_list_request";
    /// Callback delivery record response.
    CallbackDeliveryRecord(CallbackDeliveryRecord)
        = "aip.callback.v1.delivery_record", "callback_delivery_record";
    /// Callback delivery list response.
    CallbackDeliveryList(CallbackDeliveryList)
        = "aip.callback.v1.delivery_list", "callback_delivery_list";
    /// Session query request.
    SessionRequest(SessionRequest) = "aip.session.v1.session_request", "session_request";
    /// Session view response.
    SessionView(SessionView) = "aip.session.v1.session_view", "session_view";
    /// Session list request.
    SessionListRequest(SessionListRequest)
        = "aip.session.v1.session_list_request", "session_list_request";
    /// Session list response.
    SessionList(SessionList) = "aip.session.v1.session_list", "session_list";
    /// Session close request.
    SessionCloseRequest(SessionCloseRequest)
        = "aip.session.v1.session_close_request", "session_close_request";
    /// Session resume request.
    SessionResumeRequest(SessionResumeRequest)
        = "aip.session.v1.session_resume_request", "session_resume_request";
    /// Session resume response.
    SessionResume(SessionResume) = "aip.session.v1.session_resume", "session_resume";
    /// Agent-to-agent delegation request.
    DelegationRequest(DelegationRequest) = "aip.agent.v1.delegation_request", "delegation_request";
    /// Agent-to-agent delegation result.
    DelegationResult(DelegationResult) = "aip.agent.v1.delegation_result", "delegation_result";
    /// First-class transaction request.
    TransactionRequest(TransactionRequest) = "aip.transaction.v1.request", "transaction_request";
    /// First-class transaction result.
    TransactionResult(TransactionResult) = "aip.transaction.v1.result", "transaction_result";
    /// Transaction query request.
    TransactionQueryRequest(TransactionQueryRequest)
        = "aip.transaction.v1.query_request", "transaction_query_request";
    /// Transaction view response.
    TransactionView(TransactionView) = "aip.transaction.v1.view", "transaction_view";
    /// Error body.
    Error(ErrorBody) = "aip.core.v1.error", "error";
    /// Cancel body.
    Cancel(Cancel) = "aip.core.v1.cancel", "cancel";
    /// Heartbeat body.
    Heartbeat(Heartbeat) = "aip.core.v1.heartbeat", "heartbeat";
    /// Heartbeat acknowledgement body.
    HeartbeatAck(HeartbeatAck) = "aip.core.v1.heartbeat_ack", "heartbeat_ack";
    /// Escalation body.
    Escalation(Escalation) = "aip.core.v1.escalation", "escalation";
    /// Escalation resolution body.
    EscalationResolution(EscalationResolution)
        = "aip.core.v1.escalation_resolution", "escalation_resolution";
    /// Manifest request body.
    ManifestRequest(ManifestRequest) = "aip.discovery.v1.manifest_request", "manifest_request";
    /// Manifest response body.
    Manifest(Manifest) = "aip.discovery.v1.manifest_response", "manifest";
    /// Event stream request body.
    EventStreamRequest(EventStreamRequest)
        = "aip.discovery.v1.event_stream_request", "event_stream_request";
    /// Event stream body.
    EventStream(EventStream) = "aip.discovery.v1.event_stream_response", "event_stream";
    /// Channel message body.
    ChannelMessage(ChannelMessage) = "aip.channel.v1.message_created", "channel_message";
    /// Conversation update body.
    Conversation(ConversationUpdated) = "aip.channel.v1.conversation_updated", "conversation";
    /// Receipt chain body.
    ReceiptChain(ReceiptChain) = "aip.audit.v1.receipt_chain", "receipt_chain";
    /// Receipt query request.
    ReceiptQueryRequest(ReceiptQueryRequest)
        = "aip.audit.v1.receipt_query_request", "receipt_query_request";
    /// Audit event body.
    AuditEvent(AuditEvent) = "aip.audit.v1.audit_event", "audit_event";
    /// Audit query request.
    AuditQueryRequest(AuditQueryRequest)
        = "aip.audit.v1.audit_query_request", "audit_query_request";
    /// Audit query response.
    AuditQueryResult(AuditQueryResult) = "aip.audit.v1.audit_query_result", "audit_query_result";
    /// Native resource list request.
    ResourceListRequest(ResourceListRequest)
        = "aip.resource.v1.resource_list_request", "resource_list_request";
    /// Native resource list response.
    ResourceList(ResourceList) = "aip.resource.v1.resource_list", "resource_list";
    /// Native resource read request.
    ResourceReadRequest(ResourceReadRequest)
        = "aip.resource.v1.resource_read_request", "resource_read_request";
    /// Native resource read response.
    ResourceReadResult(ResourceReadResult)
        = "aip.resource.v1.resource_read_result", "resource_read_result";
    /// Batch settlement body.
    BatchSettlement(BatchSettlement) = "aip.economic.v1.batch_settlement", "batch_settlement";
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
