//! The native HTTP status of a reply (spec 19.1, 20.1): the category's status from the 19.1 table,
//! refined only where the HTTP binding has a more specific status of the same class.

use aip_core::{ErrorCode, LimitKind};
use aip_runtime::{Outcome, Reply, RuntimeError};
use axum::http::StatusCode;

/// The HTTP status of a reply.
pub fn of_reply(reply: &Reply) -> StatusCode {
    match reply.outcome {
        Outcome::Done => StatusCode::OK,
        Outcome::Accepted => StatusCode::ACCEPTED,
        Outcome::Refused(code) => of_code(code),
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The HTTP status of a runtime error.
pub fn of_error(err: &RuntimeError) -> StatusCode {
    of_code(err.code())
}

/// The HTTP status of a wire error code.
pub fn of_code(code: ErrorCode) -> StatusCode {
    let specific = match code {
        // Hidden and missing objects look the same (spec 16.3).
        ErrorCode::NotFound => Some(StatusCode::NOT_FOUND),
        ErrorCode::IdempotencyConflict
        | ErrorCode::DuplicateActionId
        | ErrorCode::Terminal
        | ErrorCode::ApprovalClosed
        | ErrorCode::DecisionConflict
        | ErrorCode::EscalationClosed
        | ErrorCode::EscalationConflict
        | ErrorCode::PlanClaimed
        | ErrorCode::CallbackNotRedrivable
        | ErrorCode::TransactionConflict => Some(StatusCode::CONFLICT),
        // Authenticated, but not as the approver (or principal) it claims to be.
        ErrorCode::ApproverMismatch | ErrorCode::PrincipalMismatch => Some(StatusCode::FORBIDDEN),
        ErrorCode::Limit(LimitKind::EnvelopeBytes) => Some(StatusCode::PAYLOAD_TOO_LARGE),
        ErrorCode::UnsupportedMediaType => Some(StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ErrorCode::RateLimited | ErrorCode::QuotaExceeded => Some(StatusCode::TOO_MANY_REQUESTS),
        // The gateway gave up waiting for its own answer.
        ErrorCode::RequestTimeout => Some(StatusCode::GATEWAY_TIMEOUT),
        // What the cursor pointed at is gone for good.
        ErrorCode::CursorExpired | ErrorCode::Purged => Some(StatusCode::GONE),
        _ => None,
    };
    specific.unwrap_or_else(|| {
        StatusCode::from_u16(code.category().http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_keeps_the_status_class_of_its_category() {
        for code in ErrorCode::all() {
            let category = code.category().http_status();
            let status = of_code(code).as_u16();
            assert_eq!(
                status / 100,
                category / 100,
                "{code}: {status} vs {category}"
            );
        }
    }
}
