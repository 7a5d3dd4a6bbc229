//! `[nats]`: the native NATS binding's connection, subjects and bounds (spec 20.4).

use std::path::PathBuf;

use serde::Deserialize;

use super::{ConfigError, malformed, within_usize};

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
        for (name, value) in [
            ("nats.trust_domain", &self.trust_domain),
            ("nats.service", &self.service),
            ("nats.service_version", &self.service_version),
        ] {
            let clean = sanitize(value);
            if clean.is_empty() || clean.contains(['*', '>']) || clean.chars().any(char::is_control)
            {
                return Err(malformed(name, value, "a non-empty subject token"));
            }
        }
        if self.queue_group.is_empty() || self.queue_group.contains([' ', '*', '>']) {
            return Err(malformed(
                "nats.queue_group",
                &self.queue_group,
                "a non-empty token without spaces or wildcards",
            ));
        }
        within_usize("nats.max_in_flight", self.max_in_flight, 1..=65_536)?;
        if self.user.is_some() != self.password_file.is_some() {
            return Err(ConfigError::Together {
                key: "nats.user".into(),
                other: "nats.password_file",
            });
        }
        let methods = [
            self.user.is_some(),
            self.token_file.is_some(),
            self.nkey_seed_file.is_some(),
            self.credentials_file.is_some(),
        ];
        if methods.iter().filter(|m| **m).count() > 1 {
            return Err(ConfigError::AtMostOne {
                key: "nats".into(),
                options: &[
                    "user/password_file",
                    "token_file",
                    "nkey_seed_file",
                    "credentials_file",
                ],
            });
        }
        if self.tls_client_cert_file.is_some() != self.tls_client_key_file.is_some() {
            return Err(ConfigError::Together {
                key: "nats.tls_client_cert_file".into(),
                other: "nats.tls_client_key_file",
            });
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
