//! HTTP callback targets (spec 17.4): parsing and policy checks at admission, and the guarded
//! sender. One client per runtime, whose DNS resolver is the address policy itself
//! ([`GuardedResolver`]): every address a connection may use was checked when it was resolved, so
//! DNS rebinding cannot slip an internal address in between a check and a connect (IP literals
//! never reach a resolver and are checked before the request). No proxy; a redirect is followed
//! only when policy allows one (307/308 only, so the method and body stay), and every hop is
//! checked again. Request size, time and the part of the answer read are bounded.

use std::net::SocketAddr;
use std::sync::Arc;
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

/// Resolves names for the callback client through the address policy: a name with any denied
/// address resolves to nothing usable (an error), never to a partial answer.
struct GuardedResolver(super::ssrf::AddressPolicy);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            // Port 0: the client puts the URL's port in.
            let addresses = policy
                .resolve(&host, 0)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The callback client of a runtime with `policy`: no redirects, no proxy, TLS 1.2+, the guarded
/// resolver, pooled connections.
pub(crate) fn client(policy: &CallbackPolicy) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver(policy.address.clone())))
        .min_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
}

/// One attempt: POSTs `body` to `target` with `headers`; `Ok` on a 2xx.
pub(crate) async fn send(
    client: &reqwest::Client,
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
        // Checked here for a typed answer (and for IP literals, which no resolver sees); the
        // client's resolver checks every name again as it connects.
        match resolve(policy, &url).await {
            Ok(_) => {}
            // A name that does not resolve now may resolve later; a denied one stays denied.
            Err(AddressDenied::Unresolvable(host)) => {
                return Err(SendError::Retry(format!("{host} does not resolve")));
            }
            Err(denied) => return Err(SendError::Permanent(denied.to_string())),
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(SendError::Retry("timed out".into()));
        }
        let mut request = client.post(url.clone()).timeout(remaining);
        // A rendering profile names its own content type.
        if !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(CONTENT_TYPE.as_str()))
        {
            request = request.header(CONTENT_TYPE, "application/aip+json");
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_clients_resolver_refuses_a_name_with_a_denied_address_at_connect_time() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // No pre-check here: the connection itself must not reach the loopback listener.
        let denied = client(&CallbackPolicy::default())
            .unwrap()
            .post(format!("http://localhost:{port}/hook"))
            .timeout(Duration::from_millis(2000))
            .send()
            .await
            .unwrap_err();
        assert!(
            !denied.is_timeout(),
            "refused before connecting: {denied:?}"
        );
        let mut owned = CallbackPolicy::default();
        owned.address.allow_internal.insert("localhost".into());
        let reached = client(&owned)
            .unwrap()
            .post(format!("http://localhost:{port}/hook"))
            .timeout(Duration::from_millis(300))
            .send()
            .await;
        // The owned host connects (the listener never answers, so this ends in a timeout).
        assert!(reached.is_err_and(|e| e.is_timeout()));
    }
}
