//! The scopes the runtime checks (spec 22.5), in one place: what each one authorizes. A
//! principal's scopes come from trusted configuration only.

/// Grants every scope below, within the caller's own tenant.
pub const SCOPE_ALL: &str = "*";
/// Prefix of invocation scopes: `invoke:<capability id>`, `invoke:<prefix>*` or `invoke:*`.
pub const SCOPE_INVOKE_PREFIX: &str = "invoke:";
/// Reads every object of the caller's tenant, not only the caller's own.
pub const SCOPE_READ_TENANT: &str = "read:tenant";
/// Reads the outputs of other principals' actions whose data is `restricted`, `regulated` or of
/// `unknown` sensitivity (spec 9.6: unknown is treated conservatively); an action's owner always
/// reads its own.
pub const SCOPE_DATA_SENSITIVE: &str = "data:sensitive";
/// Reads the tenant's audit events (spec 18.3).
pub const SCOPE_AUDIT_READ: &str = "audit:read";
/// Exports the tenant's audit events with their receipts (spec 16.7: dedicated authority, because
/// exported records may leave the runtime's trust boundary).
pub const SCOPE_AUDIT_EXPORT: &str = "audit:export";
/// Exports an approval's governed input (spec 16.6).
pub const SCOPE_APPROVAL_EXPORT: &str = "approval:export";
/// The second scope evidence export needs (spec 16.6: sensitive governed input).
pub const SCOPE_APPROVAL_SENSITIVE: &str = "approval:sensitive";
/// Sees and resolves the tenant's escalations (spec 12.7).
pub const SCOPE_ESCALATION_RESOLVE: &str = "escalation:resolve";
/// Re-drives failed or dead-lettered callback deliveries of the caller's tenant (spec 17.3; an
/// operator's authority).
pub const SCOPE_CALLBACKS_REDRIVE: &str = "callbacks:redrive";
/// Records channel messages and conversation updates: a connector's authority (spec 15).
pub const SCOPE_CHANNEL_WRITE: &str = "channel:write";
/// Reads every conversation of the tenant (not only those one recorded, is assigned or is the
/// contact of).
pub const SCOPE_CHANNEL_READ: &str = "channel:read";
/// Sees retained raw provider payloads in message reads (spec 15.3: retention is authorized).
pub const SCOPE_CHANNEL_RAW: &str = "channel:raw";
/// Closes settlement batches and reads them (spec 18.4).
pub const SCOPE_SETTLEMENT: &str = "settlement:close";
