//! Transactions (spec 13): the durable row that binds a transaction's plan and the actions that
//! dry-ran, planned, committed, reconciled or compensated it. The row is written only in the
//! admission transaction of one of those actions ([`TransactionLink`]), compare-and-set on its
//! version, so one commit owns a plan; every later state follows from the linked actions' own
//! durable lifecycles.

use serde_json::Value;

string_enum!(
    /// What a linked action does to its transaction (spec 13.1 modes that act on one).
    TransactionRole {
        /// A dry run: validates or simulates, commits nothing.
        DryRun = "dry_run",
        /// Produces the durable plan.
        Plan = "plan",
        /// Executes directly, without a plan.
        Execute = "execute",
        /// Commits the plan: the one action that owns its execution.
        Commit = "commit",
        /// Queries the provider about an unknown outcome.
        Reconcile = "reconcile",
        /// A compensating action (its own capability).
        Compensate = "compensate",
    }
);

/// A transaction's durable row.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionRecord {
    /// Tenant (with `transaction_id`, the key).
    pub tenant: String,
    /// Transaction id.
    pub transaction_id: String,
    /// The capability the transaction runs (compensation runs another, named by its contract).
    pub capability: String,
    /// The principal that opened it.
    pub principal: String,
    /// The plan's id, once planned.
    pub plan_id: Option<String>,
    /// The plan (the wire `TransactionPlan`), once planned.
    pub plan: Option<Value>,
    /// When the plan expires, epoch ms.
    pub plan_expires_at_ms: Option<i64>,
    /// The provider operation of the current commit (the wire `ProviderOperationRef`).
    pub operation: Option<Value>,
    /// The latest dry run.
    pub dry_run_action_id: Option<String>,
    /// The plan's action.
    pub plan_action_id: Option<String>,
    /// The action that owns execution: the current commit, or the direct execution.
    pub commit_action_id: Option<String>,
    /// The latest reconciliation of the current commit.
    pub reconcile_action_id: Option<String>,
    /// The latest compensation.
    pub compensation_action_id: Option<String>,
    /// Created, epoch ms.
    pub created_at_ms: i64,
    /// Last changed, epoch ms.
    pub updated_at_ms: i64,
    /// Compare-and-set version, 0 when created.
    pub version: i64,
}

impl TransactionRecord {
    /// The action linked in `role`, if any.
    pub fn action_in(&self, role: TransactionRole) -> Option<&str> {
        match role {
            TransactionRole::DryRun => self.dry_run_action_id.as_deref(),
            TransactionRole::Plan => self.plan_action_id.as_deref(),
            TransactionRole::Execute | TransactionRole::Commit => self.commit_action_id.as_deref(),
            TransactionRole::Reconcile => self.reconcile_action_id.as_deref(),
            TransactionRole::Compensate => self.compensation_action_id.as_deref(),
        }
    }
}

/// Links an admitted action to its transaction, in the admission transaction (see
/// [`crate::Admission::transaction`]).
#[derive(Debug, Clone)]
pub struct TransactionLink {
    /// Transaction id (in the admitted action's tenant).
    pub transaction_id: String,
    /// What the action does to the transaction.
    pub role: TransactionRole,
    /// `None`: the transaction must not exist yet and is created with this link (a duplicate id is
    /// [`crate::StoreError::StateConflict`]). `Some(v)`: the row must still be at version `v`, else
    /// the admission is refused with [`crate::StoreError::StateConflict`] and nothing is written:
    /// the claim of spec 13.4.
    pub expected_version: Option<i64>,
    /// The transaction's capability and principal, when it is created.
    pub capability: String,
    /// See `capability`.
    pub principal: String,
    /// With [`TransactionRole::Plan`]: plan id, the plan and its expiry (epoch ms).
    pub plan: Option<(String, Value, Option<i64>)>,
    /// With [`TransactionRole::Commit`] and [`TransactionRole::Execute`]: the provider operation the
    /// commit runs under.
    pub operation: Option<Value>,
}
