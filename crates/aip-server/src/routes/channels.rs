//! Conversation routes (spec 15): the runtime's principal-scoped conversation reads behind REST
//! paths. Connectors record messages and updates with envelopes on `POST /aip/v1/messages`.

use super::PathId;
use aip_core::ConversationStatus;
use aip_runtime::channel::ConversationFilter;

use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConversationListParams {
    status: Option<ConversationStatus>,
    assignee: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

/// `GET /aip/v1/conversations`: the conversations the reader may see.
pub(super) async fn conversations(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<ConversationListParams>,
) -> Response {
    let filter = ConversationFilter {
        status: p.status,
        assignee: p.assignee,
    };
    read_response(
        runtime(&state)
            .list_conversations(&caller, &filter, p.cursor.as_deref(), p.limit)
            .await,
    )
}

/// `GET /aip/v1/conversations/{id}`: one conversation (404 when hidden, as when unknown).
pub(super) async fn conversation(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(conversation_id): PathId,
    ReadQuery(_): ReadQuery<NoParams>,
) -> Response {
    read_response(
        runtime(&state)
            .read_conversation(&caller, &conversation_id)
            .await,
    )
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MessageListParams {
    cursor: Option<String>,
    limit: Option<u32>,
}

/// `GET /aip/v1/conversations/{id}/messages`: its messages, oldest first.
pub(super) async fn conversation_messages(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(conversation_id): PathId,
    ReadQuery(p): ReadQuery<MessageListParams>,
) -> Response {
    read_response(
        runtime(&state)
            .conversation_messages(&caller, &conversation_id, p.cursor.as_deref(), p.limit)
            .await,
    )
}
