//! Settlement routes (spec 18.4): close a batch, read one (the signed envelope and its receipt
//! chain). The `aip.economic.v1.batch_settlement` envelope closes batches on every transport too.

use super::PathId;
use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CloseBody {
    id: String,
    #[serde(default)]
    model: Option<String>,
}

/// `POST /aip/v1/settlements` `{"id", "model"?}`: closes the batch (the same id again reads it).
pub(super) async fn close_settlement(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Response {
    let body = match optional_json::<CloseBody>(&body) {
        Ok(Some(b)) => b,
        Ok(None) => {
            return invalid_body("body must be {\"id\": \"<batch id>\", \"model\"?: \"per_call\"}")
                .into_response();
        }
        Err(err) => return err.into_response(),
    };
    let request = aip_core::BatchSettlement {
        id: body.id,
        model: body
            .model
            .unwrap_or_else(|| aip_runtime::settlement::MODEL_PER_CALL.into()),
        records: Vec::new(),
    };
    read_response(runtime(&state).close_settlement(&caller, &request).await)
}

/// `GET /aip/v1/settlements/{id}`: a recorded batch with its receipt chain.
pub(super) async fn settlement(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    PathId(batch_id): PathId,
    ReadQuery(_): ReadQuery<NoParams>,
) -> Response {
    read_response(runtime(&state).read_settlement(&caller, &batch_id).await)
}
