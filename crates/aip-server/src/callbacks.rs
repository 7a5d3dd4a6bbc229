//! Callback delivery to NATS subjects (spec 17.2); the `[callbacks]` section itself is
//! `config::callbacks`.

use std::time::Duration;

use aip_runtime::callback::{CallbackPublisher, SendError};
use async_trait::async_trait;

pub use crate::config::callbacks::CallbacksConfig;

/// Delivers to NATS subjects as requests: a reply acknowledges the delivery (a JetStream stream
/// capturing the subject acknowledges by storing it); a reply with an `aip-status` header other
/// than 2xx, no responder, or no reply in time is a retryable failure.
pub struct NatsPublisher {
    client: async_nats::Client,
}

impl NatsPublisher {
    /// A publisher over a connected client.
    pub fn new(client: async_nats::Client) -> Self {
        Self { client }
    }
}

#[async_trait]
impl CallbackPublisher for NatsPublisher {
    async fn request(
        &self,
        subject: &str,
        headers: &[(String, String)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<(), SendError> {
        let mut map = async_nats::HeaderMap::new();
        for (name, value) in headers {
            map.insert(name.as_str(), value.as_str());
        }
        let request = self
            .client
            .request_with_headers(subject.to_owned(), map, body.into());
        let reply = match tokio::time::timeout(timeout, request).await {
            Err(_) => return Err(SendError::Retry("timed out".into())),
            Ok(Err(e)) => return Err(SendError::Retry(format!("NATS request failed: {e}"))),
            Ok(Ok(reply)) => reply,
        };
        let status = reply
            .headers
            .as_ref()
            .and_then(|h| h.get("aip-status"))
            .map(|v| v.as_str().to_owned());
        match status {
            Some(s) if !s.starts_with('2') => Err(SendError::Retry(format!(
                "the receiver answered status {s}"
            ))),
            _ => Ok(()),
        }
    }
}
