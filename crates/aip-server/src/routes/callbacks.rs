//! Callback delivery routes (spec 16, 17): `GET /aip/v1/callbacks` (alias
//! `/aip/v1/callback-deliveries`) and `GET /aip/v1/callbacks/{delivery_id}`, the runtime's
//! `callback_delivery_list_request` and `callback_delivery_query_request` reads; and the operator's
//! `POST /aip/v1/callbacks/{delivery_id}/redrive`.

use super::PathId;
use aip_core::{CallbackDeliveryListRequest, CallbackDeliveryQueryRequest, CallbackDeliveryStatus};

use super::*;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListParams {
    action_id: Option<String>,
    status: Option<CallbackDeliveryStatus>,
    profile: Option<String>,
    target: Option<String>,
    tenant_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
    #[serde(default)]
    include_receipts: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OneParams {
    tenant_id: Option<String>,
    #[serde(default)]
    include_receipts: bool,
}

/// `GET /aip/v1/callbacks`.
pub(super) async fn deliveries(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<ListParams>,
) -> Response {
    let request = CallbackDeliveryListRequest {
        action_id: p.action_id.map(ActionId::new),
        status: p.status,
        profile: p.profile.map(aip_core::ProfileId::new),
        target: p.target,
        tenant_id: p.tenant_id,
        cursor: p.cursor,
        limit: p.limit,
        include_receipts: p.include_receipts,
    };
    if let Err(refused) = semantic(&request) {
        return refused.into_response();
    }
    read_response(
        runtime(&state)
            .read_callback_deliveries(&caller, &request)
            .await,
    )
}

/// `GET /aip/v1/callbacks/{delivery_id}`.
pub(super) async fn delivery(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(delivery_id): PathId,
    ReadQuery(p): ReadQuery<OneParams>,
) -> Response {
    let request = CallbackDeliveryQueryRequest {
        delivery_id,
        tenant_id: p.tenant_id,
        include_receipts: p.include_receipts,
    };
    read_response(
        runtime(&state)
            .read_callback_delivery(&caller, &request)
            .await,
    )
}

/// `POST /aip/v1/callbacks/{delivery_id}/redrive`: queues a failed or dead-lettered delivery
/// again, same delivery id (scope `callbacks:redrive`).
pub(super) async fn redrive(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(delivery_id): PathId,
) -> Response {
    accepted(
        runtime(&state)
            .redrive_callback_delivery(&caller, &delivery_id)
            .await,
    )
}
