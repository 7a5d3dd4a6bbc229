//! Records the store reads and writes: promoted, typed columns plus JSON payloads.
//!
//! The store does not know the AIP wire model (`aip-core`): ids, tenant, principal, states, timestamps
//! (epoch milliseconds) and sequence numbers are typed columns; envelopes and bodies are
//! [`serde_json::Value`] payloads the runtime owns.

use serde_json::Value;

use crate::error::{StoreError, StoreResult};

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored (and wire) spelling.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// Parses the stored spelling.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

mod callback;
mod channel;
mod governance;
mod retention;
mod settlement;
mod transaction;
pub use callback::*;
pub use channel::*;
pub use governance::*;
pub use retention::*;
pub use settlement::*;
pub use transaction::*;

string_enum!(
    /// Operational action state (spec 11.5).
    ActionState {
        /// The runtime cannot tell the state.
        Unknown = "unknown",
        /// Admitted, not yet dispatched.
        Accepted = "accepted",
        /// Waiting in the work queue.
        Queued = "queued",
        /// A handler is executing it.
        Running = "running",
        /// A handler is streaming chunks.
        Streaming = "streaming",
        /// Waiting for an approval decision.
        PendingApproval = "pending_approval",
        /// Cancellation was requested and is not yet confirmed.
        Cancelling = "cancelling",
        /// Terminal: cancellation confirmed.
        Cancelled = "cancelled",
        /// Terminal: completed.
        Completed = "completed",
        /// Terminal: failed.
        Failed = "failed",
        /// Terminal: deadline passed.
        Expired = "expired",
        /// Terminal: retries exhausted.
        DeadLettered = "dead_lettered",
    }
);

impl ActionState {
    /// Whether an action in this state holds a slot of a concurrency quota ([`RunningQuota`]):
    /// it is unfinished and not waiting for an approval.
    pub fn counts_against_quota(self) -> bool {
        matches!(
            self,
            ActionState::Accepted
                | ActionState::Queued
                | ActionState::Running
                | ActionState::Streaming
                | ActionState::Cancelling
        )
    }

    /// Whether the state is terminal for the action record (spec 11.5).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            ActionState::Cancelled
                | ActionState::Completed
                | ActionState::Failed
                | ActionState::Expired
                | ActionState::DeadLettered
        )
    }
}

string_enum!(
    /// Session state (spec 10.3).
    SessionState {
        /// Created by a handshake.
        New = "new",
        /// Negotiated and usable.
        Active = "active",
        /// Work queued.
        Queued = "queued",
        /// Work in progress.
        Processing = "processing",
        /// Streaming output.
        Streaming = "streaming",
        /// Waiting for a human.
        WaitingForHuman = "waiting_for_human",
        /// Completed.
        Completed = "completed",
        /// Failed.
        Failed = "failed",
        /// Cancelled.
        Cancelled = "cancelled",
        /// Terminal: settled.
        Settled = "settled",
    }
);

impl SessionState {
    /// Whether the state is terminal (spec 10.3: a settled session is terminal).
    pub fn is_terminal(self) -> bool {
        self == SessionState::Settled
    }

    /// Whether `self -> to` is a transition of the session state machine (spec 10.3).
    pub fn can_transition_to(self, to: SessionState) -> bool {
        use SessionState::*;
        match self {
            New => matches!(to, Active),
            Active => matches!(to, Queued | Processing | Cancelled),
            Queued => matches!(to, Processing | Cancelled | Failed),
            Processing => matches!(
                to,
                Streaming | WaitingForHuman | Completed | Failed | Cancelled
            ),
            Streaming => matches!(to, WaitingForHuman | Completed | Failed | Cancelled),
            WaitingForHuman => matches!(to, Processing | Completed | Failed | Cancelled),
            Completed | Failed | Cancelled => matches!(to, Settled),
            Settled => false,
        }
    }
}

string_enum!(
    /// What a duplicate idempotency key does (spec 9.5).
    CollisionBehavior {
        /// Any duplicate returns the original action and result, whatever its input.
        ReturnOriginalResult = "return_original_result",
        /// Any duplicate of a live reservation is a conflict.
        RejectConflict = "reject_conflict",
        /// A duplicate returns the original only when its canonical input hash matches; else a conflict.
        RevalidateInputHash = "revalidate_input_hash",
    }
);

string_enum!(
    /// State of a queued job.
    JobState {
        /// Waiting to be claimed (at or after its available time).
        Ready = "ready",
        /// Held by a worker under a lease.
        Leased = "leased",
        /// Finished.
        Done = "done",
        /// Given up: attempts exhausted or failed without retry.
        Dead = "dead",
    }
);

/// Which backend a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Embedded SQLite.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

impl Backend {
    /// Lower-case name (`sqlite`, `postgres`).
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A bounded list size (spec 16.4: between 1 and 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit(u32);

impl Limit {
    /// The largest limit any list accepts (spec 16.4).
    pub const MAX: u32 = 1000;

    /// Checks `1 <= n <= 1000`.
    pub fn new(n: u32) -> StoreResult<Self> {
        if (1..=Self::MAX).contains(&n) {
            Ok(Limit(n))
        } else {
            Err(StoreError::InvalidInput("limit must be between 1 and 1000"))
        }
    }

    /// The maximum (1000).
    pub fn max() -> Self {
        Limit(Self::MAX)
    }

    /// The value.
    pub fn get(self) -> u32 {
        self.0
    }

    pub(crate) fn as_i64(self) -> i64 {
        i64::from(self.0)
    }
}

/// One page of a list, with the opaque cursor to continue after its last item (spec 16.2).
#[derive(Debug, Clone)]
pub struct Page<T> {
    /// The items, oldest first.
    pub items: Vec<T>,
    /// Continue after the last item with this cursor; when `items` is empty, the cursor passed in
    /// (or a cursor at the start) so a follower can keep polling.
    pub next_cursor: String,
}

/// A worker identity; a fresh one is made on every boot so a restarted process never settles work
/// fenced to its predecessor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerId(String);

impl WorkerId {
    /// A new random worker id (UUID v7, time-ordered), unique per process boot.
    pub fn fresh() -> Self {
        WorkerId(uuid::Uuid::now_v7().to_string())
    }

    /// A worker id of node `node` for this boot: `<node>/<boot epoch>`, the epoch a UUID v7, so
    /// a restarted node can tell its previous boots' leases from every other node's
    /// ([`JobStore::supersede_leases`](crate::JobStore::supersede_leases)).
    pub fn of_node(node: &str) -> Self {
        WorkerId(format!("{node}/{}", uuid::Uuid::now_v7()))
    }

    /// The id text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whose leases a booting node supersedes (see
/// [`JobStore::supersede_leases`](crate::JobStore::supersede_leases)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleLeases<'a> {
    /// Every lease: the caller holds the store exclusively (the embedded store's process lock),
    /// so no other process can be running the leased work.
    All,
    /// The leases of earlier boots of the node with this id (worker ids `<node>/<epoch>`).
    OfNode(&'a str),
}

/// An action to admit.
#[derive(Debug, Clone)]
pub struct NewAction {
    /// The action id, unique within its tenant (another tenant's ids neither conflict nor show,
    /// spec 22.6).
    pub action_id: String,
    /// Owning tenant (from trusted configuration, spec 22.6).
    pub tenant: String,
    /// Owning principal.
    pub principal: String,
    /// Session, if any.
    pub session_id: Option<String>,
    /// Capability id.
    pub capability: String,
    /// Correlation id, if any.
    pub correlation_id: Option<String>,
    /// Invocation mode (`sync`, `async`, `streaming`).
    pub mode: String,
    /// Initial state (usually `accepted` or `queued`).
    pub state: ActionState,
    /// Canonical input hash, if computed.
    pub input_hash: Option<String>,
    /// Immutable deadline, epoch ms.
    pub deadline_ms: Option<i64>,
    /// Admission time, epoch ms.
    pub created_at_ms: i64,
    /// The admitted request (envelope or body) as the runtime wants it retained.
    pub request: Value,
}

/// A stored action.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionRecord {
    /// The action id.
    pub action_id: String,
    /// Owning tenant.
    pub tenant: String,
    /// Owning principal.
    pub principal: String,
    /// Session, if any.
    pub session_id: Option<String>,
    /// Capability id.
    pub capability: String,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// Invocation mode.
    pub mode: String,
    /// Current state.
    pub state: ActionState,
    /// Idempotency scope this action reserved, if any.
    pub idempotency_scope: Option<String>,
    /// Idempotency key this action reserved, if any.
    pub idempotency_key: Option<String>,
    /// Canonical input hash.
    pub input_hash: Option<String>,
    /// Deadline, epoch ms.
    pub deadline_ms: Option<i64>,
    /// Admission time, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// Incremented by every transition.
    pub version: i64,
    /// The admitted request.
    pub request: Value,
    /// The stored result (set with a transition).
    pub result: Option<Value>,
}

/// How many non-terminal actions are in one state and mode (a session's activity, spec 10.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveActions {
    /// Their state.
    pub state: ActionState,
    /// Their mode as stored (`sync`, `async`, `streaming`).
    pub mode: String,
    /// How many.
    pub count: u64,
}

/// An idempotency reservation request (spec 9.5), reserved atomically with the action row.
#[derive(Debug, Clone)]
pub struct IdempotencyClaim {
    /// The composed key scope (the runtime folds the spec 9.5 scope, tenant, principal, capability
    /// or external account into this string); opaque to the store.
    pub scope: String,
    /// The client's idempotency key.
    pub key: String,
    /// Canonical input hash of this invocation.
    pub input_hash: String,
    /// What a duplicate does.
    pub behavior: CollisionBehavior,
    /// When the reservation lapses, epoch ms; after that the key may be reserved anew.
    pub expires_at_ms: i64,
}

/// A stored idempotency reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRecord {
    /// Key scope.
    pub scope: String,
    /// Key.
    pub key: String,
    /// Unique id of this reservation.
    pub reservation_id: String,
    /// Canonical input hash of the owner.
    pub input_hash: String,
    /// The action that owns the key.
    pub action_id: String,
    /// Reservation time, epoch ms.
    pub created_at_ms: i64,
    /// Expiry, epoch ms.
    pub expires_at_ms: i64,
}

/// A job to queue for asynchronous work.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Job id (unique).
    pub job_id: String,
    /// Queue name (`actions`, `callbacks`, ...).
    pub queue: String,
    /// The action the job works on, if any.
    pub action_id: Option<String>,
    /// Tenant, for operators.
    pub tenant: String,
    /// Earliest claim time, epoch ms.
    pub available_at_ms: i64,
    /// Claims allowed before the job is given up.
    pub max_attempts: u32,
    /// Job payload.
    pub payload: Value,
}

/// Proof of lease ownership carried by every fenced write (spec 13.4, 17.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The leased job.
    pub job_id: String,
    /// The worker holding the lease.
    pub worker_id: WorkerId,
    /// The fencing token issued with the lease; strictly increasing per job.
    pub token: u64,
}

/// A held lease on a job.
#[derive(Debug, Clone)]
pub struct Lease {
    /// The fence to pass to every write made under this lease.
    pub fence: Fence,
    /// Queue name.
    pub queue: String,
    /// The job's tenant (with `action_id`, the action's key).
    pub tenant: String,
    /// The action, if any.
    pub action_id: Option<String>,
    /// This claim's attempt number (1 for the first claim).
    pub attempt: u32,
    /// Lease expiry, epoch ms.
    pub expires_at_ms: i64,
    /// Job payload.
    pub payload: Value,
}

/// An event to append (spec 16.1).
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// Event id (unique).
    pub event_id: String,
    /// Namespaced kind (`aip.action.accepted`, ...).
    pub kind: String,
    /// Tenant audience.
    pub tenant: String,
    /// Principal audience; `None` means tenant-wide readers only.
    pub principal: Option<String>,
    /// Session, if any.
    pub session_id: Option<String>,
    /// Action, if any.
    pub action_id: Option<String>,
    /// Correlation id, if any.
    pub correlation_id: Option<String>,
    /// Occurrence time, epoch ms.
    pub occurred_at_ms: i64,
    /// Event data, already safe for its audience.
    pub data: Value,
}

/// A stored event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// Per-store monotonic sequence (commit order); not a cursor.
    pub sequence: u64,
    /// Event id.
    pub event_id: String,
    /// Kind.
    pub kind: String,
    /// Tenant.
    pub tenant: String,
    /// Principal.
    pub principal: Option<String>,
    /// Session.
    pub session_id: Option<String>,
    /// Action.
    pub action_id: Option<String>,
    /// Correlation id.
    pub correlation_id: Option<String>,
    /// Occurrence time, epoch ms.
    pub occurred_at_ms: i64,
    /// Data.
    pub data: Value,
}

/// The reader scope of an event list (spec 16.2, 16.3). The runtime fills it from the authenticated
/// reader; a cursor is only valid for the scope it was issued under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Tenant (required visibility bound).
    pub tenant: String,
    /// Only events addressed to this principal; `None` for tenant-wide readers.
    pub principal: Option<String>,
    /// Only this action's events.
    pub action_id: Option<String>,
    /// Only this session's events.
    pub session_id: Option<String>,
    /// Only events of these kinds (all kinds when empty); at most [`EventQuery::MAX_KINDS`].
    pub kinds: Vec<String>,
}

impl EventQuery {
    /// Most kinds one query may filter on.
    pub const MAX_KINDS: usize = 32;
}

/// A chunk to append (spec 11.6).
#[derive(Debug, Clone)]
pub struct NewChunk {
    /// The action's tenant.
    pub tenant: String,
    /// The action.
    pub action_id: String,
    /// Strictly increasing per action.
    pub sequence: u64,
    /// Chunk kind (`data`, `progress`, ..., `done`).
    pub kind: String,
    /// The chunk (body or envelope) as the runtime retains it.
    pub data: Value,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
}

/// A stored chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRecord {
    /// The action.
    pub action_id: String,
    /// Sequence.
    pub sequence: u64,
    /// Kind.
    pub kind: String,
    /// Data.
    pub data: Value,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
}

/// What appending a chunk did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkAppend {
    /// Stored.
    Inserted,
    /// The same chunk was already stored (tolerated duplicate, spec 11.6).
    Duplicate,
}

/// A receipt to append to its chain (spec 18.1). The runtime computes the hashes; the store checks
/// that `previous_hash` is the chain's last hash so concurrent writers cannot fork a chain.
#[derive(Debug, Clone)]
pub struct NewReceipt {
    /// Receipt id (unique).
    pub receipt_id: String,
    /// Chain id.
    pub chain_id: String,
    /// Tenant.
    pub tenant: String,
    /// Principal.
    pub principal: Option<String>,
    /// Action, if any.
    pub action_id: Option<String>,
    /// Receipt type (`request_received`, ...).
    pub receipt_type: String,
    /// This receipt's hash.
    pub hash: String,
    /// The previous receipt's hash; `None` for the first receipt of a chain.
    pub previous_hash: Option<String>,
    /// Time, epoch ms.
    pub created_at_ms: i64,
    /// The full receipt.
    pub body: Value,
}

/// A stored receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiptRecord {
    /// Receipt id.
    pub receipt_id: String,
    /// Chain id.
    pub chain_id: String,
    /// Position in the chain, from 0.
    pub position: u64,
    /// Tenant.
    pub tenant: String,
    /// Principal.
    pub principal: Option<String>,
    /// Action.
    pub action_id: Option<String>,
    /// Receipt type.
    pub receipt_type: String,
    /// Hash.
    pub hash: String,
    /// Previous hash.
    pub previous_hash: Option<String>,
    /// Time, epoch ms.
    pub created_at_ms: i64,
    /// The full receipt.
    pub body: Value,
}

/// An action lifecycle transition: compare-and-set on the current state (spec 11.5).
#[derive(Debug, Clone)]
pub struct Transition {
    /// The action's tenant: with `action_id` the action's key (ids are unique per tenant, spec 22.6).
    pub tenant: String,
    /// The action.
    pub action_id: String,
    /// States the action must currently be in.
    pub from: Vec<ActionState>,
    /// The new state.
    pub to: ActionState,
    /// A result to store with the transition (replaces any stored result).
    pub result: Option<Value>,
    /// Events appended in the same transaction.
    pub events: Vec<NewEvent>,
    /// Receipts appended in the same transaction.
    pub receipts: Vec<NewReceipt>,
    /// When set, the write is fenced: rejected with [`StoreError::StaleLease`] unless this fence
    /// still owns an unexpired lease.
    pub fence: Option<Fence>,
    /// With a fence: mark the leased job done in the same transaction.
    pub finish_job: bool,
    /// Time, epoch ms.
    pub now_ms: i64,
    /// The provider operation this action's provider reported (spec 13.6, 19.3): recorded on its
    /// transaction in the same transaction, when the action is still that transaction's commit.
    pub operation: Option<ReportedOperation>,
}

/// A provider operation reference a commit's provider reported with its outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportedOperation {
    /// The transaction (of the transition's tenant).
    pub transaction_id: String,
    /// The wire `ProviderOperationRef`.
    pub operation: Value,
}

/// Durable admission: everything written in ONE transaction (design.md "Durability").
#[derive(Debug, Clone)]
pub struct Admission {
    /// The action row.
    pub action: NewAction,
    /// Idempotency reservation, when the invocation carries a key.
    pub idempotency: Option<IdempotencyClaim>,
    /// Receipts (e.g. `request_received`, `action_accepted`).
    pub receipts: Vec<NewReceipt>,
    /// Events (e.g. `aip.action.accepted`).
    pub events: Vec<NewEvent>,
    /// Queue entry: asynchronous work waits in it; sync work holds it leased (see `lease`).
    pub job: Option<NewJob>,
    /// Takes the job's first lease in the admission transaction itself (needs `job`). Sync work is
    /// run at once by the admitting node: leasing it here fences that run like queued work and keeps
    /// other nodes' recovery off it while the lease lives, without a second transaction.
    pub lease: Option<AdmissionLease>,
    /// The approval workflow the action waits for (spec 12.2), created with it; the action is
    /// admitted `pending_approval` and `job` is then the approval's expiry timer.
    pub approval: Option<NewApproval>,
    /// The transaction the action creates, claims or joins (spec 13), linked in the same
    /// transaction; a lost compare-and-set refuses the whole admission.
    pub transaction: Option<TransactionLink>,
    /// Further jobs queued with the admission (timers of other queues, such as a commit's
    /// reconciliation timer), never leased by it.
    pub timers: Vec<NewJob>,
    /// The action's callback (spec 17): each later transition into a state it covers queues a
    /// delivery in that transition's transaction.
    pub callback: Option<CallbackSubscription>,
    /// Audit events of the admission decision (spec 18.3), committed with it (never without it).
    pub audit: Vec<NewAudit>,
    /// Concurrency quotas the admission must fit (spec 22.8), checked in its transaction.
    pub quota: RunningQuota,
}

/// Most unfinished actions (accepted, queued, running, streaming, cancelling; not those waiting
/// for an approval) a principal and its tenant may hold at once, the new one included; `None`:
/// no bound. Checked inside the admission's transaction, serialized per principal and per tenant
/// on PostgreSQL, so concurrent admissions on any node never overshoot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunningQuota {
    /// The principal's bound.
    pub principal: Option<u32>,
    /// The tenant's bound (all its principals together).
    pub tenant: Option<u32>,
    /// The store's bound on actions waiting for a worker (`queued`), every tenant together: a
    /// queued admission past it is refused. Not serialized: racing admissions may pass it by at
    /// most their own number.
    pub queued: Option<u32>,
}

/// The first lease of an admitted job, taken by the admitting worker.
#[derive(Debug, Clone)]
pub struct AdmissionLease {
    /// The worker that runs the job.
    pub worker: WorkerId,
    /// Lease length from the admission time, ms (positive).
    pub lease_ms: i64,
}

/// What admission did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AdmissionOutcome {
    /// The action was admitted and owns its key (if any).
    Admitted {
        /// The new action.
        record: ActionRecord,
        /// The job's lease when the admission asked for one ([`Admission::lease`]).
        lease: Option<Lease>,
    },
    /// The key is owned by an earlier action whose outcome is to be returned (`cached`, spec 11.4);
    /// nothing was written and nothing may be dispatched.
    Replayed {
        /// The owner action, in its current state.
        original: ActionRecord,
        /// The live reservation.
        reservation: IdempotencyRecord,
    },
    /// The key is owned by an earlier action and this invocation conflicts with it; nothing was
    /// written.
    Conflict {
        /// The live reservation.
        reservation: IdempotencyRecord,
    },
}

/// Filters of an action list; `tenant` (and `principal` when set) bound visibility.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionQuery {
    /// Tenant.
    pub tenant: String,
    /// Only actions owned by this principal; `None` for tenant-wide readers.
    pub principal: Option<String>,
    /// Only this session's actions.
    pub session_id: Option<String>,
    /// Only actions in this state.
    pub state: Option<ActionState>,
    /// Only this capability.
    pub capability: Option<String>,
    /// Only actions linked to this transaction (its dry runs, plan, commits, reconciliations and
    /// compensations, spec 13).
    pub transaction_id: Option<String>,
}

/// A session to create (spec 10).
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Session id.
    pub session_id: String,
    /// Tenant.
    pub tenant: String,
    /// Initiator principal.
    pub principal: String,
    /// Peer.
    pub peer: Option<String>,
    /// Initial state.
    pub state: SessionState,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Expiry, epoch ms.
    pub expires_at_ms: Option<i64>,
    /// Session view data (negotiated profile, links, ...).
    pub data: Value,
}

/// A stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    /// Session id.
    pub session_id: String,
    /// Tenant.
    pub tenant: String,
    /// Initiator principal.
    pub principal: String,
    /// Peer.
    pub peer: Option<String>,
    /// State.
    pub state: SessionState,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Last change, epoch ms.
    pub updated_at_ms: i64,
    /// Expiry, epoch ms.
    pub expires_at_ms: Option<i64>,
    /// Session view data.
    pub data: Value,
}

/// A session transition: compare-and-set on the current state; the store also enforces the spec 10.3
/// state machine.
#[derive(Debug, Clone)]
pub struct SessionTransition {
    /// Session id.
    pub session_id: String,
    /// States the session must currently be in.
    pub from: Vec<SessionState>,
    /// New state.
    pub to: SessionState,
    /// Replacement view data, if any.
    pub data: Option<Value>,
    /// Events appended in the same transaction.
    pub events: Vec<NewEvent>,
    /// Time, epoch ms.
    pub now_ms: i64,
}

/// Filters of a session list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionQuery {
    /// Tenant.
    pub tenant: String,
    /// Only this principal's sessions; `None` for tenant-wide readers.
    pub principal: Option<String>,
    /// Only sessions in this state.
    pub state: Option<SessionState>,
}

/// Result of a message-id replay claim (spec 22.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplayClaim {
    /// First sighting within the window: proceed.
    Claimed,
    /// Already claimed within the window: a replay, reject it.
    Replayed,
}

/// An audit event to append (spec 18.3).
#[derive(Debug, Clone)]
pub struct NewAudit {
    /// Audit event id.
    pub audit_id: String,
    /// Tenant.
    pub tenant: String,
    /// Actor principal.
    pub actor: String,
    /// Action label (`session.closed`, ...).
    pub action_label: String,
    /// The action the event is about, if any (a filter of audit queries).
    pub action_id: Option<String>,
    /// The session the event is about, if any (a filter of audit queries).
    pub session_id: Option<String>,
    /// Time, epoch ms.
    pub occurred_at_ms: i64,
    /// Redacted data (identity context, ids).
    pub data: Value,
}

/// A stored audit event.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    /// Per-store monotonic sequence.
    pub sequence: u64,
    /// Audit event id.
    pub audit_id: String,
    /// Tenant.
    pub tenant: String,
    /// Actor.
    pub actor: String,
    /// Action label.
    pub action_label: String,
    /// The action the event is about, if any.
    pub action_id: Option<String>,
    /// The session the event is about, if any.
    pub session_id: Option<String>,
    /// Time, epoch ms.
    pub occurred_at_ms: i64,
    /// Data.
    pub data: Value,
}

/// Filters of an audit list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Tenant.
    pub tenant: String,
    /// Only this actor's events; `None` for tenant-wide readers.
    pub actor: Option<String>,
    /// Only events about this action.
    pub action_id: Option<String>,
    /// Only events about this session.
    pub session_id: Option<String>,
    /// Only events at or after this time, epoch ms.
    pub from_ms: Option<i64>,
    /// Only events at or before this time, epoch ms.
    pub to_ms: Option<i64>,
    /// Only events about actions linked to this transaction (spec 13).
    pub transaction_id: Option<String>,
}

/// A generic application record (e.g. the demo booking capability's bookings).
#[derive(Debug, Clone, PartialEq)]
pub struct AppRecord {
    /// Collection name.
    pub collection: String,
    /// Record id, unique within the collection.
    pub record_id: String,
    /// Tenant.
    pub tenant: String,
    /// Creation time, epoch ms.
    pub created_at_ms: i64,
    /// Body.
    pub body: Value,
}

/// How far back history is kept (spec 16.2: cursors are retention-bound).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionCutoffs {
    /// Purge events that occurred before this time, epoch ms; `None` keeps them.
    pub events_before_ms: Option<i64>,
    /// Purge the chunks of actions that ended before this time, epoch ms; `None` keeps them.
    pub chunks_before_ms: Option<i64>,
}

/// What a history purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryPurge {
    /// Events removed.
    pub events: u64,
    /// Chunks removed.
    pub chunks: u64,
}

/// What a purge of expired entries removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Expired replay claims.
    pub replay_claims: u64,
    /// Expired idempotency reservations.
    pub idempotency_reservations: u64,
    /// Expired or consumed resume tokens.
    pub resume_tokens: u64,
}
