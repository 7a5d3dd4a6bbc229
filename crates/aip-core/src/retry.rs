//! Error categories as data (spec 19.1) and the retry decision rule (spec 19.2).

use serde_json::json;

use crate::{ErrorCategory, ExecutionContract, IdempotencyRequirement, ProtocolError, RetrySafety};

impl ErrorCategory {
    /// The native HTTP status of the category (19.1 table).
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCategory::Temporary => 503,
            ErrorCategory::Permanent => 400,
            ErrorCategory::Auth => 401,
            ErrorCategory::Policy => 403,
            ErrorCategory::Economic => 402,
            ErrorCategory::Connector => 502,
            ErrorCategory::Transport => 503,
        }
    }

    /// The category's meaning, from the 19.1 table.
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorCategory::Temporary => "Potentially recoverable failure",
            ErrorCategory::Permanent => "Request cannot succeed unchanged",
            ErrorCategory::Auth => "Authentication or authorization failure",
            ErrorCategory::Policy => "Authenticated request denied by policy",
            ErrorCategory::Economic => "Billing or settlement failure",
            ErrorCategory::Connector => "External integration failure",
            ErrorCategory::Transport => "Delivery-path failure",
        }
    }
}

impl ProtocolError {
    /// A protocol error with a stable code (19.1); `retryable` is left unset (meaning "no").
    pub fn new(
        code: impl Into<String>,
        category: ErrorCategory,
        message: impl Into<String>,
    ) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            category,
            retryable: None,
            retry_after_ms: None,
            details: None,
            source: None,
        }
    }

    /// Adds `details.pointer` (the JSON pointer of the offending member).
    #[must_use]
    pub fn with_pointer(mut self, pointer: &str) -> Self {
        match &mut self.details {
            Some(serde_json::Value::Object(m)) => {
                m.insert("pointer".into(), json!(pointer));
            }
            _ => self.details = Some(json!({ "pointer": pointer })),
        }
        self
    }

    /// Marks the error retryable with an optional delay.
    #[must_use]
    pub fn retryable_after(mut self, retry_after_ms: Option<u64>) -> Self {
        self.retryable = Some(true);
        self.retry_after_ms = retry_after_ms;
        self
    }

    /// The native HTTP status of this error's category.
    pub fn http_status(&self) -> u16 {
        self.category.http_status()
    }

    /// `details.pointer`, when present.
    pub fn pointer(&self) -> Option<&str> {
        self.details.as_ref()?.get("pointer")?.as_str()
    }

    /// `details.uncertain_outcome` (19.3): the provider may have committed.
    pub fn uncertain_outcome(&self) -> bool {
        self.details
            .as_ref()
            .and_then(|d| d.get("uncertain_outcome"))
            .and_then(|u| u.as_bool())
            .unwrap_or(false)
    }
}

/// Everything the 19.2 rule looks at for one failed attempt.
#[derive(Debug, Clone)]
pub struct RetryInput<'a> {
    /// The error of the failed attempt.
    pub error: &'a ProtocolError,
    /// The capability's execution contract, when declared (9.6).
    pub execution: Option<&'a ExecutionContract>,
    /// The capability's idempotency requirement, when declared (9.5).
    pub idempotency: Option<IdempotencyRequirement>,
    /// Whether the action carries an idempotency key.
    pub has_idempotency_key: bool,
    /// Whether the deadline still leaves time for another attempt.
    pub deadline_valid: bool,
    /// Whether policy and approval remain valid.
    pub policy_and_approval_valid: bool,
    /// Whether a provider outcome is unresolved (13.6 `outcome_unknown`).
    pub unresolved_outcome: bool,
    /// Attempts made so far (1 after the first failure).
    pub attempts: u32,
    /// Maximum attempts allowed by policy.
    pub max_attempts: u32,
    /// Base delay of the exponential backoff.
    pub base_backoff_ms: u64,
    /// Ceiling of the backoff.
    pub max_backoff_ms: u64,
}

/// Why a retry is not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryBlocker {
    /// The error does not say `retryable: true` (a category alone never permits retry).
    ErrorForbids,
    /// The capability contract does not support retry or is not retry-safe.
    ContractForbids,
    /// Retry needs an idempotency key that the action lacks.
    MissingIdempotencyKey,
    /// The deadline has passed.
    DeadlineExpired,
    /// Policy or approval no longer holds.
    PolicyOrApprovalInvalid,
    /// The provider outcome is unresolved; reconcile instead (13.6).
    UnresolvedOutcome,
    /// The attempt budget is spent.
    AttemptsExhausted,
}

/// The 19.2 decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// Retry after waiting at least this long.
    RetryAfter {
        /// Delay in milliseconds: the larger of the error's `retry_after_ms` and the bounded backoff.
        delay_ms: u64,
    },
    /// Do not retry.
    DoNotRetry(RetryBlocker),
}

/// Applies spec 19.2: retry only when the error and contract permit it, required idempotency is
/// present, deadline/policy/approval hold, no provider outcome is unresolved, and the delay is
/// observed. A `temporary` or `transport` category alone is never enough.
pub fn decide_retry(input: &RetryInput<'_>) -> RetryDecision {
    use RetryDecision::DoNotRetry;
    if input.unresolved_outcome || input.error.uncertain_outcome() {
        return DoNotRetry(RetryBlocker::UnresolvedOutcome);
    }
    if input.error.retryable != Some(true) {
        return DoNotRetry(RetryBlocker::ErrorForbids);
    }
    let Some(exec) = input.execution else {
        return DoNotRetry(RetryBlocker::ContractForbids);
    };
    if !exec.supports_retry
        || matches!(
            exec.retry_safety,
            RetrySafety::Unsafe | RetrySafety::Unknown
        )
    {
        return DoNotRetry(RetryBlocker::ContractForbids);
    }
    let key_needed = exec.retry_safety == RetrySafety::SafeWithIdempotencyKey
        || input.idempotency == Some(IdempotencyRequirement::Required);
    if key_needed && !input.has_idempotency_key {
        return DoNotRetry(RetryBlocker::MissingIdempotencyKey);
    }
    if !input.deadline_valid {
        return DoNotRetry(RetryBlocker::DeadlineExpired);
    }
    if !input.policy_and_approval_valid {
        return DoNotRetry(RetryBlocker::PolicyOrApprovalInvalid);
    }
    if input.attempts >= input.max_attempts {
        return DoNotRetry(RetryBlocker::AttemptsExhausted);
    }
    let exp = input.attempts.saturating_sub(1).min(32);
    let backoff = input
        .base_backoff_ms
        .saturating_mul(1u64 << exp)
        .min(input.max_backoff_ms);
    RetryDecision::RetryAfter {
        delay_ms: backoff.max(input.error.retry_after_ms.unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExpectedCompletionMode;

    fn exec(safety: RetrySafety) -> ExecutionContract {
        ExecutionContract {
            supports_sync: true,
            supports_async: false,
            supports_streaming: false,
            supports_cancel: false,
            supports_retry: true,
            expected_completion: ExpectedCompletionMode::Sync,
            retry_safety: safety,
        }
    }

    fn input<'a>(error: &'a ProtocolError, execution: &'a ExecutionContract) -> RetryInput<'a> {
        RetryInput {
            error,
            execution: Some(execution),
            idempotency: None,
            has_idempotency_key: false,
            deadline_valid: true,
            policy_and_approval_valid: true,
            unresolved_outcome: false,
            attempts: 1,
            max_attempts: 5,
            base_backoff_ms: 100,
            max_backoff_ms: 1_000,
        }
    }

    #[test]
    fn a_temporary_category_alone_never_permits_retry() {
        let e = ProtocolError::new("x.busy", ErrorCategory::Temporary, "busy");
        let ex = exec(RetrySafety::Safe);
        assert_eq!(
            decide_retry(&input(&e, &ex)),
            RetryDecision::DoNotRetry(RetryBlocker::ErrorForbids)
        );
    }

    #[test]
    fn a_retryable_error_on_a_safe_contract_waits_for_the_larger_delay() {
        let e = ProtocolError::new("x.busy", ErrorCategory::Transport, "busy")
            .retryable_after(Some(250));
        let ex = exec(RetrySafety::Safe);
        let mut i = input(&e, &ex);
        assert_eq!(
            decide_retry(&i),
            RetryDecision::RetryAfter { delay_ms: 250 }
        );
        i.attempts = 4;
        assert_eq!(
            decide_retry(&i),
            RetryDecision::RetryAfter { delay_ms: 800 }
        );
        i.attempts = 5;
        assert_eq!(
            decide_retry(&i),
            RetryDecision::DoNotRetry(RetryBlocker::AttemptsExhausted)
        );
    }

    #[test]
    fn retry_is_blocked_by_each_condition_of_19_2() {
        let e =
            ProtocolError::new("x.busy", ErrorCategory::Temporary, "busy").retryable_after(None);
        let keyed = exec(RetrySafety::SafeWithIdempotencyKey);
        assert_eq!(
            decide_retry(&input(&e, &keyed)),
            RetryDecision::DoNotRetry(RetryBlocker::MissingIdempotencyKey)
        );
        let unsafe_ = exec(RetrySafety::Unsafe);
        assert_eq!(
            decide_retry(&input(&e, &unsafe_)),
            RetryDecision::DoNotRetry(RetryBlocker::ContractForbids)
        );
        let safe = exec(RetrySafety::Safe);
        let mut i = input(&e, &safe);
        i.deadline_valid = false;
        assert_eq!(
            decide_retry(&i),
            RetryDecision::DoNotRetry(RetryBlocker::DeadlineExpired)
        );
        let mut i = input(&e, &safe);
        i.policy_and_approval_valid = false;
        assert_eq!(
            decide_retry(&i),
            RetryDecision::DoNotRetry(RetryBlocker::PolicyOrApprovalInvalid)
        );
        let mut i = input(&e, &safe);
        i.unresolved_outcome = true;
        assert_eq!(
            decide_retry(&i),
            RetryDecision::DoNotRetry(RetryBlocker::UnresolvedOutcome)
        );
        let uncertain = e.clone().with_pointer("").retryable_after(None);
        let mut u = uncertain;
        u.details = Some(json!({"uncertain_outcome": true}));
        assert_eq!(
            decide_retry(&input(&u, &safe)),
            RetryDecision::DoNotRetry(RetryBlocker::UnresolvedOutcome)
        );
        let mut i = input(&e, &safe);
        i.execution = None;
        assert_eq!(
            decide_retry(&i),
            RetryDecision::DoNotRetry(RetryBlocker::ContractForbids)
        );
    }

    #[test]
    fn categories_map_to_the_19_1_http_statuses() {
        let got: Vec<u16> = ErrorCategory::ALL.iter().map(|c| c.http_status()).collect();
        assert_eq!(got, [503, 400, 401, 403, 402, 502, 503]);
    }
}
