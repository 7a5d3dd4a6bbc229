//! The transaction's part of admission (spec 13): the slot stored with the action, the link the
//! store checks against the transaction, and, for a step that claims the plan, its receipt and
//! reconciliation timer.

use aip_core::{ReceiptType, TransactionMode};
use aip_store::{StoreError, TransactionLink, TransactionRole};
use serde_json::{Value, json};

use crate::admission::draft::Draft;
use crate::error::RuntimeError;
use crate::transaction::{Checked, Slot};

/// The transaction checks' outcome, ready to store.
pub(crate) struct Prepared {
    /// The slot, typed, and as stored (the approval's policy hash covers these bytes; null when
    /// the action is not transactional).
    slot: Option<Slot>,
    pub(crate) stored: Value,
    /// The link the store checks (an unwritable one for a deferred refusal).
    pub(crate) link: Option<TransactionLink>,
    /// The refusal returned unless an earlier action answers the request.
    pub(crate) deferred: Option<RuntimeError>,
}

impl Prepared {
    /// Whether the step claims the plan: a store conflict then means another commit came first.
    pub(crate) fn commits(&self) -> bool {
        self.link
            .as_ref()
            .is_some_and(|l| l.role == TransactionRole::Commit)
    }
}

/// `checked`, ready to store.
pub(crate) fn prepare(checked: Checked) -> Result<Prepared, RuntimeError> {
    Ok(match checked {
        Checked::None => Prepared {
            slot: None,
            stored: Value::Null,
            link: None,
            deferred: None,
        },
        Checked::Admit(t) => Prepared {
            stored: serde_json::to_value(&t.slot).map_err(|e| {
                RuntimeError::Storage(StoreError::Corrupt(format!("transaction slot: {e}")))
            })?,
            slot: Some(t.slot),
            link: Some(t.link),
            deferred: None,
        },
        // Refused unless an earlier action answers: the unwritable link makes sure nothing new is
        // admitted.
        Checked::Refuse(err) => Prepared {
            slot: None,
            stored: Value::Null,
            link: Some(crate::transaction::unwritable_link()),
            deferred: Some(err),
        },
    })
}

/// Adds `prepared`'s slot to `draft`. The claim of a plan (or of a direct execution) is receipted
/// with the admission that makes it, and its reconciliation timer is queued with it (spec 13.6:
/// durable from the first moment).
pub(crate) fn contribute(draft: &mut Draft<'_>, prepared: &Prepared) {
    let Some(slot) = &prepared.slot else {
        return;
    };
    draft.admitted.transaction = Some(prepared.stored.clone());
    if !matches!(
        slot.mode,
        TransactionMode::Commit | TransactionMode::Execute
    ) {
        return;
    }
    let (tenant, now) = (&draft.caller.tenant, draft.now);
    if let Some(timer) = crate::transaction::reconcile::timer(
        draft.runtime,
        tenant,
        &draft.action_id,
        &slot.transaction_id,
        now,
    ) {
        draft.timers.push(timer);
    }
    draft.receipt(
        ReceiptType::TransactionCommitStarted,
        json!({ "transaction_id": slot.transaction_id, "mode": slot.mode.as_str(), "plan_id": slot.plan_id,
                "plan_hash": slot.plan_hash, "provider_operation": slot.operation }),
    );
}
