//! Final results (spec 11.7): what a handler outcome settles to, and results the runtime writes
//! itself (uncertain outcomes, refusals before dispatch).

use aip_core::{ActionId, ActionResult, ActionResultStatus, ErrorCode, ProtocolError};
use aip_store::{ActionRecord, ActionState, StoreError};
use serde_json::json;

use crate::admission::input::truncate;
use crate::error::RuntimeError;
use crate::handler::{HandlerError, HandlerOutput};
use crate::registry::AdmittedCapability;

/// Longest message a result error carries.
const MAX_MESSAGE: usize = 300;

/// A handler outcome as the state and result to commit.
pub(crate) struct Settled {
    pub(crate) state: ActionState,
    pub(crate) result: ActionResult,
}

/// Message parts a completed result may carry.
const MAX_RESULT_PARTS: usize = 32;
/// Their largest serialized size (inline media included).
const MAX_RESULT_PARTS_BYTES: usize = 4 << 20;

/// A result of `status` with nothing else set.
pub(crate) fn bare(action_id: &str, status: ActionResultStatus) -> ActionResult {
    ActionResult {
        action_id: ActionId::new(action_id),
        status,
        output: None,
        message: Vec::new(),
        memory_update: None,
        usage: None,
        receipt: None,
        error: None,
    }
}

/// A failed result with `error`.
pub(crate) fn failed(action_id: &str, error: ProtocolError) -> ActionResult {
    let mut result = bare(action_id, ActionResultStatus::Failed);
    result.error = Some(error);
    result
}

/// A failed result with one of the runtime's own codes.
pub(crate) fn failed_with(action_id: &str, code: ErrorCode, message: &str) -> ActionResult {
    let mut error = code.error(message);
    error.retryable = Some(false);
    failed(action_id, error)
}

/// The provider may or may not have committed (spec 13.6, 19.3): never retried, never "cancelled".
pub(crate) fn uncertain(action_id: &str, message: &str) -> ActionResult {
    let mut error = ErrorCode::UncertainOutcome.error(message);
    error.retryable = Some(false);
    error.details = Some(json!({ "uncertain_outcome": true }));
    failed(action_id, error)
}

/// A cancelled result (cancellation confirmed).
pub(crate) fn cancelled(action_id: &str) -> ActionResult {
    bare(action_id, ActionResultStatus::Cancelled)
}

/// The state and result a handler outcome settles to. Output is checked against the output schema
/// before it may complete (spec 11.7); a handler's own code is checked and namespaced (spec 19.1).
pub(crate) fn settle(
    capability: &AdmittedCapability,
    action_id: &str,
    outcome: Result<HandlerOutput, HandlerError>,
    check_output: bool,
) -> Settled {
    match outcome {
        Ok(out) => {
            if check_output
                && let Some(schema) = &capability.output_schema
                && let Err(violations) = schema.validate(&out.output)
            {
                let mut text = format!(
                    "handler output does not match the output schema: {}",
                    violations.first().map_or("", |v| v.message.as_str())
                );
                truncate(&mut text, MAX_MESSAGE);
                return Settled {
                    state: ActionState::Failed,
                    result: failed_with(action_id, ErrorCode::OutputSchemaViolation, &text),
                };
            }
            if out.message.len() > MAX_RESULT_PARTS
                || serde_json::to_vec(&out.message).map_or(usize::MAX, |b| b.len())
                    > MAX_RESULT_PARTS_BYTES
            {
                return Settled {
                    state: ActionState::Failed,
                    result: failed_with(
                        action_id,
                        ErrorCode::OutputSchemaViolation,
                        &format!(
                            "the handler's result message exceeds {MAX_RESULT_PARTS} parts or {MAX_RESULT_PARTS_BYTES} bytes"
                        ),
                    ),
                };
            }
            let mut result = bare(action_id, ActionResultStatus::Completed);
            result.output = Some(out.output);
            result.message = out.message;
            Settled {
                state: ActionState::Completed,
                result,
            }
        }
        Err(HandlerError::Cancelled) => Settled {
            state: ActionState::Cancelled,
            result: cancelled(action_id),
        },
        Err(HandlerError::DeadlineExceeded) => Settled {
            state: ActionState::Expired,
            result: failed_with(
                action_id,
                ErrorCode::DeadlineExceeded,
                "the action deadline passed",
            ),
        },
        Err(HandlerError::Failed {
            code,
            message,
            retryable,
        }) => {
            let mut message = message;
            truncate(&mut message, MAX_MESSAGE);
            Settled {
                state: ActionState::Failed,
                result: failed(action_id, handler_error(&code, message, retryable)),
            }
        }
        Err(HandlerError::UncertainOutcome(message)) => Settled {
            state: ActionState::Failed,
            result: uncertain(action_id, &message),
        },
    }
}

/// A handler's failure as a wire error: its code kept when it is one of the runtime's own or a
/// namespaced connector code, otherwise replaced by `aip.connector.invalid_code` with the original
/// (bounded) in `details`, so a result never carries an empty or bare upstream string (spec 19.1).
fn handler_error(code: &str, message: String, retryable: bool) -> ProtocolError {
    let known = ErrorCode::parse(code);
    let mut error = match known {
        Some(known) => known.error(message),
        None if aip_core::is_namespaced_code(code) && !code.starts_with("aip.") => {
            ProtocolError::new(code, aip_core::ErrorCategory::Connector, message)
        }
        None => {
            let mut reported = code.to_owned();
            truncate(&mut reported, 128);
            let mut error = ErrorCode::ConnectorInvalidCode.error(message);
            error.details = Some(json!({ "reported_code": reported }));
            error
        }
    };
    error.retryable = Some(retryable);
    error
}

/// The stored final result of an action record, if it has one. A stored result that does not
/// decode is corruption, never a missing result.
pub(crate) fn stored(record: &ActionRecord) -> Result<Option<ActionResult>, RuntimeError> {
    record
        .result
        .as_ref()
        .map(|v| {
            serde_json::from_value(v.clone()).map_err(|e| {
                RuntimeError::Storage(StoreError::Corrupt(format!(
                    "stored result of {}: {e}",
                    record.action_id
                )))
            })
        })
        .transpose()
}

/// The wire spelling of a result status.
pub(crate) fn status_str(status: ActionResultStatus) -> &'static str {
    match status {
        ActionResultStatus::Completed => "completed",
        ActionResultStatus::Failed => "failed",
        ActionResultStatus::Cancelled => "cancelled",
        ActionResultStatus::PendingApproval => "pending_approval",
        ActionResultStatus::RequiresHuman => "requires_human",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connector_code_is_kept_only_when_it_is_namespaced_and_not_under_aip() {
        let kept = handler_error("stripe.card_declined", "no".into(), false);
        assert_eq!(kept.code, "stripe.card_declined");
        assert_eq!(kept.category, aip_core::ErrorCategory::Connector);
        let ours = handler_error("aip.connector.unreachable", "x".into(), true);
        assert_eq!(ours.code, "aip.connector.unreachable");
        for bad in ["", "timeout", "aip.made.up", "Bad.Code"] {
            let e = handler_error(bad, "m".into(), false);
            assert_eq!(e.code, "aip.connector.invalid_code", "{bad:?}");
            assert_eq!(e.details.unwrap()["reported_code"], bad);
        }
    }
}
