//! Native NATS binding, profile `aip.native.nats.v1` (spec 20.4): request/reply on
//! `aip.v1.<trust-domain>.<service>.<service-version>.<message-type>`, one service-wide queue-group
//! subscription per node so several nodes share the load, the `TransportMessage` wrapper (a bare envelope
//! is accepted too) and the standard `AIP-*` headers.
//!
//! Subject access is transport authorization only (spec 20.4, 22.5): every message is authenticated
//! (a signature by a configured trusted signer, or the principal bound to this node's NATS credentials in
//! configuration) and then served by the same runtime entry point as HTTP, which authorizes it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aip_runtime::engine::error_reply;
use aip_runtime::{Caller, Endpoint, Reply, Runtime, RuntimeError};
use async_nats::HeaderMap;
use futures_util::StreamExt as _;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::AuthIndex;
use crate::config::{Config, ConfigError};

/// Profile id of this binding (spec 20.4).
pub const PROFILE: &str = "aip.native.nats.v1";

/// Standard headers (spec 20.4).
pub const HEADER_VERSION: &str = "AIP-Version";
/// Message type header.
pub const HEADER_MESSAGE_TYPE: &str = "AIP-Message-Type";
/// Message id header.
pub const HEADER_MESSAGE_ID: &str = "AIP-Message-Id";
/// Session id header (when the envelope has one).
pub const HEADER_SESSION_ID: &str = "AIP-Session-Id";
/// Correlation id header (when the envelope has one).
pub const HEADER_CORRELATION_ID: &str = "AIP-Correlation-Id";

/// `[nats]` configuration (docs/configuration.md). The binding is off unless `url` is set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsConfig {
    /// Server URL(s), comma separated (`nats://host:4222`, `tls://host:4222`).
    #[serde(default)]
    pub url: Option<String>,
    /// Subject component `<trust-domain>`.
    #[serde(default = "default_trust_domain")]
    pub trust_domain: String,
    /// Subject component `<service>`.
    #[serde(default = "default_service")]
    pub service: String,
    /// Subject component `<service-version>`.
    #[serde(default = "default_service_version")]
    pub service_version: String,
    /// Queue group of the service-wide subscription; nodes in one group share the load.
    #[serde(default = "default_queue_group")]
    pub queue_group: String,
    /// Configured principal that unsigned messages act as: the identity bound to this node's NATS
    /// credentials and the subject ACLs of its account. Unset: only envelopes signed by a
    /// `security.trusted_signers` key are served.
    #[serde(default)]
    pub principal: Option<String>,
    /// User name for user/password authentication (with `password_file`).
    #[serde(default)]
    pub user: Option<String>,
    /// File holding the password (mode 0600).
    #[serde(default)]
    pub password_file: Option<PathBuf>,
    /// File holding an authentication token (mode 0600).
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// File holding an NKey seed (`SU…`, mode 0600).
    #[serde(default)]
    pub nkey_seed_file: Option<PathBuf>,
    /// A `.creds` file (user JWT and NKey seed, mode 0600).
    #[serde(default)]
    pub credentials_file: Option<PathBuf>,
    /// Refuse a connection without TLS.
    #[serde(default)]
    pub tls_required: bool,
    /// PEM file of extra root certificates for the server's certificate.
    #[serde(default)]
    pub tls_ca_file: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with `tls_client_key_file`).
    #[serde(default)]
    pub tls_client_cert_file: Option<PathBuf>,
    /// PEM private key of the client certificate.
    #[serde(default)]
    pub tls_client_key_file: Option<PathBuf>,
    /// Messages served at once by this node; further messages wait in the subscription buffer.
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: usize,
}

impl Default for NatsConfig {
    fn default() -> Self {
        Self {
            url: None,
            trust_domain: default_trust_domain(),
            service: default_service(),
            service_version: default_service_version(),
            queue_group: default_queue_group(),
            principal: None,
            user: None,
            password_file: None,
            token_file: None,
            nkey_seed_file: None,
            credentials_file: None,
            tls_required: false,
            tls_ca_file: None,
            tls_client_cert_file: None,
            tls_client_key_file: None,
            max_in_flight: default_max_in_flight(),
        }
    }
}

impl NatsConfig {
    /// Range and consistency checks.
    pub fn check(&self) -> Result<(), ConfigError> {
        let invalid = |m: &str| Err(ConfigError::Invalid(format!("nats: {m}")));
        for (name, value) in [
            ("trust_domain", &self.trust_domain),
            ("service", &self.service),
            ("service_version", &self.service_version),
        ] {
            let clean = sanitize(value);
            if clean.is_empty() || clean.contains(['*', '>']) || clean.chars().any(char::is_control)
            {
                return invalid(&format!("{name} must be a non-empty subject token"));
            }
        }
        if self.queue_group.is_empty() || self.queue_group.contains([' ', '*', '>']) {
            return invalid("queue_group must be a non-empty token without spaces or wildcards");
        }
        if self.max_in_flight == 0 || self.max_in_flight > 65_536 {
            return invalid("max_in_flight must be within 1..=65536");
        }
        if self.user.is_some() != self.password_file.is_some() {
            return invalid("give user and password_file together");
        }
        let methods = [
            self.user.is_some(),
            self.token_file.is_some(),
            self.nkey_seed_file.is_some(),
            self.credentials_file.is_some(),
        ];
        if methods.iter().filter(|m| **m).count() > 1 {
            return invalid(
                "choose one of user/password_file, token_file, nkey_seed_file, credentials_file",
            );
        }
        if self.tls_client_cert_file.is_some() != self.tls_client_key_file.is_some() {
            return invalid("give tls_client_cert_file and tls_client_key_file together");
        }
        Ok(())
    }

    /// `aip.v1.<trust-domain>.<service>.<service-version>` with sanitised components.
    pub fn subject_prefix(&self) -> String {
        format!(
            "aip.v1.{}.{}.{}",
            sanitize(&self.trust_domain),
            sanitize(&self.service),
            sanitize(&self.service_version)
        )
    }
}

/// Spec 20.4: dots, spaces, forward slashes and backslashes inside a component become underscores.
pub fn sanitize(component: &str) -> String {
    component.replace(['.', ' ', '/', '\\'], "_")
}

/// The request/reply subject of `message_type` under `prefix`.
pub fn subject(prefix: &str, message_type: &str) -> String {
    format!("{prefix}.{}", sanitize(message_type))
}

/// Why the binding could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NatsError {
    /// A secret file could not be read.
    #[error("nats: {path}: {source}")]
    Secret {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A secret file is readable by group or others, or empty.
    #[error("nats: {0} must be a non-empty file not readable by group or others (chmod 600)")]
    SecretPermissions(PathBuf),
    /// `nats.principal` names no configured principal.
    #[error("nats: principal {0} is not configured")]
    UnknownPrincipal(String),
    /// Connecting failed.
    #[error("nats: cannot connect: {0}")]
    Connect(String),
    /// Subscribing failed.
    #[error("nats: cannot subscribe: {0}")]
    Subscribe(String),
}

/// A running binding: dropping it stops serving.
pub struct NatsBinding {
    task: tokio::task::JoinHandle<()>,
    /// The service-wide subject this node serves (`<prefix>.>`).
    pub subscription: String,
}

impl Drop for NatsBinding {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connect with the configured options and serve `<prefix>.>` in the configured queue group.
pub async fn start(
    config: &Config,
    auth: Arc<AuthIndex>,
    runtime: Arc<Runtime>,
) -> Result<Option<NatsBinding>, NatsError> {
    let nats = &config.nats;
    let Some(url) = nats.url.as_deref() else {
        return Ok(None);
    };
    let bound = match &nats.principal {
        Some(id) => Some(
            auth.principal(id)
                .cloned()
                .ok_or_else(|| NatsError::UnknownPrincipal(id.clone()))?,
        ),
        None => None,
    };
    let signers = config
        .security
        .trusted_signers
        .iter()
        .map(|s| (s.did.clone(), s.principal.clone()))
        .collect();
    let options = connect_options(nats).await?;
    let client = options
        .connect(url)
        .await
        .map_err(|e| NatsError::Connect(e.to_string()))?;
    let prefix = nats.subject_prefix();
    let subscription = format!("{prefix}.>");
    let mut subscriber = client
        .queue_subscribe(subscription.clone(), nats.queue_group.clone())
        .await
        .map_err(|e| NatsError::Subscribe(e.to_string()))?;
    let service = Arc::new(Service {
        client,
        runtime,
        auth,
        bound,
        signers,
        stream_prefix: format!("{prefix}.stream."),
        prefix,
        max_bytes: config.limits.max_body_bytes,
    });
    let permits = Arc::new(tokio::sync::Semaphore::new(nats.max_in_flight));
    let task = tokio::spawn(async move {
        while let Some(message) = subscriber.next().await {
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                return;
            };
            let service = Arc::clone(&service);
            tokio::spawn(async move {
                service.serve(message).await;
                drop(permit);
            });
        }
    });
    Ok(Some(NatsBinding { task, subscription }))
}

struct Service {
    client: async_nats::Client,
    runtime: Arc<Runtime>,
    auth: Arc<AuthIndex>,
    bound: Option<Caller>,
    signers: HashMap<String, String>,
    prefix: String,
    stream_prefix: String,
    max_bytes: usize,
}

/// How the request arrived, so the reply uses the same form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Wrapped,
    Bare,
}

impl Service {
    async fn serve(&self, message: async_nats::Message) {
        // Correlation streams are published by nodes, not requests to serve.
        if message.subject.as_str().starts_with(&self.stream_prefix) {
            return;
        }
        let Some(reply_to) = message.reply.clone() else {
            tracing::debug!(subject = %message.subject, "NATS message without a reply subject ignored");
            return;
        };
        let (form, reply) = self.answer(&message).await;
        let (headers, payload) = encode_reply(&reply, form);
        if let Err(err) = self
            .client
            .publish_with_headers(reply_to, headers, payload.into())
            .await
        {
            tracing::warn!(error = %err, "NATS reply could not be published");
        }
    }

    async fn answer(&self, message: &async_nats::Message) -> (Form, Reply) {
        let limits = aip_core::Limits {
            max_bytes: self.max_bytes,
            ..aip_core::Limits::default()
        };
        let payload = message.payload.as_ref();
        // Bound before parsing anything (spec 20: size policy is a binding responsibility).
        if payload.len() > self.max_bytes
            && let Err(err) = aip_core::decode_envelope(payload, &limits)
        {
            return (Form::Bare, error_reply(None, &RuntimeError::Decode(err)));
        }
        let (form, envelope_bytes) = match unwrap_transport(payload) {
            Some((form, bytes)) => (form, bytes),
            None => (Form::Bare, payload.to_vec()),
        };
        let (envelope, raw) = match aip_core::decode_envelope_value(&envelope_bytes, &limits) {
            Ok(decoded) => decoded,
            Err(err) => return (form, error_reply(None, &RuntimeError::Decode(err))),
        };
        let suffix = message
            .subject
            .as_str()
            .strip_prefix(&self.prefix)
            .and_then(|s| s.strip_prefix('.'))
            .unwrap_or_default();
        if suffix != sanitize(envelope.message_type.as_str()) {
            let err = RuntimeError::UnsupportedMessage(format!(
                "subject names {suffix:?} but the envelope is {}",
                envelope.message_type.as_str()
            ));
            return (form, error_reply(Some(&envelope), &err));
        }
        let Some(caller) = self.caller(&raw) else {
            let err = RuntimeError::Signature(
                "unsigned NATS messages are refused: no principal is bound to this connection",
            );
            return (form, error_reply(Some(&envelope), &err));
        };
        let reply = self
            .runtime
            .handle(&caller, &envelope_bytes, Endpoint::Messages)
            .await;
        (form, reply)
    }

    /// The principal a message acts as: the trusted signer's principal when the envelope names one
    /// (the runtime then verifies the signature and the binding), else the connection's bound principal.
    fn caller(&self, raw: &Value) -> Option<Caller> {
        let signer = raw
            .pointer("/security/did")
            .and_then(Value::as_str)
            .and_then(|did| self.signers.get(did))
            .and_then(|principal| self.auth.principal(principal));
        match signer {
            Some(caller) => Some(caller.clone()),
            None => self.bound.clone(),
        }
    }
}

/// A `TransportMessage` (`{"envelope": {...}, "metadata"?: {...}}`) yields its envelope's bytes.
fn unwrap_transport(payload: &[u8]) -> Option<(Form, Vec<u8>)> {
    let value: Value = serde_json::from_slice(payload).ok()?;
    let object = value.as_object()?;
    if object.contains_key("aip_version") {
        return None;
    }
    let envelope = object.get("envelope")?;
    if object.keys().any(|k| k != "envelope" && k != "metadata") {
        return None;
    }
    Some((Form::Wrapped, serde_json::to_vec(envelope).ok()?))
}

/// Reply headers (spec 20.4) and payload in the request's form.
fn encode_reply(reply: &Reply, form: Form) -> (HeaderMap, Vec<u8>) {
    let envelope = &reply.envelope;
    let mut headers = HeaderMap::new();
    // The only version of this runtime (spec 6.1); the envelope type admits no other.
    headers.insert(HEADER_VERSION, "1.0");
    headers.insert(HEADER_MESSAGE_TYPE, envelope.message_type.as_str());
    headers.insert(HEADER_MESSAGE_ID, envelope.message_id.as_str());
    if let Some(session) = &envelope.session_id {
        headers.insert(HEADER_SESSION_ID, session.as_str());
    }
    if let Some(correlation) = &envelope.correlation_id {
        headers.insert(HEADER_CORRELATION_ID, correlation.as_str());
    }
    let value = envelope.to_value();
    let body = match form {
        Form::Wrapped => json!({ "envelope": value }),
        Form::Bare => value,
    };
    (headers, body.to_string().into_bytes())
}

async fn connect_options(nats: &NatsConfig) -> Result<async_nats::ConnectOptions, NatsError> {
    let mut options = async_nats::ConnectOptions::new()
        .name("aip serve")
        .require_tls(nats.tls_required);
    if let (Some(user), Some(file)) = (&nats.user, &nats.password_file) {
        options = options.user_and_password(user.clone(), read_secret(file)?);
    }
    if let Some(file) = &nats.token_file {
        options = options.token(read_secret(file)?);
    }
    if let Some(file) = &nats.nkey_seed_file {
        options = options.nkey(read_secret(file)?);
    }
    if let Some(file) = &nats.credentials_file {
        let creds = read_secret(file)?;
        options = options
            .credentials(&creds)
            .map_err(|source| NatsError::Secret {
                path: file.clone(),
                source,
            })?;
    }
    if let Some(ca) = &nats.tls_ca_file {
        options = options.add_root_certificates(ca.clone());
    }
    if let (Some(cert), Some(key)) = (&nats.tls_client_cert_file, &nats.tls_client_key_file) {
        options = options.add_client_certificate(cert.clone(), key.clone());
    }
    Ok(options)
}

/// A secret from a file that only its owner can read, trimmed.
fn read_secret(path: &Path) -> Result<String, NatsError> {
    use std::os::unix::fs::PermissionsExt as _;
    let io = |source| NatsError::Secret {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(NatsError::SecretPermissions(path.to_path_buf()));
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    let secret = text.trim().to_owned();
    if secret.is_empty() {
        return Err(NatsError::SecretPermissions(path.to_path_buf()));
    }
    Ok(secret)
}

fn default_trust_domain() -> String {
    "local".into()
}
fn default_service() -> String {
    "aip".into()
}
fn default_service_version() -> String {
    "v1".into()
}
fn default_queue_group() -> String {
    "aip".into()
}
fn default_max_in_flight() -> usize {
    256
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn subject_components_replace_dots_spaces_and_slashes_with_underscores() {
        let config = NatsConfig {
            trust_domain: "example.com".into(),
            service: "gate way/x\\y".into(),
            ..NatsConfig::default()
        };
        assert_eq!(
            config.subject_prefix(),
            "aip.v1.example_com.gate_way_x_y.v1"
        );
        assert_eq!(
            subject("aip.v1.example_com.gateway.v1", "aip.core.v1.action"),
            "aip.v1.example_com.gateway.v1.aip_core_v1_action"
        );
        assert_eq!(
            NatsConfig::default().subject_prefix(),
            "aip.v1.local.aip.v1"
        );
    }

    #[test]
    fn wildcards_in_subject_components_and_two_auth_methods_are_refused() {
        let wild = NatsConfig {
            service: "*".into(),
            ..NatsConfig::default()
        };
        assert!(wild.check().is_err());
        let two = NatsConfig {
            token_file: Some("/t".into()),
            nkey_seed_file: Some("/n".into()),
            ..NatsConfig::default()
        };
        assert!(two.check().is_err());
        assert!(NatsConfig::default().check().is_ok());
    }

    #[test]
    fn a_transport_message_is_unwrapped_and_a_bare_envelope_is_not() {
        let wrapped = br#"{"envelope":{"aip_version":"1.0"},"metadata":{"k":"v"}}"#;
        let (form, bytes) = unwrap_transport(wrapped).unwrap();
        assert!(form == Form::Wrapped);
        assert_eq!(bytes, br#"{"aip_version":"1.0"}"#);
        assert!(unwrap_transport(br#"{"aip_version":"1.0","envelope":{}}"#).is_none());
        assert!(unwrap_transport(br#"{"envelope":{},"extra":1}"#).is_none());
    }
}
