//! The message-type registry (spec 7): all 58 registered types, their body keys and body types.
//!
//! Generated from the normative `MessageBody` union; the order is the schema's order.

use crate::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A registered, fully qualified message type (spec 7).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum MessageType {
    /// `aip.core.v1.handshake`: Session negotiation request.
    #[serde(rename = "aip.core.v1.handshake")]
    Handshake,
    /// `aip.core.v1.handshake_response`: Session negotiation response.
    #[serde(rename = "aip.core.v1.handshake_response")]
    HandshakeResponse,
    /// `aip.core.v1.action`: Capability invocation.
    #[serde(rename = "aip.core.v1.action")]
    Action,
    /// `aip.core.v1.ack`: Action acknowledgement.
    #[serde(rename = "aip.core.v1.ack")]
    Ack,
    /// `aip.core.v1.stream_chunk`: Stream chunk.
    #[serde(rename = "aip.core.v1.stream_chunk")]
    StreamChunk,
    /// `aip.core.v1.action_result`: Action result.
    #[serde(rename = "aip.core.v1.action_result")]
    ActionResult,
    /// `aip.lifecycle.v1.action_status_request`: Action status query.
    #[serde(rename = "aip.lifecycle.v1.action_status_request")]
    ActionStatusRequest,
    /// `aip.lifecycle.v1.action_status`: Action status response.
    #[serde(rename = "aip.lifecycle.v1.action_status")]
    ActionStatus,
    /// `aip.lifecycle.v1.action_result_request`: Action result query.
    #[serde(rename = "aip.lifecycle.v1.action_result_request")]
    ActionResultRequest,
    /// `aip.lifecycle.v1.action_list_request`: Action list query.
    #[serde(rename = "aip.lifecycle.v1.action_list_request")]
    ActionListRequest,
    /// `aip.lifecycle.v1.action_list`: Action list response.
    #[serde(rename = "aip.lifecycle.v1.action_list")]
    ActionList,
    /// `aip.lifecycle.v1.action_events_request`: Action-scoped events query.
    #[serde(rename = "aip.lifecycle.v1.action_events_request")]
    ActionEventsRequest,
    /// `aip.lifecycle.v1.action_events`: Action-scoped events response.
    #[serde(rename = "aip.lifecycle.v1.action_events")]
    ActionEvents,
    /// `aip.policy.v1.approval_request`: Approval request.
    #[serde(rename = "aip.policy.v1.approval_request")]
    ApprovalRequest,
    /// `aip.policy.v1.approval_decision`: Approval decision.
    #[serde(rename = "aip.policy.v1.approval_decision")]
    ApprovalDecision,
    /// `aip.policy.v1.approval_query_request`: Approval query request.
    #[serde(rename = "aip.policy.v1.approval_query_request")]
    ApprovalQueryRequest,
    /// `aip.policy.v1.approval_list_request`: Approval list request.
    #[serde(rename = "aip.policy.v1.approval_list_request")]
    ApprovalListRequest,
    /// `aip.policy.v1.approval_record_view`: Approval record view.
    #[serde(rename = "aip.policy.v1.approval_record_view")]
    ApprovalRecordView,
    /// `aip.policy.v1.approval_list`: Approval list response.
    #[serde(rename = "aip.policy.v1.approval_list")]
    ApprovalList,
    /// `aip.callback.v1.delivery_query_request`: Callback delivery query request.
    #[serde(rename = "aip.callback.v1.delivery_query_request")]
    CallbackDeliveryQueryRequest,
    /// `aip.callback.v1.delivery_list_request`: Callback delivery list request.
    #[serde(rename = "aip.callback.v1.delivery_list_request")]
    CallbackDeliveryListRequest,
    /// `aip.callback.v1.delivery_record`: Callback delivery record response.
    #[serde(rename = "aip.callback.v1.delivery_record")]
    CallbackDeliveryRecord,
    /// `aip.callback.v1.delivery_list`: Callback delivery list response.
    #[serde(rename = "aip.callback.v1.delivery_list")]
    CallbackDeliveryList,
    /// `aip.session.v1.session_request`: Session query request.
    #[serde(rename = "aip.session.v1.session_request")]
    SessionRequest,
    /// `aip.session.v1.session_view`: Session view response.
    #[serde(rename = "aip.session.v1.session_view")]
    SessionView,
    /// `aip.session.v1.session_list_request`: Session list request.
    #[serde(rename = "aip.session.v1.session_list_request")]
    SessionListRequest,
    /// `aip.session.v1.session_list`: Session list response.
    #[serde(rename = "aip.session.v1.session_list")]
    SessionList,
    /// `aip.session.v1.session_close_request`: Session close request.
    #[serde(rename = "aip.session.v1.session_close_request")]
    SessionCloseRequest,
    /// `aip.session.v1.session_resume_request`: Session resume request.
    #[serde(rename = "aip.session.v1.session_resume_request")]
    SessionResumeRequest,
    /// `aip.session.v1.session_resume`: Session resume response.
    #[serde(rename = "aip.session.v1.session_resume")]
    SessionResume,
    /// `aip.agent.v1.delegation_request`: Agent-to-agent delegation request.
    #[serde(rename = "aip.agent.v1.delegation_request")]
    DelegationRequest,
    /// `aip.agent.v1.delegation_result`: Agent-to-agent delegation result.
    #[serde(rename = "aip.agent.v1.delegation_result")]
    DelegationResult,
    /// `aip.transaction.v1.request`: First-class transaction request.
    #[serde(rename = "aip.transaction.v1.request")]
    TransactionRequest,
    /// `aip.transaction.v1.result`: First-class transaction result.
    #[serde(rename = "aip.transaction.v1.result")]
    TransactionResult,
    /// `aip.transaction.v1.query_request`: Transaction query request.
    #[serde(rename = "aip.transaction.v1.query_request")]
    TransactionQueryRequest,
    /// `aip.transaction.v1.view`: Transaction view response.
    #[serde(rename = "aip.transaction.v1.view")]
    TransactionView,
    /// `aip.core.v1.error`: Error body.
    #[serde(rename = "aip.core.v1.error")]
    Error,
    /// `aip.core.v1.cancel`: Cancel body.
    #[serde(rename = "aip.core.v1.cancel")]
    Cancel,
    /// `aip.core.v1.heartbeat`: Heartbeat body.
    #[serde(rename = "aip.core.v1.heartbeat")]
    Heartbeat,
    /// `aip.core.v1.heartbeat_ack`: Heartbeat acknowledgement body.
    #[serde(rename = "aip.core.v1.heartbeat_ack")]
    HeartbeatAck,
    /// `aip.core.v1.escalation`: Escalation body.
    #[serde(rename = "aip.core.v1.escalation")]
    Escalation,
    /// `aip.core.v1.escalation_resolution`: Escalation resolution body.
    #[serde(rename = "aip.core.v1.escalation_resolution")]
    EscalationResolution,
    /// `aip.discovery.v1.manifest_request`: Manifest request body.
    #[serde(rename = "aip.discovery.v1.manifest_request")]
    ManifestRequest,
    /// `aip.discovery.v1.manifest_response`: Manifest response body.
    #[serde(rename = "aip.discovery.v1.manifest_response")]
    Manifest,
    /// `aip.discovery.v1.event_stream_request`: Event stream request body.
    #[serde(rename = "aip.discovery.v1.event_stream_request")]
    EventStreamRequest,
    /// `aip.discovery.v1.event_stream_response`: Event stream body.
    #[serde(rename = "aip.discovery.v1.event_stream_response")]
    EventStream,
    /// `aip.channel.v1.message_created`: Channel message body.
    #[serde(rename = "aip.channel.v1.message_created")]
    ChannelMessage,
    /// `aip.channel.v1.conversation_updated`: Conversation update body.
    #[serde(rename = "aip.channel.v1.conversation_updated")]
    Conversation,
    /// `aip.audit.v1.receipt_chain`: Receipt chain body.
    #[serde(rename = "aip.audit.v1.receipt_chain")]
    ReceiptChain,
    /// `aip.audit.v1.receipt_query_request`: Receipt query request.
    #[serde(rename = "aip.audit.v1.receipt_query_request")]
    ReceiptQueryRequest,
    /// `aip.audit.v1.audit_event`: Audit event body.
    #[serde(rename = "aip.audit.v1.audit_event")]
    AuditEvent,
    /// `aip.audit.v1.audit_query_request`: Audit query request.
    #[serde(rename = "aip.audit.v1.audit_query_request")]
    AuditQueryRequest,
    /// `aip.audit.v1.audit_query_result`: Audit query response.
    #[serde(rename = "aip.audit.v1.audit_query_result")]
    AuditQueryResult,
    /// `aip.resource.v1.resource_list_request`: Native resource list request.
    #[serde(rename = "aip.resource.v1.resource_list_request")]
    ResourceListRequest,
    /// `aip.resource.v1.resource_list`: Native resource list response.
    #[serde(rename = "aip.resource.v1.resource_list")]
    ResourceList,
    /// `aip.resource.v1.resource_read_request`: Native resource read request.
    #[serde(rename = "aip.resource.v1.resource_read_request")]
    ResourceReadRequest,
    /// `aip.resource.v1.resource_read_result`: Native resource read response.
    #[serde(rename = "aip.resource.v1.resource_read_result")]
    ResourceReadResult,
    /// `aip.economic.v1.batch_settlement`: Batch settlement body.
    #[serde(rename = "aip.economic.v1.batch_settlement")]
    BatchSettlement,
}

impl MessageType {
    /// Every registered type, in schema order.
    pub const ALL: &[MessageType] = &[
        MessageType::Handshake,
        MessageType::HandshakeResponse,
        MessageType::Action,
        MessageType::Ack,
        MessageType::StreamChunk,
        MessageType::ActionResult,
        MessageType::ActionStatusRequest,
        MessageType::ActionStatus,
        MessageType::ActionResultRequest,
        MessageType::ActionListRequest,
        MessageType::ActionList,
        MessageType::ActionEventsRequest,
        MessageType::ActionEvents,
        MessageType::ApprovalRequest,
        MessageType::ApprovalDecision,
        MessageType::ApprovalQueryRequest,
        MessageType::ApprovalListRequest,
        MessageType::ApprovalRecordView,
        MessageType::ApprovalList,
        MessageType::CallbackDeliveryQueryRequest,
        MessageType::CallbackDeliveryListRequest,
        MessageType::CallbackDeliveryRecord,
        MessageType::CallbackDeliveryList,
        MessageType::SessionRequest,
        MessageType::SessionView,
        MessageType::SessionListRequest,
        MessageType::SessionList,
        MessageType::SessionCloseRequest,
        MessageType::SessionResumeRequest,
        MessageType::SessionResume,
        MessageType::DelegationRequest,
        MessageType::DelegationResult,
        MessageType::TransactionRequest,
        MessageType::TransactionResult,
        MessageType::TransactionQueryRequest,
        MessageType::TransactionView,
        MessageType::Error,
        MessageType::Cancel,
        MessageType::Heartbeat,
        MessageType::HeartbeatAck,
        MessageType::Escalation,
        MessageType::EscalationResolution,
        MessageType::ManifestRequest,
        MessageType::Manifest,
        MessageType::EventStreamRequest,
        MessageType::EventStream,
        MessageType::ChannelMessage,
        MessageType::Conversation,
        MessageType::ReceiptChain,
        MessageType::ReceiptQueryRequest,
        MessageType::AuditEvent,
        MessageType::AuditQueryRequest,
        MessageType::AuditQueryResult,
        MessageType::ResourceListRequest,
        MessageType::ResourceList,
        MessageType::ResourceReadRequest,
        MessageType::ResourceReadResult,
        MessageType::BatchSettlement,
    ];

    /// The registered wire string, e.g. `aip.core.v1.action`.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Handshake => "aip.core.v1.handshake",
            MessageType::HandshakeResponse => "aip.core.v1.handshake_response",
            MessageType::Action => "aip.core.v1.action",
            MessageType::Ack => "aip.core.v1.ack",
            MessageType::StreamChunk => "aip.core.v1.stream_chunk",
            MessageType::ActionResult => "aip.core.v1.action_result",
            MessageType::ActionStatusRequest => "aip.lifecycle.v1.action_status_request",
            MessageType::ActionStatus => "aip.lifecycle.v1.action_status",
            MessageType::ActionResultRequest => "aip.lifecycle.v1.action_result_request",
            MessageType::ActionListRequest => "aip.lifecycle.v1.action_list_request",
            MessageType::ActionList => "aip.lifecycle.v1.action_list",
            MessageType::ActionEventsRequest => "aip.lifecycle.v1.action_events_request",
            MessageType::ActionEvents => "aip.lifecycle.v1.action_events",
            MessageType::ApprovalRequest => "aip.policy.v1.approval_request",
            MessageType::ApprovalDecision => "aip.policy.v1.approval_decision",
            MessageType::ApprovalQueryRequest => "aip.policy.v1.approval_query_request",
            MessageType::ApprovalListRequest => "aip.policy.v1.approval_list_request",
            MessageType::ApprovalRecordView => "aip.policy.v1.approval_record_view",
            MessageType::ApprovalList => "aip.policy.v1.approval_list",
            MessageType::CallbackDeliveryQueryRequest => "aip.callback.v1.delivery_query_request",
            MessageType::CallbackDeliveryListRequest => "aip.callback.v1.delivery_list_request",
            MessageType::CallbackDeliveryRecord => "aip.callback.v1.delivery_record",
            MessageType::CallbackDeliveryList => "aip.callback.v1.delivery_list",
            MessageType::SessionRequest => "aip.session.v1.session_request",
            MessageType::SessionView => "aip.session.v1.session_view",
            MessageType::SessionListRequest => "aip.session.v1.session_list_request",
            MessageType::SessionList => "aip.session.v1.session_list",
            MessageType::SessionCloseRequest => "aip.session.v1.session_close_request",
            MessageType::SessionResumeRequest => "aip.session.v1.session_resume_request",
            MessageType::SessionResume => "aip.session.v1.session_resume",
            MessageType::DelegationRequest => "aip.agent.v1.delegation_request",
            MessageType::DelegationResult => "aip.agent.v1.delegation_result",
            MessageType::TransactionRequest => "aip.transaction.v1.request",
            MessageType::TransactionResult => "aip.transaction.v1.result",
            MessageType::TransactionQueryRequest => "aip.transaction.v1.query_request",
            MessageType::TransactionView => "aip.transaction.v1.view",
            MessageType::Error => "aip.core.v1.error",
            MessageType::Cancel => "aip.core.v1.cancel",
            MessageType::Heartbeat => "aip.core.v1.heartbeat",
            MessageType::HeartbeatAck => "aip.core.v1.heartbeat_ack",
            MessageType::Escalation => "aip.core.v1.escalation",
            MessageType::EscalationResolution => "aip.core.v1.escalation_resolution",
            MessageType::ManifestRequest => "aip.discovery.v1.manifest_request",
            MessageType::Manifest => "aip.discovery.v1.manifest_response",
            MessageType::EventStreamRequest => "aip.discovery.v1.event_stream_request",
            MessageType::EventStream => "aip.discovery.v1.event_stream_response",
            MessageType::ChannelMessage => "aip.channel.v1.message_created",
            MessageType::Conversation => "aip.channel.v1.conversation_updated",
            MessageType::ReceiptChain => "aip.audit.v1.receipt_chain",
            MessageType::ReceiptQueryRequest => "aip.audit.v1.receipt_query_request",
            MessageType::AuditEvent => "aip.audit.v1.audit_event",
            MessageType::AuditQueryRequest => "aip.audit.v1.audit_query_request",
            MessageType::AuditQueryResult => "aip.audit.v1.audit_query_result",
            MessageType::ResourceListRequest => "aip.resource.v1.resource_list_request",
            MessageType::ResourceList => "aip.resource.v1.resource_list",
            MessageType::ResourceReadRequest => "aip.resource.v1.resource_read_request",
            MessageType::ResourceReadResult => "aip.resource.v1.resource_read_result",
            MessageType::BatchSettlement => "aip.economic.v1.batch_settlement",
        }
    }

    /// The body key that carries this type's payload (spec 6.1; some differ from the suffix).
    pub fn body_key(self) -> &'static str {
        match self {
            MessageType::Handshake => "handshake",
            MessageType::HandshakeResponse => "handshake_response",
            MessageType::Action => "action",
            MessageType::Ack => "ack",
            MessageType::StreamChunk => "stream_chunk",
            MessageType::ActionResult => "action_result",
            MessageType::ActionStatusRequest => "action_status_request",
            MessageType::ActionStatus => "action_status",
            MessageType::ActionResultRequest => "action_result_request",
            MessageType::ActionListRequest => "action_list_request",
            MessageType::ActionList => "action_list",
            MessageType::ActionEventsRequest => "action_events_request",
            MessageType::ActionEvents => "action_events",
            MessageType::ApprovalRequest => "approval_request",
            MessageType::ApprovalDecision => "approval_decision",
            MessageType::ApprovalQueryRequest => "approval_query_request",
            MessageType::ApprovalListRequest => "approval_list_request",
            MessageType::ApprovalRecordView => "approval_record_view",
            MessageType::ApprovalList => "approval_list",
            MessageType::CallbackDeliveryQueryRequest => "callback_delivery_query_request",
            MessageType::CallbackDeliveryListRequest => "callback_delivery_list_request",
            MessageType::CallbackDeliveryRecord => "callback_delivery_record",
            MessageType::CallbackDeliveryList => "callback_delivery_list",
            MessageType::SessionRequest => "session_request",
            MessageType::SessionView => "session_view",
            MessageType::SessionListRequest => "session_list_request",
            MessageType::SessionList => "session_list",
            MessageType::SessionCloseRequest => "session_close_request",
            MessageType::SessionResumeRequest => "session_resume_request",
            MessageType::SessionResume => "session_resume",
            MessageType::DelegationRequest => "delegation_request",
            MessageType::DelegationResult => "delegation_result",
            MessageType::TransactionRequest => "transaction_request",
            MessageType::TransactionResult => "transaction_result",
            MessageType::TransactionQueryRequest => "transaction_query_request",
            MessageType::TransactionView => "transaction_view",
            MessageType::Error => "error",
            MessageType::Cancel => "cancel",
            MessageType::Heartbeat => "heartbeat",
            MessageType::HeartbeatAck => "heartbeat_ack",
            MessageType::Escalation => "escalation",
            MessageType::EscalationResolution => "escalation_resolution",
            MessageType::ManifestRequest => "manifest_request",
            MessageType::Manifest => "manifest",
            MessageType::EventStreamRequest => "event_stream_request",
            MessageType::EventStream => "event_stream",
            MessageType::ChannelMessage => "channel_message",
            MessageType::Conversation => "conversation",
            MessageType::ReceiptChain => "receipt_chain",
            MessageType::ReceiptQueryRequest => "receipt_query_request",
            MessageType::AuditEvent => "audit_event",
            MessageType::AuditQueryRequest => "audit_query_request",
            MessageType::AuditQueryResult => "audit_query_result",
            MessageType::ResourceListRequest => "resource_list_request",
            MessageType::ResourceList => "resource_list",
            MessageType::ResourceReadRequest => "resource_read_request",
            MessageType::ResourceReadResult => "resource_read_result",
            MessageType::BatchSettlement => "batch_settlement",
        }
    }

    /// Looks a registered wire string up; `None` for an unregistered type (spec 7.3 last paragraph).
    pub fn from_wire(s: &str) -> Option<MessageType> {
        match s {
            "aip.core.v1.handshake" => Some(MessageType::Handshake),
            "aip.core.v1.handshake_response" => Some(MessageType::HandshakeResponse),
            "aip.core.v1.action" => Some(MessageType::Action),
            "aip.core.v1.ack" => Some(MessageType::Ack),
            "aip.core.v1.stream_chunk" => Some(MessageType::StreamChunk),
            "aip.core.v1.action_result" => Some(MessageType::ActionResult),
            "aip.lifecycle.v1.action_status_request" => Some(MessageType::ActionStatusRequest),
            "aip.lifecycle.v1.action_status" => Some(MessageType::ActionStatus),
            "aip.lifecycle.v1.action_result_request" => Some(MessageType::ActionResultRequest),
            "aip.lifecycle.v1.action_list_request" => Some(MessageType::ActionListRequest),
            "aip.lifecycle.v1.action_list" => Some(MessageType::ActionList),
            "aip.lifecycle.v1.action_events_request" => Some(MessageType::ActionEventsRequest),
            "aip.lifecycle.v1.action_events" => Some(MessageType::ActionEvents),
            "aip.policy.v1.approval_request" => Some(MessageType::ApprovalRequest),
            "aip.policy.v1.approval_decision" => Some(MessageType::ApprovalDecision),
            "aip.policy.v1.approval_query_request" => Some(MessageType::ApprovalQueryRequest),
            "aip.policy.v1.approval_list_request" => Some(MessageType::ApprovalListRequest),
            "aip.policy.v1.approval_record_view" => Some(MessageType::ApprovalRecordView),
            "aip.policy.v1.approval_list" => Some(MessageType::ApprovalList),
            "aip.callback.v1.delivery_query_request" => {
                Some(MessageType::CallbackDeliveryQueryRequest)
            }
            "aip.callback.v1.delivery_list_request" => {
                Some(MessageType::CallbackDeliveryListRequest)
            }
            "aip.callback.v1.delivery_record" => Some(MessageType::CallbackDeliveryRecord),
            "aip.callback.v1.delivery_list" => Some(MessageType::CallbackDeliveryList),
            "aip.session.v1.session_request" => Some(MessageType::SessionRequest),
            "aip.session.v1.session_view" => Some(MessageType::SessionView),
            "aip.session.v1.session_list_request" => Some(MessageType::SessionListRequest),
            "aip.session.v1.session_list" => Some(MessageType::SessionList),
            "aip.session.v1.session_close_request" => Some(MessageType::SessionCloseRequest),
            "aip.session.v1.session_resume_request" => Some(MessageType::SessionResumeRequest),
            "aip.session.v1.session_resume" => Some(MessageType::SessionResume),
            "aip.agent.v1.delegation_request" => Some(MessageType::DelegationRequest),
            "aip.agent.v1.delegation_result" => Some(MessageType::DelegationResult),
            "aip.transaction.v1.request" => Some(MessageType::TransactionRequest),
            "aip.transaction.v1.result" => Some(MessageType::TransactionResult),
            "aip.transaction.v1.query_request" => Some(MessageType::TransactionQueryRequest),
            "aip.transaction.v1.view" => Some(MessageType::TransactionView),
            "aip.core.v1.error" => Some(MessageType::Error),
            "aip.core.v1.cancel" => Some(MessageType::Cancel),
            "aip.core.v1.heartbeat" => Some(MessageType::Heartbeat),
            "aip.core.v1.heartbeat_ack" => Some(MessageType::HeartbeatAck),
            "aip.core.v1.escalation" => Some(MessageType::Escalation),
            "aip.core.v1.escalation_resolution" => Some(MessageType::EscalationResolution),
            "aip.discovery.v1.manifest_request" => Some(MessageType::ManifestRequest),
            "aip.discovery.v1.manifest_response" => Some(MessageType::Manifest),
            "aip.discovery.v1.event_stream_request" => Some(MessageType::EventStreamRequest),
            "aip.discovery.v1.event_stream_response" => Some(MessageType::EventStream),
            "aip.channel.v1.message_created" => Some(MessageType::ChannelMessage),
            "aip.channel.v1.conversation_updated" => Some(MessageType::Conversation),
            "aip.audit.v1.receipt_chain" => Some(MessageType::ReceiptChain),
            "aip.audit.v1.receipt_query_request" => Some(MessageType::ReceiptQueryRequest),
            "aip.audit.v1.audit_event" => Some(MessageType::AuditEvent),
            "aip.audit.v1.audit_query_request" => Some(MessageType::AuditQueryRequest),
            "aip.audit.v1.audit_query_result" => Some(MessageType::AuditQueryResult),
            "aip.resource.v1.resource_list_request" => Some(MessageType::ResourceListRequest),
            "aip.resource.v1.resource_list" => Some(MessageType::ResourceList),
            "aip.resource.v1.resource_read_request" => Some(MessageType::ResourceReadRequest),
            "aip.resource.v1.resource_read_result" => Some(MessageType::ResourceReadResult),
            "aip.economic.v1.batch_settlement" => Some(MessageType::BatchSettlement),
            _ => None,
        }
    }

    /// The type whose body key is `key`.
    pub fn from_body_key(key: &str) -> Option<MessageType> {
        match key {
            "handshake" => Some(MessageType::Handshake),
            "handshake_response" => Some(MessageType::HandshakeResponse),
            "action" => Some(MessageType::Action),
            "ack" => Some(MessageType::Ack),
            "stream_chunk" => Some(MessageType::StreamChunk),
            "action_result" => Some(MessageType::ActionResult),
            "action_status_request" => Some(MessageType::ActionStatusRequest),
            "action_status" => Some(MessageType::ActionStatus),
            "action_result_request" => Some(MessageType::ActionResultRequest),
            "action_list_request" => Some(MessageType::ActionListRequest),
            "action_list" => Some(MessageType::ActionList),
            "action_events_request" => Some(MessageType::ActionEventsRequest),
            "action_events" => Some(MessageType::ActionEvents),
            "approval_request" => Some(MessageType::ApprovalRequest),
            "approval_decision" => Some(MessageType::ApprovalDecision),
            "approval_query_request" => Some(MessageType::ApprovalQueryRequest),
            "approval_list_request" => Some(MessageType::ApprovalListRequest),
            "approval_record_view" => Some(MessageType::ApprovalRecordView),
            "approval_list" => Some(MessageType::ApprovalList),
            "callback_delivery_query_request" => Some(MessageType::CallbackDeliveryQueryRequest),
            "callback_delivery_list_request" => Some(MessageType::CallbackDeliveryListRequest),
            "callback_delivery_record" => Some(MessageType::CallbackDeliveryRecord),
            "callback_delivery_list" => Some(MessageType::CallbackDeliveryList),
            "session_request" => Some(MessageType::SessionRequest),
            "session_view" => Some(MessageType::SessionView),
            "session_list_request" => Some(MessageType::SessionListRequest),
            "session_list" => Some(MessageType::SessionList),
            "session_close_request" => Some(MessageType::SessionCloseRequest),
            "session_resume_request" => Some(MessageType::SessionResumeRequest),
            "session_resume" => Some(MessageType::SessionResume),
            "delegation_request" => Some(MessageType::DelegationRequest),
            "delegation_result" => Some(MessageType::DelegationResult),
            "transaction_request" => Some(MessageType::TransactionRequest),
            "transaction_result" => Some(MessageType::TransactionResult),
            "transaction_query_request" => Some(MessageType::TransactionQueryRequest),
            "transaction_view" => Some(MessageType::TransactionView),
            "error" => Some(MessageType::Error),
            "cancel" => Some(MessageType::Cancel),
            "heartbeat" => Some(MessageType::Heartbeat),
            "heartbeat_ack" => Some(MessageType::HeartbeatAck),
            "escalation" => Some(MessageType::Escalation),
            "escalation_resolution" => Some(MessageType::EscalationResolution),
            "manifest_request" => Some(MessageType::ManifestRequest),
            "manifest" => Some(MessageType::Manifest),
            "event_stream_request" => Some(MessageType::EventStreamRequest),
            "event_stream" => Some(MessageType::EventStream),
            "channel_message" => Some(MessageType::ChannelMessage),
            "conversation" => Some(MessageType::Conversation),
            "receipt_chain" => Some(MessageType::ReceiptChain),
            "receipt_query_request" => Some(MessageType::ReceiptQueryRequest),
            "audit_event" => Some(MessageType::AuditEvent),
            "audit_query_request" => Some(MessageType::AuditQueryRequest),
            "audit_query_result" => Some(MessageType::AuditQueryResult),
            "resource_list_request" => Some(MessageType::ResourceListRequest),
            "resource_list" => Some(MessageType::ResourceList),
            "resource_read_request" => Some(MessageType::ResourceReadRequest),
            "resource_read_result" => Some(MessageType::ResourceReadResult),
            "batch_settlement" => Some(MessageType::BatchSettlement),
            _ => None,
        }
    }

    /// The Rust body type name, as in the normative `$defs`.
    pub fn body_type_name(self) -> &'static str {
        match self {
            MessageType::Handshake => "Handshake",
            MessageType::HandshakeResponse => "HandshakeResponse",
            MessageType::Action => "Action",
            MessageType::Ack => "Ack",
            MessageType::StreamChunk => "StreamChunk",
            MessageType::ActionResult => "ActionResult",
            MessageType::ActionStatusRequest => "ActionStatusRequest",
            MessageType::ActionStatus => "ActionStatus",
            MessageType::ActionResultRequest => "ActionResultRequest",
            MessageType::ActionListRequest => "ActionListRequest",
            MessageType::ActionList => "ActionList",
            MessageType::ActionEventsRequest => "ActionEventsRequest",
            MessageType::ActionEvents => "ActionEvents",
            MessageType::ApprovalRequest => "ApprovalRequest",
            MessageType::ApprovalDecision => "ApprovalDecision",
            MessageType::ApprovalQueryRequest => "ApprovalQueryRequest",
            MessageType::ApprovalListRequest => "ApprovalListRequest",
            MessageType::ApprovalRecordView => "ApprovalRecordView",
            MessageType::ApprovalList => "ApprovalList",
            MessageType::CallbackDeliveryQueryRequest => "CallbackDeliveryQueryRequest",
            MessageType::CallbackDeliveryListRequest => "CallbackDeliveryListRequest",
            MessageType::CallbackDeliveryRecord => "CallbackDeliveryRecord",
            MessageType::CallbackDeliveryList => "CallbackDeliveryList",
            MessageType::SessionRequest => "SessionRequest",
            MessageType::SessionView => "SessionView",
            MessageType::SessionListRequest => "SessionListRequest",
            MessageType::SessionList => "SessionList",
            MessageType::SessionCloseRequest => "SessionCloseRequest",
            MessageType::SessionResumeRequest => "SessionResumeRequest",
            MessageType::SessionResume => "SessionResume",
            MessageType::DelegationRequest => "DelegationRequest",
            MessageType::DelegationResult => "DelegationResult",
            MessageType::TransactionRequest => "TransactionRequest",
            MessageType::TransactionResult => "TransactionResult",
            MessageType::TransactionQueryRequest => "TransactionQueryRequest",
            MessageType::TransactionView => "TransactionView",
            MessageType::Error => "ErrorBody",
            MessageType::Cancel => "Cancel",
            MessageType::Heartbeat => "Heartbeat",
            MessageType::HeartbeatAck => "HeartbeatAck",
            MessageType::Escalation => "Escalation",
            MessageType::EscalationResolution => "EscalationResolution",
            MessageType::ManifestRequest => "ManifestRequest",
            MessageType::Manifest => "Manifest",
            MessageType::EventStreamRequest => "EventStreamRequest",
            MessageType::EventStream => "EventStream",
            MessageType::ChannelMessage => "ChannelMessage",
            MessageType::Conversation => "ConversationUpdated",
            MessageType::ReceiptChain => "ReceiptChain",
            MessageType::ReceiptQueryRequest => "ReceiptQueryRequest",
            MessageType::AuditEvent => "AuditEvent",
            MessageType::AuditQueryRequest => "AuditQueryRequest",
            MessageType::AuditQueryResult => "AuditQueryResult",
            MessageType::ResourceListRequest => "ResourceListRequest",
            MessageType::ResourceList => "ResourceList",
            MessageType::ResourceReadRequest => "ResourceReadRequest",
            MessageType::ResourceReadResult => "ResourceReadResult",
            MessageType::BatchSettlement => "BatchSettlement",
        }
    }
}

impl std::fmt::Display for MessageType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Exactly one externally tagged message body (spec 6.1).
///
/// Variants are stored inline: an envelope owns exactly one body, so boxing would add an allocation
/// per message without saving memory.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub enum MessageBody {
    /// Session negotiation request.
    #[serde(rename = "handshake")]
    Handshake(Handshake),
    /// Session negotiation response.
    #[serde(rename = "handshake_response")]
    HandshakeResponse(HandshakeResponse),
    /// Capability invocation.
    #[serde(rename = "action")]
    Action(Action),
    /// Action acknowledgement.
    #[serde(rename = "ack")]
    Ack(Ack),
    /// Stream chunk.
    #[serde(rename = "stream_chunk")]
    StreamChunk(StreamChunk),
    /// Action result.
    #[serde(rename = "action_result")]
    ActionResult(ActionResult),
    /// Action status query.
    #[serde(rename = "action_status_request")]
    ActionStatusRequest(ActionStatusRequest),
    /// Action status response.
    #[serde(rename = "action_status")]
    ActionStatus(ActionStatus),
    /// Action result query.
    #[serde(rename = "action_result_request")]
    ActionResultRequest(ActionResultRequest),
    /// Action list query.
    #[serde(rename = "action_list_request")]
    ActionListRequest(ActionListRequest),
    /// Action list response.
    #[serde(rename = "action_list")]
    ActionList(ActionList),
    /// Action-scoped events query.
    #[serde(rename = "action_events_request")]
    ActionEventsRequest(ActionEventsRequest),
    /// Action-scoped events response.
    #[serde(rename = "action_events")]
    ActionEvents(ActionEvents),
    /// Approval request.
    #[serde(rename = "approval_request")]
    ApprovalRequest(ApprovalRequest),
    /// Approval decision.
    #[serde(rename = "approval_decision")]
    ApprovalDecision(ApprovalDecision),
    /// Approval query request.
    #[serde(rename = "approval_query_request")]
    ApprovalQueryRequest(ApprovalQueryRequest),
    /// Approval list request.
    #[serde(rename = "approval_list_request")]
    ApprovalListRequest(ApprovalListRequest),
    /// Approval record view.
    #[serde(rename = "approval_record_view")]
    ApprovalRecordView(ApprovalRecordView),
    /// Approval list response.
    #[serde(rename = "approval_list")]
    ApprovalList(ApprovalList),
    /// Callback delivery query request.
    #[serde(rename = "callback_delivery_query_request")]
    CallbackDeliveryQueryRequest(CallbackDeliveryQueryRequest),
    /// Callback delivery list request.
    #[serde(rename = "callback_delivery_list_request")]
    CallbackDeliveryListRequest(CallbackDeliveryListRequest),
    /// Callback delivery record response.
    #[serde(rename = "callback_delivery_record")]
    CallbackDeliveryRecord(CallbackDeliveryRecord),
    /// Callback delivery list response.
    #[serde(rename = "callback_delivery_list")]
    CallbackDeliveryList(CallbackDeliveryList),
    /// Session query request.
    #[serde(rename = "session_request")]
    SessionRequest(SessionRequest),
    /// Session view response.
    #[serde(rename = "session_view")]
    SessionView(SessionView),
    /// Session list request.
    #[serde(rename = "session_list_request")]
    SessionListRequest(SessionListRequest),
    /// Session list response.
    #[serde(rename = "session_list")]
    SessionList(SessionList),
    /// Session close request.
    #[serde(rename = "session_close_request")]
    SessionCloseRequest(SessionCloseRequest),
    /// Session resume request.
    #[serde(rename = "session_resume_request")]
    SessionResumeRequest(SessionResumeRequest),
    /// Session resume response.
    #[serde(rename = "session_resume")]
    SessionResume(SessionResume),
    /// Agent-to-agent delegation request.
    #[serde(rename = "delegation_request")]
    DelegationRequest(DelegationRequest),
    /// Agent-to-agent delegation result.
    #[serde(rename = "delegation_result")]
    DelegationResult(DelegationResult),
    /// First-class transaction request.
    #[serde(rename = "transaction_request")]
    TransactionRequest(TransactionRequest),
    /// First-class transaction result.
    #[serde(rename = "transaction_result")]
    TransactionResult(TransactionResult),
    /// Transaction query request.
    #[serde(rename = "transaction_query_request")]
    TransactionQueryRequest(TransactionQueryRequest),
    /// Transaction view response.
    #[serde(rename = "transaction_view")]
    TransactionView(TransactionView),
    /// Error body.
    #[serde(rename = "error")]
    Error(ErrorBody),
    /// Cancel body.
    #[serde(rename = "cancel")]
    Cancel(Cancel),
    /// Heartbeat body.
    #[serde(rename = "heartbeat")]
    Heartbeat(Heartbeat),
    /// Heartbeat acknowledgement body.
    #[serde(rename = "heartbeat_ack")]
    HeartbeatAck(HeartbeatAck),
    /// Escalation body.
    #[serde(rename = "escalation")]
    Escalation(Escalation),
    /// Escalation resolution body.
    #[serde(rename = "escalation_resolution")]
    EscalationResolution(EscalationResolution),
    /// Manifest request body.
    #[serde(rename = "manifest_request")]
    ManifestRequest(ManifestRequest),
    /// Manifest response body.
    #[serde(rename = "manifest")]
    Manifest(Manifest),
    /// Event stream request body.
    #[serde(rename = "event_stream_request")]
    EventStreamRequest(EventStreamRequest),
    /// Event stream body.
    #[serde(rename = "event_stream")]
    EventStream(EventStream),
    /// Channel message body.
    #[serde(rename = "channel_message")]
    ChannelMessage(ChannelMessage),
    /// Conversation update body.
    #[serde(rename = "conversation")]
    Conversation(ConversationUpdated),
    /// Receipt chain body.
    #[serde(rename = "receipt_chain")]
    ReceiptChain(ReceiptChain),
    /// Receipt query request.
    #[serde(rename = "receipt_query_request")]
    ReceiptQueryRequest(ReceiptQueryRequest),
    /// Audit event body.
    #[serde(rename = "audit_event")]
    AuditEvent(AuditEvent),
    /// Audit query request.
    #[serde(rename = "audit_query_request")]
    AuditQueryRequest(AuditQueryRequest),
    /// Audit query response.
    #[serde(rename = "audit_query_result")]
    AuditQueryResult(AuditQueryResult),
    /// Native resource list request.
    #[serde(rename = "resource_list_request")]
    ResourceListRequest(ResourceListRequest),
    /// Native resource list response.
    #[serde(rename = "resource_list")]
    ResourceList(ResourceList),
    /// Native resource read request.
    #[serde(rename = "resource_read_request")]
    ResourceReadRequest(ResourceReadRequest),
    /// Native resource read response.
    #[serde(rename = "resource_read_result")]
    ResourceReadResult(ResourceReadResult),
    /// Batch settlement body.
    #[serde(rename = "batch_settlement")]
    BatchSettlement(BatchSettlement),
}

impl MessageBody {
    /// The message type this body implies (spec 6.1).
    pub fn message_type(&self) -> MessageType {
        match self {
            MessageBody::Handshake(_) => MessageType::Handshake,
            MessageBody::HandshakeResponse(_) => MessageType::HandshakeResponse,
            MessageBody::Action(_) => MessageType::Action,
            MessageBody::Ack(_) => MessageType::Ack,
            MessageBody::StreamChunk(_) => MessageType::StreamChunk,
            MessageBody::ActionResult(_) => MessageType::ActionResult,
            MessageBody::ActionStatusRequest(_) => MessageType::ActionStatusRequest,
            MessageBody::ActionStatus(_) => MessageType::ActionStatus,
            MessageBody::ActionResultRequest(_) => MessageType::ActionResultRequest,
            MessageBody::ActionListRequest(_) => MessageType::ActionListRequest,
            MessageBody::ActionList(_) => MessageType::ActionList,
            MessageBody::ActionEventsRequest(_) => MessageType::ActionEventsRequest,
            MessageBody::ActionEvents(_) => MessageType::ActionEvents,
            MessageBody::ApprovalRequest(_) => MessageType::ApprovalRequest,
            MessageBody::ApprovalDecision(_) => MessageType::ApprovalDecision,
            MessageBody::ApprovalQueryRequest(_) => MessageType::ApprovalQueryRequest,
            MessageBody::ApprovalListRequest(_) => MessageType::ApprovalListRequest,
            MessageBody::ApprovalRecordView(_) => MessageType::ApprovalRecordView,
            MessageBody::ApprovalList(_) => MessageType::ApprovalList,
            MessageBody::CallbackDeliveryQueryRequest(_) => {
                MessageType::CallbackDeliveryQueryRequest
            }
            MessageBody::CallbackDeliveryListRequest(_) => MessageType::CallbackDeliveryListRequest,
            MessageBody::CallbackDeliveryRecord(_) => MessageType::CallbackDeliveryRecord,
            MessageBody::CallbackDeliveryList(_) => MessageType::CallbackDeliveryList,
            MessageBody::SessionRequest(_) => MessageType::SessionRequest,
            MessageBody::SessionView(_) => MessageType::SessionView,
            MessageBody::SessionListRequest(_) => MessageType::SessionListRequest,
            MessageBody::SessionList(_) => MessageType::SessionList,
            MessageBody::SessionCloseRequest(_) => MessageType::SessionCloseRequest,
            MessageBody::SessionResumeRequest(_) => MessageType::SessionResumeRequest,
            MessageBody::SessionResume(_) => MessageType::SessionResume,
            MessageBody::DelegationRequest(_) => MessageType::DelegationRequest,
            MessageBody::DelegationResult(_) => MessageType::DelegationResult,
            MessageBody::TransactionRequest(_) => MessageType::TransactionRequest,
            MessageBody::TransactionResult(_) => MessageType::TransactionResult,
            MessageBody::TransactionQueryRequest(_) => MessageType::TransactionQueryRequest,
            MessageBody::TransactionView(_) => MessageType::TransactionView,
            MessageBody::Error(_) => MessageType::Error,
            MessageBody::Cancel(_) => MessageType::Cancel,
            MessageBody::Heartbeat(_) => MessageType::Heartbeat,
            MessageBody::HeartbeatAck(_) => MessageType::HeartbeatAck,
            MessageBody::Escalation(_) => MessageType::Escalation,
            MessageBody::EscalationResolution(_) => MessageType::EscalationResolution,
            MessageBody::ManifestRequest(_) => MessageType::ManifestRequest,
            MessageBody::Manifest(_) => MessageType::Manifest,
            MessageBody::EventStreamRequest(_) => MessageType::EventStreamRequest,
            MessageBody::EventStream(_) => MessageType::EventStream,
            MessageBody::ChannelMessage(_) => MessageType::ChannelMessage,
            MessageBody::Conversation(_) => MessageType::Conversation,
            MessageBody::ReceiptChain(_) => MessageType::ReceiptChain,
            MessageBody::ReceiptQueryRequest(_) => MessageType::ReceiptQueryRequest,
            MessageBody::AuditEvent(_) => MessageType::AuditEvent,
            MessageBody::AuditQueryRequest(_) => MessageType::AuditQueryRequest,
            MessageBody::AuditQueryResult(_) => MessageType::AuditQueryResult,
            MessageBody::ResourceListRequest(_) => MessageType::ResourceListRequest,
            MessageBody::ResourceList(_) => MessageType::ResourceList,
            MessageBody::ResourceReadRequest(_) => MessageType::ResourceReadRequest,
            MessageBody::ResourceReadResult(_) => MessageType::ResourceReadResult,
            MessageBody::BatchSettlement(_) => MessageType::BatchSettlement,
        }
    }
}

impl Validate for MessageBody {
    fn validate(&self, v: &mut Checker) {
        match self {
            MessageBody::Handshake(b) => v.field("handshake", |v| b.validate(v)),
            MessageBody::HandshakeResponse(b) => v.field("handshake_response", |v| b.validate(v)),
            MessageBody::Action(b) => v.field("action", |v| b.validate(v)),
            MessageBody::Ack(b) => v.field("ack", |v| b.validate(v)),
            MessageBody::StreamChunk(b) => v.field("stream_chunk", |v| b.validate(v)),
            MessageBody::ActionResult(b) => v.field("action_result", |v| b.validate(v)),
            MessageBody::ActionStatusRequest(b) => {
                v.field("action_status_request", |v| b.validate(v))
            }
            MessageBody::ActionStatus(b) => v.field("action_status", |v| b.validate(v)),
            MessageBody::ActionResultRequest(b) => {
                v.field("action_result_request", |v| b.validate(v))
            }
            MessageBody::ActionListRequest(b) => v.field("action_list_request", |v| b.validate(v)),
            MessageBody::ActionList(b) => v.field("action_list", |v| b.validate(v)),
            MessageBody::ActionEventsRequest(b) => {
                v.field("action_events_request", |v| b.validate(v))
            }
            MessageBody::ActionEvents(b) => v.field("action_events", |v| b.validate(v)),
            MessageBody::ApprovalRequest(b) => v.field("approval_request", |v| b.validate(v)),
            MessageBody::ApprovalDecision(b) => v.field("approval_decision", |v| b.validate(v)),
            MessageBody::ApprovalQueryRequest(b) => {
                v.field("approval_query_request", |v| b.validate(v))
            }
            MessageBody::ApprovalListRequest(b) => {
                v.field("approval_list_request", |v| b.validate(v))
            }
            MessageBody::ApprovalRecordView(b) => {
                v.field("approval_record_view", |v| b.validate(v))
            }
            MessageBody::ApprovalList(b) => v.field("approval_list", |v| b.validate(v)),
            MessageBody::CallbackDeliveryQueryRequest(b) => {
                v.field("callback_delivery_query_request", |v| b.validate(v))
            }
            MessageBody::CallbackDeliveryListRequest(b) => {
                v.field("callback_delivery_list_request", |v| b.validate(v))
            }
            MessageBody::CallbackDeliveryRecord(b) => {
                v.field("callback_delivery_record", |v| b.validate(v))
            }
            MessageBody::CallbackDeliveryList(b) => {
                v.field("callback_delivery_list", |v| b.validate(v))
            }
            MessageBody::SessionRequest(b) => v.field("session_request", |v| b.validate(v)),
            MessageBody::SessionView(b) => v.field("session_view", |v| b.validate(v)),
            MessageBody::SessionListRequest(b) => {
                v.field("session_list_request", |v| b.validate(v))
            }
            MessageBody::SessionList(b) => v.field("session_list", |v| b.validate(v)),
            MessageBody::SessionCloseRequest(b) => {
                v.field("session_close_request", |v| b.validate(v))
            }
            MessageBody::SessionResumeRequest(b) => {
                v.field("session_resume_request", |v| b.validate(v))
            }
            MessageBody::SessionResume(b) => v.field("session_resume", |v| b.validate(v)),
            MessageBody::DelegationRequest(b) => v.field("delegation_request", |v| b.validate(v)),
            MessageBody::DelegationResult(b) => v.field("delegation_result", |v| b.validate(v)),
            MessageBody::TransactionRequest(b) => v.field("transaction_request", |v| b.validate(v)),
            MessageBody::TransactionResult(b) => v.field("transaction_result", |v| b.validate(v)),
            MessageBody::TransactionQueryRequest(b) => {
                v.field("transaction_query_request", |v| b.validate(v))
            }
            MessageBody::TransactionView(b) => v.field("transaction_view", |v| b.validate(v)),
            MessageBody::Error(b) => v.field("error", |v| b.validate(v)),
            MessageBody::Cancel(b) => v.field("cancel", |v| b.validate(v)),
            MessageBody::Heartbeat(b) => v.field("heartbeat", |v| b.validate(v)),
            MessageBody::HeartbeatAck(b) => v.field("heartbeat_ack", |v| b.validate(v)),
            MessageBody::Escalation(b) => v.field("escalation", |v| b.validate(v)),
            MessageBody::EscalationResolution(b) => {
                v.field("escalation_resolution", |v| b.validate(v))
            }
            MessageBody::ManifestRequest(b) => v.field("manifest_request", |v| b.validate(v)),
            MessageBody::Manifest(b) => v.field("manifest", |v| b.validate(v)),
            MessageBody::EventStreamRequest(b) => {
                v.field("event_stream_request", |v| b.validate(v))
            }
            MessageBody::EventStream(b) => v.field("event_stream", |v| b.validate(v)),
            MessageBody::ChannelMessage(b) => v.field("channel_message", |v| b.validate(v)),
            MessageBody::Conversation(b) => v.field("conversation", |v| b.validate(v)),
            MessageBody::ReceiptChain(b) => v.field("receipt_chain", |v| b.validate(v)),
            MessageBody::ReceiptQueryRequest(b) => {
                v.field("receipt_query_request", |v| b.validate(v))
            }
            MessageBody::AuditEvent(b) => v.field("audit_event", |v| b.validate(v)),
            MessageBody::AuditQueryRequest(b) => v.field("audit_query_request", |v| b.validate(v)),
            MessageBody::AuditQueryResult(b) => v.field("audit_query_result", |v| b.validate(v)),
            MessageBody::ResourceListRequest(b) => {
                v.field("resource_list_request", |v| b.validate(v))
            }
            MessageBody::ResourceList(b) => v.field("resource_list", |v| b.validate(v)),
            MessageBody::ResourceReadRequest(b) => {
                v.field("resource_read_request", |v| b.validate(v))
            }
            MessageBody::ResourceReadResult(b) => {
                v.field("resource_read_result", |v| b.validate(v))
            }
            MessageBody::BatchSettlement(b) => v.field("batch_settlement", |v| b.validate(v)),
        }
    }
}

impl From<Handshake> for MessageBody {
    fn from(b: Handshake) -> Self {
        MessageBody::Handshake(b)
    }
}

impl From<HandshakeResponse> for MessageBody {
    fn from(b: HandshakeResponse) -> Self {
        MessageBody::HandshakeResponse(b)
    }
}

impl From<Action> for MessageBody {
    fn from(b: Action) -> Self {
        MessageBody::Action(b)
    }
}

impl From<Ack> for MessageBody {
    fn from(b: Ack) -> Self {
        MessageBody::Ack(b)
    }
}

impl From<StreamChunk> for MessageBody {
    fn from(b: StreamChunk) -> Self {
        MessageBody::StreamChunk(b)
    }
}

impl From<ActionResult> for MessageBody {
    fn from(b: ActionResult) -> Self {
        MessageBody::ActionResult(b)
    }
}

impl From<ActionStatusRequest> for MessageBody {
    fn from(b: ActionStatusRequest) -> Self {
        MessageBody::ActionStatusRequest(b)
    }
}

impl From<ActionStatus> for MessageBody {
    fn from(b: ActionStatus) -> Self {
        MessageBody::ActionStatus(b)
    }
}

impl From<ActionResultRequest> for MessageBody {
    fn from(b: ActionResultRequest) -> Self {
        MessageBody::ActionResultRequest(b)
    }
}

impl From<ActionListRequest> for MessageBody {
    fn from(b: ActionListRequest) -> Self {
        MessageBody::ActionListRequest(b)
    }
}

impl From<ActionList> for MessageBody {
    fn from(b: ActionList) -> Self {
        MessageBody::ActionList(b)
    }
}

impl From<ActionEventsRequest> for MessageBody {
    fn from(b: ActionEventsRequest) -> Self {
        MessageBody::ActionEventsRequest(b)
    }
}

impl From<ActionEvents> for MessageBody {
    fn from(b: ActionEvents) -> Self {
        MessageBody::ActionEvents(b)
    }
}

impl From<ApprovalRequest> for MessageBody {
    fn from(b: ApprovalRequest) -> Self {
        MessageBody::ApprovalRequest(b)
    }
}

impl From<ApprovalDecision> for MessageBody {
    fn from(b: ApprovalDecision) -> Self {
        MessageBody::ApprovalDecision(b)
    }
}

impl From<ApprovalQueryRequest> for MessageBody {
    fn from(b: ApprovalQueryRequest) -> Self {
        MessageBody::ApprovalQueryRequest(b)
    }
}

impl From<ApprovalListRequest> for MessageBody {
    fn from(b: ApprovalListRequest) -> Self {
        MessageBody::ApprovalListRequest(b)
    }
}

impl From<ApprovalRecordView> for MessageBody {
    fn from(b: ApprovalRecordView) -> Self {
        MessageBody::ApprovalRecordView(b)
    }
}

impl From<ApprovalList> for MessageBody {
    fn from(b: ApprovalList) -> Self {
        MessageBody::ApprovalList(b)
    }
}

impl From<CallbackDeliveryQueryRequest> for MessageBody {
    fn from(b: CallbackDeliveryQueryRequest) -> Self {
        MessageBody::CallbackDeliveryQueryRequest(b)
    }
}

impl From<CallbackDeliveryListRequest> for MessageBody {
    fn from(b: CallbackDeliveryListRequest) -> Self {
        MessageBody::CallbackDeliveryListRequest(b)
    }
}

impl From<CallbackDeliveryRecord> for MessageBody {
    fn from(b: CallbackDeliveryRecord) -> Self {
        MessageBody::CallbackDeliveryRecord(b)
    }
}

impl From<CallbackDeliveryList> for MessageBody {
    fn from(b: CallbackDeliveryList) -> Self {
        MessageBody::CallbackDeliveryList(b)
    }
}

impl From<SessionRequest> for MessageBody {
    fn from(b: SessionRequest) -> Self {
        MessageBody::SessionRequest(b)
    }
}

impl From<SessionView> for MessageBody {
    fn from(b: SessionView) -> Self {
        MessageBody::SessionView(b)
    }
}

impl From<SessionListRequest> for MessageBody {
    fn from(b: SessionListRequest) -> Self {
        MessageBody::SessionListRequest(b)
    }
}

impl From<SessionList> for MessageBody {
    fn from(b: SessionList) -> Self {
        MessageBody::SessionList(b)
    }
}

impl From<SessionCloseRequest> for MessageBody {
    fn from(b: SessionCloseRequest) -> Self {
        MessageBody::SessionCloseRequest(b)
    }
}

impl From<SessionResumeRequest> for MessageBody {
    fn from(b: SessionResumeRequest) -> Self {
        MessageBody::SessionResumeRequest(b)
    }
}

impl From<SessionResume> for MessageBody {
    fn from(b: SessionResume) -> Self {
        MessageBody::SessionResume(b)
    }
}

impl From<DelegationRequest> for MessageBody {
    fn from(b: DelegationRequest) -> Self {
        MessageBody::DelegationRequest(b)
    }
}

impl From<DelegationResult> for MessageBody {
    fn from(b: DelegationResult) -> Self {
        MessageBody::DelegationResult(b)
    }
}

impl From<TransactionRequest> for MessageBody {
    fn from(b: TransactionRequest) -> Self {
        MessageBody::TransactionRequest(b)
    }
}

impl From<TransactionResult> for MessageBody {
    fn from(b: TransactionResult) -> Self {
        MessageBody::TransactionResult(b)
    }
}

impl From<TransactionQueryRequest> for MessageBody {
    fn from(b: TransactionQueryRequest) -> Self {
        MessageBody::TransactionQueryRequest(b)
    }
}

impl From<TransactionView> for MessageBody {
    fn from(b: TransactionView) -> Self {
        MessageBody::TransactionView(b)
    }
}

impl From<ErrorBody> for MessageBody {
    fn from(b: ErrorBody) -> Self {
        MessageBody::Error(b)
    }
}

impl From<Cancel> for MessageBody {
    fn from(b: Cancel) -> Self {
        MessageBody::Cancel(b)
    }
}

impl From<Heartbeat> for MessageBody {
    fn from(b: Heartbeat) -> Self {
        MessageBody::Heartbeat(b)
    }
}

impl From<HeartbeatAck> for MessageBody {
    fn from(b: HeartbeatAck) -> Self {
        MessageBody::HeartbeatAck(b)
    }
}

impl From<Escalation> for MessageBody {
    fn from(b: Escalation) -> Self {
        MessageBody::Escalation(b)
    }
}

impl From<EscalationResolution> for MessageBody {
    fn from(b: EscalationResolution) -> Self {
        MessageBody::EscalationResolution(b)
    }
}

impl From<ManifestRequest> for MessageBody {
    fn from(b: ManifestRequest) -> Self {
        MessageBody::ManifestRequest(b)
    }
}

impl From<Manifest> for MessageBody {
    fn from(b: Manifest) -> Self {
        MessageBody::Manifest(b)
    }
}

impl From<EventStreamRequest> for MessageBody {
    fn from(b: EventStreamRequest) -> Self {
        MessageBody::EventStreamRequest(b)
    }
}

impl From<EventStream> for MessageBody {
    fn from(b: EventStream) -> Self {
        MessageBody::EventStream(b)
    }
}

impl From<ChannelMessage> for MessageBody {
    fn from(b: ChannelMessage) -> Self {
        MessageBody::ChannelMessage(b)
    }
}

impl From<ConversationUpdated> for MessageBody {
    fn from(b: ConversationUpdated) -> Self {
        MessageBody::Conversation(b)
    }
}

impl From<ReceiptChain> for MessageBody {
    fn from(b: ReceiptChain) -> Self {
        MessageBody::ReceiptChain(b)
    }
}

impl From<ReceiptQueryRequest> for MessageBody {
    fn from(b: ReceiptQueryRequest) -> Self {
        MessageBody::ReceiptQueryRequest(b)
    }
}

impl From<AuditEvent> for MessageBody {
    fn from(b: AuditEvent) -> Self {
        MessageBody::AuditEvent(b)
    }
}

impl From<AuditQueryRequest> for MessageBody {
    fn from(b: AuditQueryRequest) -> Self {
        MessageBody::AuditQueryRequest(b)
    }
}

impl From<AuditQueryResult> for MessageBody {
    fn from(b: AuditQueryResult) -> Self {
        MessageBody::AuditQueryResult(b)
    }
}

impl From<ResourceListRequest> for MessageBody {
    fn from(b: ResourceListRequest) -> Self {
        MessageBody::ResourceListRequest(b)
    }
}

impl From<ResourceList> for MessageBody {
    fn from(b: ResourceList) -> Self {
        MessageBody::ResourceList(b)
    }
}

impl From<ResourceReadRequest> for MessageBody {
    fn from(b: ResourceReadRequest) -> Self {
        MessageBody::ResourceReadRequest(b)
    }
}

impl From<ResourceReadResult> for MessageBody {
    fn from(b: ResourceReadResult) -> Self {
        MessageBody::ResourceReadResult(b)
    }
}

impl From<BatchSettlement> for MessageBody {
    fn from(b: BatchSettlement) -> Self {
        MessageBody::BatchSettlement(b)
    }
}
