//! Step 5: identity, tenant and scopes come from the authenticated caller (trusted configuration)
//! only (spec 22.5-22.6). A named session must be the caller's own open session.

use crate::admission::ActionRequest;
use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

pub(crate) async fn check(
    runtime: &Runtime,
    caller: &Caller,
    request: &ActionRequest,
) -> Result<(), RuntimeError> {
    if let Some(session_id) = &request.session_id {
        let vouched = request
            .checked
            .as_ref()
            .is_some_and(|c| c.admits(caller, session_id));
        if !vouched {
            runtime.check_session_open(caller, session_id).await?;
        }
    }
    Ok(())
}
