//! Who-am-I and resource routes (spec 9.7): the runtime's reads behind REST paths.

use super::PathId;
use super::*;

/// `GET /aip/v1/whoami`: the authenticated principal as the server's directory resolves it (id,
/// kind, tenant, scopes, roles, groups, tenant approval policies), so a client can ask for its own
/// approvals inbox.
pub(super) async fn whoami(
    Extension(caller): Extension<Caller>,
    ReadQuery(_): ReadQuery<NoParams>,
) -> Response {
    axum::Json(caller).into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResourceListParams {
    capability_id: Option<String>,
    kind: Option<String>,
    tenant_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u32>,
}

/// `GET /aip/v1/resources`: `resource_list_request` (spec 9.7).
pub(super) async fn resources(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ReadQuery(p): ReadQuery<ResourceListParams>,
) -> Response {
    let request = aip_core::ResourceListRequest {
        capability_id: p.capability_id.map(aip_core::CapabilityId::new),
        kind: p.kind,
        tenant_id: p.tenant_id,
        cursor: p.cursor,
        limit: p.limit,
    };
    read_response(runtime(&state).read_resources(&caller, &request).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ResourceParams {
    tenant_id: Option<String>,
    /// Comma-separated media types.
    accept: Option<String>,
}

/// `GET /aip/v1/resources/{id}`: `resource_read_request`.
pub(super) async fn resource(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(resource_id): PathId,
    ReadQuery(p): ReadQuery<ResourceParams>,
) -> Response {
    let request = aip_core::ResourceReadRequest {
        resource_id,
        tenant_id: p.tenant_id,
        version: None,
        accept: p
            .accept
            .map(|a| {
                a.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    };
    read_response(runtime(&state).read_resource(&caller, &request).await)
}
