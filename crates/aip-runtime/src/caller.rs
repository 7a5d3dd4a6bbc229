//! The authenticated caller: identity, tenant and scopes resolved from trusted configuration (spec 8, 22.5).

use aip_core::PrincipalKind;
use serde::Serialize;

use crate::scope::{
    SCOPE_ALL, SCOPE_AUDIT_EXPORT, SCOPE_AUDIT_READ, SCOPE_DATA_SENSITIVE, SCOPE_INVOKE_PREFIX,
    SCOPE_READ_TENANT,
};

/// The tenant of principals and resources configured without one.
pub const DEFAULT_TENANT: &str = "default";
/// The issuer of callers the runtime itself acts as (a reconciliation admitted as its commit's
/// principal); no authentication path issues it (bearer, webhook, OAuth URLs, peer did:keys).
pub const RUNTIME_ISSUER: &str = "runtime";

/// An external account bound to a principal by trusted configuration (spec 8.2-8.3, 22.6): the
/// provider-side account its work runs under. Never taken from a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalAccount {
    /// The external system, for example `stripe`.
    pub system: String,
    /// The account id inside that system.
    pub id: String,
}

/// A transport-authenticated principal. Built only by a binding from its own authentication, never from
/// request bodies; a request-supplied tenant is at most a selector (spec 22.6).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Caller {
    /// Principal id.
    pub id: String,
    /// Principal kind (spec 8.1).
    pub kind: PrincipalKind,
    /// Tenant bound by configuration.
    pub tenant: String,
    /// Scopes bound by configuration.
    pub scopes: Vec<String>,
    /// What authenticated it: `bearer`, or the `did:key` of a verified envelope signature.
    pub issuer: String,
    /// The external account bound by configuration, if any (idempotency scope `external_account`).
    pub external_account: Option<ExternalAccount>,
    /// Roles bound by configuration: the trusted resolver of approval authority (spec 12.1).
    pub roles: Vec<String>,
    /// Groups bound by configuration (approval authority, spec 12.1).
    pub groups: Vec<String>,
    /// The tenant approval policies the directory counts this principal in (spec 12.1 "tenant
    /// policy" authority), by policy id.
    pub approval_policies: Vec<String>,
}

impl Caller {
    /// The owner of a stored object as a caller: tenant and id only, no scopes, so it can authorize
    /// nothing beyond its own objects (used for event audiences and records written on the owner's
    /// behalf; its kind is never read).
    pub(crate) fn owner(tenant: &str, principal: &str) -> Self {
        Caller {
            id: principal.to_owned(),
            kind: PrincipalKind::Service,
            tenant: tenant.to_owned(),
            scopes: Vec::new(),
            issuer: String::new(),
            external_account: None,
            roles: Vec::new(),
            groups: Vec::new(),
            approval_policies: Vec::new(),
        }
    }

    /// The authority this caller holds as the trusted resolver states it (spec 12.1):
    /// `principal:<id>`, `role:<name>`, `group:<name>`, `tenant_policy:<id>`. Only configuration
    /// puts anything here.
    pub fn resolver_keys(&self) -> Vec<String> {
        let mut keys = vec![format!("principal:{}", self.id)];
        keys.extend(self.roles.iter().map(|r| format!("role:{r}")));
        keys.extend(self.groups.iter().map(|g| format!("group:{g}")));
        keys.extend(
            self.approval_policies
                .iter()
                .map(|p| format!("tenant_policy:{p}")),
        );
        keys
    }

    /// The caller as a wire principal (id and kind; nothing else is asserted).
    pub fn principal(&self) -> aip_core::Principal {
        crate::events::bare_principal(&self.id, self.kind)
    }

    /// Whether the caller may export approval evidence (raw governed input, spec 16.6): both
    /// `approval:export` and `approval:sensitive`, or `*`.
    pub fn may_export_approvals(&self) -> bool {
        self.has(SCOPE_ALL)
            || (self.has(crate::scope::SCOPE_APPROVAL_EXPORT)
                && self.has(crate::scope::SCOPE_APPROVAL_SENSITIVE))
    }

    /// Whether the caller may see and resolve its tenant's escalations (spec 12.7).
    pub fn may_resolve_escalations(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(crate::scope::SCOPE_ESCALATION_RESOLVE)
    }

    /// Whether the caller may invoke `capability_id`.
    pub fn may_invoke(&self, capability_id: &str) -> bool {
        self.scopes.iter().any(|scope| {
            if scope == SCOPE_ALL {
                return true;
            }
            let Some(pattern) = scope.strip_prefix(SCOPE_INVOKE_PREFIX) else {
                return false;
            };
            match pattern.strip_suffix('*') {
                Some(prefix) => capability_id.starts_with(prefix),
                None => pattern == capability_id,
            }
        })
    }

    /// Whether the caller may read an object owned by `owner` in `tenant` (spec 16.3).
    pub fn may_read(&self, tenant: &str, owner: &str) -> bool {
        if tenant != self.tenant {
            return false;
        }
        owner == self.id || self.reads_whole_tenant()
    }

    /// Whether the caller may cancel work owned by `owner` in `tenant`: its own, or any of its tenant's
    /// with the all scope. Reading the whole tenant (`read:tenant`) does not grant it (spec 22.5).
    pub fn may_cancel(&self, tenant: &str, owner: &str) -> bool {
        tenant == self.tenant && (owner == self.id || self.has(SCOPE_ALL))
    }

    /// Whether the caller reads all objects of its tenant.
    pub fn reads_whole_tenant(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_READ_TENANT)
    }

    /// Whether the caller reads others' sensitive outputs (see [`SCOPE_DATA_SENSITIVE`]).
    pub fn reads_sensitive_data(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_DATA_SENSITIVE)
    }

    /// Whether the caller may export the tenant's audit events (spec 16.7).
    pub fn may_export_audit(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_AUDIT_EXPORT)
    }

    /// Whether the caller may browse the tenant's audit events.
    pub fn may_read_audit(&self) -> bool {
        self.has(SCOPE_ALL) || self.has(SCOPE_AUDIT_READ)
    }

    /// Refuses an identity context naming a tenant other than the caller's (a request-supplied
    /// tenant is a selector, never authority: spec 22.6).
    pub(crate) fn check_identity_tenant(
        &self,
        identity: Option<&aip_core::IdentityContext>,
    ) -> Result<(), crate::error::RuntimeError> {
        match identity.and_then(|i| i.tenant.as_ref()) {
            Some(t) if t.id != self.tenant => Err(crate::error::RuntimeError::ForeignTenant),
            _ => Ok(()),
        }
    }

    /// Whether the caller holds `scope` itself (not through `*`).
    pub(crate) fn has(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(scopes: &[&str]) -> Caller {
        Caller {
            id: "svc:a".into(),
            kind: PrincipalKind::Service,
            tenant: "t1".into(),
            scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
            issuer: "bearer".into(),
            external_account: None,
            roles: Vec::new(),
            groups: Vec::new(),
            approval_policies: Vec::new(),
        }
    }

    #[test]
    fn an_invoke_prefix_scope_covers_only_matching_capabilities() {
        let c = caller(&["invoke:cap:demo:*"]);
        assert!(c.may_invoke("cap:demo:echo"));
        assert!(!c.may_invoke("cap:other"));
    }

    #[test]
    fn another_tenants_object_is_never_readable_even_with_the_all_scope() {
        let c = caller(&["*"]);
        assert!(!c.may_read("t2", "svc:a"));
        assert!(c.may_read("t1", "svc:b"));
    }

    #[test]
    fn a_tenant_wide_reader_may_not_cancel_another_principals_work() {
        assert!(!caller(&["read:tenant"]).may_cancel("t1", "svc:b"));
        assert!(caller(&["read:tenant"]).may_cancel("t1", "svc:a"));
        assert!(caller(&["*"]).may_cancel("t1", "svc:b"));
        assert!(!caller(&["*"]).may_cancel("t2", "svc:a"));
    }

    #[test]
    fn without_read_tenant_only_own_objects_are_readable() {
        let c = caller(&["invoke:*"]);
        assert!(c.may_read("t1", "svc:a"));
        assert!(!c.may_read("t1", "svc:b"));
        assert!(!c.may_read_audit());
    }
}
