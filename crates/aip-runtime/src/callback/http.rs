//! HTTP callback targets (spec 17.4): parsing and policy checks at admission, and the guarded
//! sender. The sender resolves and checks the host itself and makes the client connect to exactly
//! the checked addresses (no second resolution, so DNS rebinding cannot switch them), uses no proxy,
//! follows a redirect only when policy allows one (307/308 only, so the method and body stay), and
//! checks every hop again. Request size, time and the part of the answer read are bounded.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, LOCATION};

use super::ssrf::AddressDenied;
use super::{CallbackPolicy, SendError};
use crate::error::CallbackError;

/// The parsed target, when policy allows its scheme and form.
pub(crate) fn parse_target(policy: &CallbackPolicy, target: &str) -> Result<Url, CallbackError> {
    let url = Url::parse(target)
        .map_err(|e| CallbackError::TargetInvalid(format!("the target is not a URL: {e}")))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CallbackError::TargetInvalid(
            "a target URL must not carry credentials".into(),
        ));
    }
    if url.fragment().is_some() {
        return Err(CallbackError::TargetInvalid(
            "a target URL must not carry a fragment".into(),
        ));
    }
    let host = url
        .host_str()
        .ok_or_else(|| CallbackError::TargetInvalid("the target URL has no host".into()))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    match url.scheme() {
        "https" => Ok(url),
        "http" if policy.allow_http_hosts.contains(&host) => Ok(url),
        "http" => Err(CallbackError::TargetDenied(format!(
            "plain http to {host} is not allowed (use https, or name the host in callbacks.allow_http_hosts)"
        ))),
        other => Err(CallbackError::TargetInvalid(format!(
            "scheme {other} is not supported for callbacks"
        ))),
    }
}

/// Resolves the target's host and checks every address (spec 17.4).
pub(crate) async fn check_address(
    policy: &CallbackPolicy,
    url: &Url,
) -> Result<Vec<SocketAddr>, CallbackError> {
    resolve(policy, url)
        .await
        .map_err(|e| CallbackError::TargetDenied(e.to_string()))
}

async fn resolve(policy: &CallbackPolicy, url: &Url) -> Result<Vec<SocketAddr>, AddressDenied> {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(443);
    policy.address.resolve(host, port).await
}

/// One attempt: POSTs `body` to `target` with `headers`; `Ok` on a 2xx.
pub(crate) async fn send(
    policy: &CallbackPolicy,
    target: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
    timeout: Duration,
) -> Result<(), SendError> {
    let deadline = Instant::now() + timeout;
    let mut url = parse_target(policy, target).map_err(|e| SendError::Permanent(e.to_string()))?;
    let mut hops = 0;
    loop {
        let addresses = match resolve(policy, &url).await {
            Ok(a) => a,
            // A name that does not resolve now may resolve later; a denied one stays denied.
            Err(AddressDenied::Unresolvable(host)) => {
                return Err(SendError::Retry(format!("{host} does not resolve")));
            }
            Err(denied) => return Err(SendError::Permanent(denied.to_string())),
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(SendError::Retry("timed out".into()));
        }
        let host = url.host_str().unwrap_or_default().to_owned();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .resolve_to_addrs(&host, &addresses)
            .timeout(remaining)
            .min_tls_version(reqwest::tls::Version::TLS_1_2)
            .build()
            .map_err(|e| SendError::Retry(format!("client: {e}")))?;
        let mut request = client
            .post(url.clone())
            .header(CONTENT_TYPE, "application/aip+json");
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = request
            .body(body.clone())
            .send()
            .await
            .map_err(|e| SendError::Retry(describe(&e)))?;
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let keeps_method = matches!(status.as_u16(), 307 | 308);
            if hops >= policy.max_redirects || !keeps_method {
                return Err(SendError::Permanent(format!(
                    "the target redirected ({status}); callback policy does not follow it"
                )));
            }
            let next = location.and_then(|l| url.join(&l).ok()).ok_or_else(|| {
                SendError::Permanent("a redirect without a usable Location".into())
            })?;
            url = parse_target(policy, next.as_str())
                .map_err(|e| SendError::Permanent(format!("redirect refused: {e}")))?;
            hops += 1;
            continue;
        }
        let answer = read_bounded(response, policy.max_response_bytes).await;
        if status.is_success() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&answer);
        let excerpt: String = text.chars().take(200).collect();
        let error = format!("the target answered {status}: {excerpt}");
        return Err(
            if status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429) {
                SendError::Retry(error)
            } else {
                SendError::Permanent(error)
            },
        );
    }
}

/// Reads at most `limit` bytes of the answer (the rest is dropped with the connection).
async fn read_bounded(mut response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = limit - out.len();
                out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    out
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else {
        format!("request failed: {e}")
    }
}
