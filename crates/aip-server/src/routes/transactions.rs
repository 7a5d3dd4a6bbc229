//! Transaction routes (spec 13, 16): `GET /aip/v1/transactions/{id}`, `/by-plan/{plan_id}` and
//! `/by-action/{action_id}`, each the runtime's `transaction_query_request` read.

use super::PathId;
use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TransactionParams {
    tenant_id: Option<String>,
    #[serde(default)]
    include_result: bool,
    #[serde(default)]
    include_receipts: bool,
}

/// The selector a route names.
enum By {
    Id(String),
    Plan(String),
    Action(String),
}

async fn read(state: &AppState, caller: &Caller, by: By, p: TransactionParams) -> Response {
    let mut request = aip_core::TransactionQueryRequest {
        tenant_id: p.tenant_id,
        include_result: p.include_result,
        include_receipts: p.include_receipts,
        ..Default::default()
    };
    match by {
        By::Id(id) => request.transaction_id = Some(TransactionId::new(id)),
        By::Plan(id) => request.plan_id = Some(id),
        By::Action(id) => request.action_id = Some(ActionId::new(id)),
    }
    read_response(runtime(state).read_transaction(caller, &request).await)
}

/// `GET /aip/v1/transactions/{transaction_id}`.
pub(super) async fn transaction(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(id): PathId,
    ReadQuery(p): ReadQuery<TransactionParams>,
) -> Response {
    read(&state, &caller, By::Id(id), p).await
}

/// `GET /aip/v1/transactions/by-plan/{plan_id}`.
pub(super) async fn transaction_by_plan(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(id): PathId,
    ReadQuery(p): ReadQuery<TransactionParams>,
) -> Response {
    read(&state, &caller, By::Plan(id), p).await
}

/// `GET /aip/v1/transactions/by-action/{action_id}`.
pub(super) async fn transaction_by_action(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(id): PathId,
    ReadQuery(p): ReadQuery<TransactionParams>,
) -> Response {
    read(&state, &caller, By::Action(id), p).await
}
