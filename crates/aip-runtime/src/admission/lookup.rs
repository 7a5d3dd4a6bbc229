//! Step 3: manifest and handler lookup. A capability the caller may not invoke is invisible: it
//! answers exactly like one that does not exist (spec 9.2, 16.3).

use std::sync::Arc;

use aip_core::Action;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::registry::AdmittedCapability;
use crate::runtime::Runtime;

pub(crate) fn capability(
    runtime: &Runtime,
    caller: &Caller,
    action: &Action,
) -> Result<Arc<AdmittedCapability>, RuntimeError> {
    let id = action.capability_id.as_str();
    runtime
        .registry()
        .get(id)
        .filter(|_| caller.may_invoke(id))
        .cloned()
        .ok_or_else(|| RuntimeError::UnknownCapability(id.to_owned()))
}
