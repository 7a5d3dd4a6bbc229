//! Approval's part of admission (spec 12.1): the policy decision's receipt and, when the policy
//! requires approval, the approval request the action waits for.

use aip_core::ReceiptType;
use aip_store::NewApproval;
use serde_json::{Value, json};

use crate::admission::draft::Draft;
use crate::admission::policy::PolicyDecision;
use crate::error::RuntimeError;
use crate::registry::AdmittedCapability;

/// Records `decision` on `draft`; returns the approval to create with the action, if one gates it.
/// `transaction` is the stored transaction slot, which the approval's policy hash covers.
pub(crate) fn contribute(
    draft: &mut Draft<'_>,
    capability: &AdmittedCapability,
    decision: PolicyDecision,
    input_hash: &str,
    transaction: &Value,
) -> Result<Option<NewApproval>, RuntimeError> {
    let caller = draft.caller;
    match decision {
        PolicyDecision::Allow { basis } => {
            draft.receipt(
                ReceiptType::PolicyDecision,
                json!({ "decision": "allow", "basis": basis, "principal": caller.id, "tenant": caller.tenant }),
            );
            Ok(None)
        }
        PolicyDecision::RequireApproval {
            policy,
            excluded_roles,
        } => {
            let approval = crate::approval::request_for(
                caller,
                capability,
                &draft.action_id,
                input_hash,
                (*policy, excluded_roles),
                transaction,
                draft.now,
            )?;
            draft.receipt(
                ReceiptType::PolicyDecision,
                json!({ "decision": "approval_required", "approval_id": approval.approval_id, "policy_hash": approval.policy_hash, "principal": caller.id, "tenant": caller.tenant }),
            );
            draft.receipt(
                ReceiptType::ApprovalRequested,
                json!({ "approval_id": approval.approval_id, "policy_hash": approval.policy_hash, "expires_at_ms": approval.expires_at_ms }),
            );
            draft.admitted.approval_id = Some(approval.approval_id.clone());
            Ok(Some(approval))
        }
    }
}
