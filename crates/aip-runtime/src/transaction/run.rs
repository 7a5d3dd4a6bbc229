//! Running one transactional step (spec 13): what the handler is asked, and what the step's action
//! output records. A dry run at `schema_only` or `policy_and_schema` fidelity is answered by the
//! runtime itself (schema and policy were checked at admission) and never reaches the handler, so
//! it cannot commit anything; stronger fidelities ask the handler, whose contract forbids
//! committing (13.2). A reconciliation asks the handler about the recorded operation (13.6).

use aip_core::{DryRunFidelity, TransactionMode};
use serde_json::{Value, json};

use crate::handler::{HandlerError, HandlerOutput, Reconciliation, TrustedContext};
use crate::registry::AdmittedCapability;
use crate::transaction::Slot;

/// Runs the step `slot` describes (or, for a plain action, the handler).
pub(crate) async fn step(
    capability: &AdmittedCapability,
    ctx: &TrustedContext,
    input: &Value,
    slot: Option<&Slot>,
) -> Result<HandlerOutput, HandlerError> {
    let Some(slot) = slot else {
        return capability.handler.invoke(ctx, input).await;
    };
    match slot.mode {
        TransactionMode::DryRun => {
            let fidelity = slot.fidelity.unwrap_or(DryRunFidelity::SchemaOnly);
            let simulation = if fidelity <= DryRunFidelity::PolicyAndSchema {
                json!({ "valid": true })
            } else {
                capability.handler.invoke(ctx, input).await?.output
            };
            Ok(HandlerOutput {
                output: json!({
                    "transaction_id": slot.transaction_id,
                    "dry_run": true,
                    "fidelity": fidelity.as_str(),
                    "committed": false,
                    "simulation": simulation,
                }),
                message: Vec::new(),
            })
        }
        TransactionMode::Plan => {
            let quote = capability.handler.invoke(ctx, input).await?.output;
            Ok(HandlerOutput {
                output: json!({
                    "transaction_id": slot.transaction_id,
                    "plan_id": slot.plan_id,
                    "plan": slot.plan,
                    "quote": quote,
                }),
                message: Vec::new(),
            })
        }
        TransactionMode::Reconcile => {
            let Some(operation) = slot.operation.as_ref() else {
                return Err(HandlerError::Failed {
                    code: aip_core::ErrorCode::NotReconcilable.as_str().into(),
                    message: "no provider operation is recorded".into(),
                    retryable: false,
                });
            };
            let found = capability.handler.reconcile(ctx, operation).await?;
            let output = match found {
                Reconciliation::Committed { output } => {
                    json!({ "outcome": "committed", "provider_operation": operation, "output": output })
                }
                Reconciliation::NotCommitted => {
                    json!({ "outcome": "not_committed", "provider_operation": operation })
                }
                Reconciliation::Pending {
                    retry_after_ms,
                    cursor,
                } => {
                    let after = crate::clock::now_ms()
                        .saturating_add(i64::try_from(retry_after_ms).unwrap_or(i64::MAX));
                    json!({ "outcome": "pending", "provider_operation": operation, "reconcile_after_ms": after, "cursor": cursor })
                }
            };
            Ok(HandlerOutput {
                output,
                message: Vec::new(),
            })
        }
        TransactionMode::Execute
        | TransactionMode::Commit
        | TransactionMode::Compensate
        | TransactionMode::RollbackNotSupported => capability.handler.invoke(ctx, input).await,
    }
}
