//! The `http` handler: a capability implemented by any HTTP service (spec 9.2).
//!
//! The runtime POSTs `{"action": {...}, "context": <frozen trusted context>}` as JSON to the configured
//! URL. The service answers 2xx with `{"output": ...}` or `{"error": {"code", "message", "retryable"}}`.
//! `https://` URLs are verified with rustls against the system's root store plus an optional PEM bundle
//! of private CAs (spec 22.4); `http://` stays available for a protected local boundary.
//! A mutation whose outcome is unknown (timeout or broken connection after the request was sent, or a
//! 5xx answer) is reported as an uncertain outcome and is never retried silently (spec 13.6, 19.3).
//! A capability with a transaction contract gets `context.transaction` (mode, the plan on commit,
//! the provider operation to commit under) and, with a `reconcile_url`, answers reconciliations. An
//! answer may carry `provider_operation` (the service's own reference), with any outcome.

use std::collections::BTreeSet;
use std::time::Duration;

use aip_core::ErrorCode;
use async_trait::async_trait;
use serde_json::{Value, json};

use super::{ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, TrustedContext};

/// Largest response body accepted from a handler service.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// Configuration of one HTTP-backed capability.
#[derive(Debug, Clone)]
pub struct HttpHandlerConfig {
    /// Where to POST the action.
    pub url: String,
    /// Upper bound of one call; the action deadline shortens it further.
    pub timeout: Duration,
    /// Whether the call performs a side effect (changes timeout semantics to "uncertain").
    pub mutation: bool,
    /// Modes the service supports.
    pub modes: BTreeSet<Mode>,
    /// PEM certificates of private CAs trusted for this URL, beside the system's roots.
    pub extra_roots_pem: Option<Vec<u8>>,
    /// The transaction modes the service executes (spec 13), from the capability's transaction
    /// contract; each call then carries `context.transaction` (mode, plan, provider operation).
    pub transactions: Option<super::TransactionSupport>,
    /// Where to ask about an operation whose outcome is unknown (spec 13.6): POSTed
    /// `{"operation": ..., "context": ...}`, it answers `{"outcome": "committed", "output": ...}`,
    /// `{"outcome": "not_committed"}` or `{"outcome": "pending", "retry_after_ms": n}`.
    pub reconcile_url: Option<String>,
}

/// Calls a configured URL for each action.
#[derive(Debug, Clone)]
pub struct HttpHandler {
    config: HttpHandlerConfig,
    client: reqwest::Client,
}

/// Why an HTTP handler could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpHandlerBuildError {
    /// The URL is not an absolute http or https URL.
    #[error("handler url must start with https:// or http://: {0}")]
    BadUrl(String),
    /// The private CA bundle holds no usable PEM certificate.
    #[error("handler CA bundle: {0}")]
    BadCa(String),
    /// The HTTP client could not be built.
    #[error("http client: {0}")]
    Client(#[from] reqwest::Error),
}

/// An HTTP client for calls across the trust boundary: TLS 1.2+ (rustls), certificates chaining to
/// the system roots or to the PEM bundle `extra_roots`, redirects never followed.
pub fn trusting_client(
    extra_roots: Option<&[u8]>,
) -> Result<reqwest::Client, HttpHandlerBuildError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .use_rustls_tls()
        .min_tls_version(reqwest::tls::Version::TLS_1_2);
    if let Some(pem) = extra_roots {
        let roots = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| HttpHandlerBuildError::BadCa(e.to_string()))?;
        if roots.is_empty() {
            return Err(HttpHandlerBuildError::BadCa(
                "no PEM certificate found".into(),
            ));
        }
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
    }
    Ok(builder.build()?)
}

impl HttpHandler {
    /// Build a handler; redirects are never followed (a redirect could leave the trust boundary).
    pub fn new(config: HttpHandlerConfig) -> Result<Self, HttpHandlerBuildError> {
        for url in std::iter::once(&config.url).chain(config.reconcile_url.as_ref()) {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(HttpHandlerBuildError::BadUrl(url.clone()));
            }
        }
        let client = trusting_client(config.extra_roots_pem.as_deref())?;
        Ok(Self { config, client })
    }

    async fn call(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        // The lease's fencing token grows with every claim of the action's job: a service that
        // keeps the highest token it saw per operation can refuse a superseded worker (spec 13.4).
        let body = json!({
            "action": { "id": ctx.action_id, "capability_id": ctx.capability_id, "input": input },
            "context": ctx,
            "fencing_token": ctx.fence.as_ref().map(|f| f.token),
        });
        let value = self.post(&self.config.url, ctx, &body).await?;
        // The service may name its own reference for the operation, with any outcome.
        if let Some(reported) = value.get("provider_operation").filter(|v| !v.is_null()) {
            match serde_json::from_value::<aip_core::ProviderOperationRef>(reported.clone()) {
                Ok(op) if op.provider.len() <= 256 && op.operation_id.len() <= 256 => {
                    ctx.provider_operation.report(op);
                }
                _ => {
                    return Err(self
                        .bad_response(ctx, "handler response has a malformed provider_operation"));
                }
            }
        }
        if let Some(error) = value.get("error") {
            return Err(HandlerError::Failed {
                code: error
                    .get("code")
                    .and_then(Value::as_str)
                    .unwrap_or(ErrorCode::ConnectorFailed.as_str())
                    .to_owned(),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("handler failed")
                    .to_owned(),
                retryable: error
                    .get("retryable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            });
        }
        match value.get("output") {
            Some(output) => Ok(HandlerOutput {
                output: output.clone(),
                message: Vec::new(),
            }),
            None => {
                Err(self.bad_response(ctx, "handler response has neither `output` nor `error`"))
            }
        }
    }

    /// POSTs `body` to `url` within the call's timeout; the JSON answer of a 2xx.
    async fn post(
        &self,
        url: &str,
        ctx: &TrustedContext,
        body: &Value,
    ) -> Result<Value, HandlerError> {
        let timeout = self.config.timeout.min(ctx.remaining());
        let sent = self
            .client
            .post(url)
            .timeout(timeout)
            .json(body)
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(err) => return Err(self.transport_failure(ctx, &err)),
        };
        let status = response.status();
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                        return Err(
                            self.bad_response(ctx, "handler response exceeds the size limit")
                        );
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(err) => return Err(self.transport_failure(ctx, &err)),
            }
        }
        if status.is_server_error() {
            return Err(
                self.bad_response(ctx, &format!("handler answered HTTP {}", status.as_u16()))
            );
        }
        if !status.is_success() {
            return Err(HandlerError::Failed {
                code: ErrorCode::ConnectorHttpStatus.as_str().into(),
                message: format!("handler answered HTTP {}", status.as_u16()),
                retryable: false,
            });
        }
        serde_json::from_slice(&bytes)
            .map_err(|_| self.bad_response(ctx, "handler response is not JSON"))
    }

    /// Whether this call may commit the service's side effect: a mutating service, unless the
    /// action is a dry run, a plan or a reconciliation (which commit nothing, spec 13.2).
    fn mutating(&self, ctx: &TrustedContext) -> bool {
        use aip_core::TransactionMode as M;
        self.config.mutation
            && ctx
                .transaction
                .as_ref()
                .is_none_or(|t| !matches!(t.mode, M::DryRun | M::Plan | M::Reconcile))
    }

    /// A failure after the request may have reached the service: uncertain for a mutation, never a
    /// failure to retry (spec 13.6, 19.3).
    fn transport_failure(&self, ctx: &TrustedContext, err: &reqwest::Error) -> HandlerError {
        if err.is_connect() {
            // Nothing was sent: a definite, retryable failure even for a mutation.
            return HandlerError::Failed {
                code: ErrorCode::ConnectorUnreachable.as_str().into(),
                message: "handler service unreachable".into(),
                retryable: true,
            };
        }
        if err.is_timeout() && !self.mutating(ctx) {
            return HandlerError::DeadlineExceeded;
        }
        self.bad_response(
            ctx,
            if err.is_timeout() {
                "handler call timed out"
            } else {
                "handler connection failed"
            },
        )
    }

    fn bad_response(&self, ctx: &TrustedContext, message: &str) -> HandlerError {
        if self.mutating(ctx) {
            HandlerError::UncertainOutcome(message.to_owned())
        } else {
            HandlerError::Failed {
                code: ErrorCode::ConnectorFailed.as_str().into(),
                message: message.to_owned(),
                retryable: true,
            }
        }
    }
}

#[async_trait]
impl ActionHandler for HttpHandler {
    fn support(&self) -> HandlerSupport {
        // Dropping an in-flight mutation cannot prove it did not commit, so only reads are cancellable.
        HandlerSupport {
            modes: self.config.modes.clone(),
            cancellable: !self.config.mutation,
            mutation: self.config.mutation,
            transactions: self.config.transactions.clone(),
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        if self.config.mutation {
            return self.call(ctx, input).await;
        }
        tokio::select! {
            () = ctx.cancellation.cancelled() => Err(HandlerError::Cancelled),
            result = self.call(ctx, input) => result,
        }
    }

    async fn reconcile(
        &self,
        ctx: &TrustedContext,
        operation: &aip_core::ProviderOperationRef,
    ) -> Result<super::Reconciliation, HandlerError> {
        let Some(url) = &self.config.reconcile_url else {
            return Err(HandlerError::Failed {
                code: ErrorCode::TransactionModeUnsupported.as_str().into(),
                message: "no reconcile_url is configured for this capability".into(),
                retryable: false,
            });
        };
        let answer = self
            .post(
                url,
                ctx,
                &json!({
                    "operation": operation,
                    "cursor": ctx.transaction.as_ref().and_then(|t| t.reconciliation_cursor.clone()),
                    "context": ctx,
                }),
            )
            .await?;
        let outcome = answer.get("outcome").and_then(Value::as_str);
        match outcome {
            Some("committed") => Ok(super::Reconciliation::Committed {
                output: answer.get("output").cloned().unwrap_or(Value::Null),
            }),
            Some("not_committed") => Ok(super::Reconciliation::NotCommitted),
            Some("pending") => Ok(super::Reconciliation::Pending {
                retry_after_ms: answer
                    .get("retry_after_ms")
                    .and_then(Value::as_u64)
                    .unwrap_or(5_000)
                    .clamp(100, 3_600_000),
                cursor: answer
                    .get("cursor")
                    .and_then(Value::as_str)
                    .filter(|c| c.len() <= 1024)
                    .map(str::to_owned),
            }),
            _ => Err(HandlerError::Failed {
                code: ErrorCode::ConnectorFailed.as_str().into(),
                message:
                    "the reconcile answer names no outcome (committed, not_committed, pending)"
                        .into(),
                retryable: true,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str, pem: Option<&[u8]>) -> HttpHandlerConfig {
        HttpHandlerConfig {
            url: url.into(),
            timeout: Duration::from_secs(1),
            mutation: false,
            modes: BTreeSet::from([Mode::Sync]),
            extra_roots_pem: pem.map(<[u8]>::to_vec),
            transactions: None,
            reconcile_url: None,
        }
    }

    #[test]
    fn https_and_http_urls_are_accepted_and_other_schemes_refused() {
        assert!(HttpHandler::new(config("https://svc.example/x", None)).is_ok());
        assert!(HttpHandler::new(config("http://127.0.0.1:9/x", None)).is_ok());
        assert!(matches!(
            HttpHandler::new(config("ftp://svc.example/x", None)),
            Err(HttpHandlerBuildError::BadUrl(_))
        ));
    }

    #[test]
    fn a_ca_bundle_without_a_certificate_is_refused() {
        assert!(matches!(
            HttpHandler::new(config("https://svc.example/x", Some(b"not a pem"))),
            Err(HttpHandlerBuildError::BadCa(_))
        ));
    }
}
