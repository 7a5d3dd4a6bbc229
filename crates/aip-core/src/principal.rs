//! Principals, external references and identity context (spec 8).
//!
//! Closed wire types mirroring the normative schemas; `null` on an optional member decodes as absent
//! (spec 5.4).

use crate::{Checker, PrincipalId, Timestamp, Validate};
// Named by the doc links only; a link written as a path would change the generated schemas
// (their descriptions are these docs).
#[cfg(doc)]
use crate::Receipt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Actor or authorizing entity in AIP.
///
/// Fields in name order, so a receipt's actor serializes in canonical form (see [`Receipt`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Principal {
    /// Authentication metadata supplied by a profile or gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_context: Option<Value>,
    /// Scoped delegated authority granted to this principal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delegated_authority: Vec<DelegatedAuthorityGrant>,
    /// DID identity, if available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub did: Option<String>,
    /// Human-readable display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Product-specific identities.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_refs: Vec<ExternalRef>,
    /// Stable AIP principal id.
    pub id: PrincipalId,
    /// Principal category.
    pub kind: PrincipalKind,
    /// Trust domain that owns this principal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust_domain: Option<String>,
}

impl Validate for Principal {
    fn validate(&self, v: &mut Checker) {
        v.field("external_refs", |v| v.each(&self.external_refs));
        v.field("delegated_authority", |v| v.each(&self.delegated_authority));
        crate::rules::principal(self, v);
    }
}

/// Entity category for a protocol principal.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A human user or operator.
    Human,
    /// An autonomous or semi-autonomous agent.
    Agent,
    /// A service account or machine identity.
    Service,
    /// A tenant/account boundary.
    Tenant,
    /// A customer identity.
    Customer,
    /// A contact identity in a channel product.
    Contact,
    /// A system-level actor.
    System,
}

crate::wire_enum!(PrincipalKind { Human => "human", Agent => "agent", Service => "service", Tenant => "tenant", Customer => "customer", Contact => "contact", System => "system" });

/// Product-specific identity reference preserved by connectors. Fields in name order (see
/// [`Receipt`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalRef {
    /// Source-local entity id.
    pub id: String,
    /// Source system name, for example `chatwoot` or `dify`.
    pub system: String,
    /// Source-local entity type.
    pub r#type: String,
}

impl Validate for ExternalRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Scoped authority delegated to this principal for another principal's work.
///
/// Delegated authority is part of the native AIP identity model. It lets a
/// runtime distinguish "can read or operate on my own work" from "can read or
/// operate on work owned by a specific principal" without granting broad
/// `*:any` scopes. Compatibility profiles may project this from their own
/// auth systems, but the resulting grant is evaluated by AIP core/runtime
/// semantics.
///
/// Fields in name order (see [`Receipt`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DelegatedAuthorityGrant {
    /// Expiration timestamp. Expired grants MUST be ignored by runtimes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Principal whose work is covered by the grant.
    pub principal_id: PrincipalId,
    /// Optional reason or authority reference retained for audit/debugging.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Granted scope labels. `*` grants all scopes for this principal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl Validate for DelegatedAuthorityGrant {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}

/// Identity, tenant, and credential mapping context for enterprise actions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityContext {
    /// Tenant boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<TenantRef>,
    /// External account boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_account: Option<ExternalAccountRef>,
    /// External user associated with the invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user: Option<ExternalUserRef>,
    /// Human actor that initiated or owns the work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_actor: Option<Principal>,
    /// Service account executing the operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<Principal>,
    /// Principal on whose behalf the operation is performed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acted_on_behalf_of: Option<Principal>,
    /// Reference to external credential material.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_ref: Option<CredentialRef>,
    /// OAuth lifecycle state without token material.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthCredentialState>,
}

impl Validate for IdentityContext {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.tenant {
            v.field("tenant", |v| x.validate(v));
        }
        if let Some(x) = &self.external_account {
            v.field("external_account", |v| x.validate(v));
        }
        if let Some(x) = &self.external_user {
            v.field("external_user", |v| x.validate(v));
        }
        if let Some(x) = &self.human_actor {
            v.field("human_actor", |v| x.validate(v));
        }
        if let Some(x) = &self.service_account {
            v.field("service_account", |v| x.validate(v));
        }
        if let Some(x) = &self.acted_on_behalf_of {
            v.field("acted_on_behalf_of", |v| x.validate(v));
        }
        if let Some(x) = &self.credential_ref {
            v.field("credential_ref", |v| x.validate(v));
        }
        if let Some(x) = &self.oauth {
            v.field("oauth", |v| x.validate(v));
        }
    }
}

/// Tenant reference used for policy and credential partitioning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantRef {
    /// AIP or external tenant id.
    pub id: String,
    /// Source system that owns the tenant id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
}

impl Validate for TenantRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// External account reference used by product connectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalAccountRef {
    /// Account id in the source system.
    pub id: String,
    /// Source system name.
    pub system: String,
}

impl Validate for ExternalAccountRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// External user reference used by product connectors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExternalUserRef {
    /// User id in the source system.
    pub id: String,
    /// Source system name.
    pub system: String,
}

impl Validate for ExternalUserRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// Reference to credential material stored outside protocol envelopes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialRef {
    /// Credential id or vault reference.
    pub id: String,
    /// Credential issuer or storage boundary.
    pub issuer: String,
    /// Granted scope labels known to the runtime.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl Validate for CredentialRef {
    fn validate(&self, v: &mut Checker) {
        let _ = v;
    }
}

/// OAuth credential lifecycle state without raw token material.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthCredentialState {
    /// Authorization server or provider id.
    pub issuer: String,
    /// OAuth client id or service identifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// Granted scope labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// Token expiration timestamp, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Timestamp>,
    /// Whether refresh is available without human reauthorization.
    pub refresh_available: bool,
}

impl Validate for OAuthCredentialState {
    fn validate(&self, v: &mut Checker) {
        if let Some(x) = &self.expires_at {
            v.field("expires_at", |v| x.validate(v));
        }
    }
}
