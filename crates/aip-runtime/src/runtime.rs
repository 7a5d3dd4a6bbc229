//! The runtime's one struct: its store, admitted capabilities, trusted configuration and the few
//! process-local services features share. Only this file touches `Runtime`'s fields; features reach
//! them through the accessors below.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use aip_core::{Principal, ProfileId};
use aip_store::{Store, WorkerId};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::admission::policy::{ApprovalGate, PolicyGate};
use crate::error::RuntimeError;
use crate::registry::Registry;

/// Settings the runtime takes from trusted configuration.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The provider principal (manifest `agent`, actor of runtime receipts).
    pub agent: Principal,
    /// Deadline of an action without `timeout_ms`.
    pub default_timeout_ms: u64,
    /// Largest accepted `timeout_ms`.
    pub max_timeout_ms: u64,
    /// Largest list page (1..=1000).
    pub max_list_limit: u32,
    /// Page size when the client names none.
    pub default_list_limit: u32,
    /// Longest bounded wait (≤ 30000 ms).
    pub max_wait_ms: u64,
    /// Workers per job queue.
    pub async_workers: u32,
    /// Lease length of claimed work.
    pub lease_ms: u64,
    /// Claims of an action's job before it is given up (`dead_lettered`); at least 1.
    pub max_attempts: u32,
    /// Envelope authenticity and replay policy (spec 22.2-22.3).
    pub signatures: SignaturePolicy,
    /// Bounds on decoded envelopes.
    pub decode_limits: aip_core::Limits,
    /// Limits advertised in the manifest.
    pub manifest_limits: Value,
    /// The profiles this node serves: the bindings that are enabled register theirs (spec 23.3). The
    /// manifest and the handshake advertise and negotiate exactly these.
    pub profiles: Vec<ProfileId>,
    /// The configured principal directory, as the trusted resolver (spec 12.1): each principal's
    /// resolver keys (`principal:<id>`, `role:<name>`, `group:<name>`), by id. Filters approval
    /// lists by approver.
    pub directory: HashMap<String, Vec<String>>,
    /// Every principal this node authenticates (configured principals, peers, webhook
    /// subscriptions) by id, as configured now: an approved action's requester is revalidated
    /// against it just before dispatch (spec 12.5). Empty: an embedded runtime without an identity
    /// configuration, which revalidates against the scopes admitted with the action.
    pub principals: HashMap<String, crate::caller::Caller>,
    /// Declared resources (spec 9.7), checked with `resource::check_resources`.
    pub resources: Vec<crate::resource::ResourceEntry>,
    /// How long after a commit's admission the runtime first reconciles it if its outcome is then
    /// unknown (spec 13.6; the commit itself is never retried); 0: only on request.
    pub reconcile_after_ms: u64,
    /// Delegation policy and peers (spec 14).
    pub delegation: crate::delegation::DelegationPolicy,
    /// Callback policy (spec 17).
    pub callbacks: crate::callback::CallbackPolicy,
    /// Channel message policy (spec 15).
    pub channels: crate::channel::ChannelPolicy,
    /// How long events and chunks are kept (spec 16.2).
    pub retention: crate::retention::RetentionPolicy,
    /// The node's signing key (its `did:key` is the manifest agent's `did`): signs callback
    /// deliveries. `None`: deliveries go unsigned.
    pub node_key: Option<Arc<ed25519_dalek::SigningKey>>,
    /// How authentication refusals are aggregated in the audit log (spec 18.3).
    pub refusals: crate::security::refusals::RefusalPolicy,
    /// Rate limits on admitted work per principal and tenant (spec 22.8).
    pub rates: crate::security::rate::RatePolicy,
    /// Token buckets on requests that admit no action (reads, handshakes, decisions; spec 22.8),
    /// apart from the admission buckets so polling cannot starve a principal's actions.
    pub read_rates: crate::security::rate::RatePolicy,
    /// Concurrency quotas on unfinished actions per principal and tenant (spec 22.8).
    pub quotas: crate::security::rate::QuotaPolicy,
    /// Who this node is across restarts, so that a restart takes back its own earlier leases at
    /// once instead of waiting for them to lapse (spec 11, recovery).
    pub boot: BootIdentity,
}

/// A node's identity across its boots.
#[derive(Debug, Clone, Default)]
pub struct BootIdentity {
    /// The node's stable id: its workers are `<node_id>/<boot epoch>`, and at start the leases of
    /// its earlier boots are superseded. `None`: a fresh identity each boot (leases lapse).
    pub node_id: Option<String>,
    /// The process holds the store exclusively (the embedded store's lock): at start every
    /// lease is superseded, whoever held it, since no other process can be running its work.
    pub store_exclusive: bool,
}

/// Spec 22.2-22.3 settings.
#[derive(Debug, Clone, Default)]
pub struct SignaturePolicy {
    /// Refuse unsigned envelopes.
    pub require_signed: bool,
    /// Largest accepted `|sent_at - now|`, for every envelope, signed or not.
    pub max_skew_ms: u64,
    /// How long message ids stay claimed.
    pub replay_window_ms: u64,
    /// did:key → id of the principal it speaks for.
    pub trusted_signers: HashMap<String, String>,
}

/// The AIP runtime over one store.
pub struct Runtime {
    store: Arc<dyn Store>,
    registry: Registry,
    config: RuntimeConfig,
    policy: Arc<dyn PolicyGate>,
    running: Mutex<HashMap<(String, String), RunningHandler>>,
    /// Every job this node's workers hold a lease on, by job id, and whether a drain released it.
    held: Mutex<HashMap<String, (aip_store::Fence, bool)>>,
    worker_id: WorkerId,
    work_ready: Notify,
    action_waiters: crate::read::ActionWaiters,
    shutdown: CancellationToken,
    /// Set when a drain began: admission refuses new work (`aip.runtime.draining`).
    draining: std::sync::atomic::AtomicBool,
    /// Action runs in progress on this node, from handler start to commit.
    runs: Arc<std::sync::atomic::AtomicUsize>,
    callbacks_ready: Notify,
    publisher: OnceLock<crate::callback::Publisher>,
    callback_client: OnceLock<reqwest::Client>,
    refusal_log: crate::security::refusals::RefusalLog,
    rate_limits: crate::security::rate::RateLimits,
    read_limits: crate::security::rate::RateLimits,
    /// Declared resources now: the configured ones, and what dynamic sources offer.
    pub(crate) resources: std::sync::RwLock<Arc<Vec<crate::resource::ResourceEntry>>>,
    /// Renderers of callback profiles that shape their own deliveries, by profile.
    pub(crate) renderers: std::sync::RwLock<
        std::collections::BTreeMap<String, Arc<dyn crate::callback::subscribe::DeliveryRenderer>>,
    >,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("worker_id", &self.worker_id)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A runtime over `store` with an admitted capability `registry` and the default policy gate
    /// (configured scopes, and approvals where a capability's tiers require them). Call
    /// [`Runtime::start`] to recover unfinished work and run the workers.
    pub fn new(store: Arc<dyn Store>, registry: Registry, config: RuntimeConfig) -> Arc<Self> {
        Self::with_policy(store, registry, config, Arc::new(ApprovalGate))
    }

    /// [`Runtime::new`] with another admission policy gate (spec 11.3 step 8).
    pub fn with_policy(
        store: Arc<dyn Store>,
        registry: Registry,
        config: RuntimeConfig,
        policy: Arc<dyn PolicyGate>,
    ) -> Arc<Self> {
        let rate_limits = crate::security::rate::RateLimits::new(config.rates.clone());
        let read_limits = crate::security::rate::RateLimits::new(config.read_rates.clone());
        let worker_id = config
            .boot
            .node_id
            .as_deref()
            .map_or_else(WorkerId::fresh, WorkerId::of_node);
        Arc::new(Self {
            store,
            registry,
            resources: std::sync::RwLock::new(Arc::new(config.resources.clone())),
            renderers: std::sync::RwLock::default(),
            config,
            policy,
            running: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            worker_id,
            work_ready: Notify::new(),
            action_waiters: crate::read::ActionWaiters::default(),
            shutdown: CancellationToken::new(),
            draining: std::sync::atomic::AtomicBool::new(false),
            runs: Arc::default(),
            callbacks_ready: Notify::new(),
            publisher: OnceLock::new(),
            callback_client: OnceLock::new(),
            refusal_log: crate::security::refusals::RefusalLog::default(),
            rate_limits,
            read_limits,
        })
    }

    /// Recover work a crash left unfinished, then start the workers of every job kind.
    pub async fn start(self: &Arc<Self>) -> Result<(), RuntimeError> {
        self.supersede_earlier_boots().await?;
        self.recover().await?;
        crate::worker::start(self, Arc::new(crate::action::job::ActionJobs));
        crate::worker::start(self, Arc::new(crate::approval::expiry::ApprovalTimers));
        crate::worker::start(self, Arc::new(crate::escalation::EscalationTimers));
        crate::worker::start(
            self,
            Arc::new(crate::transaction::reconcile::ReconcileTimers),
        );
        crate::worker::start(self, Arc::new(crate::callback::CallbackDeliveries));
        crate::worker::start(
            self,
            Arc::new(crate::delegation::follow::DelegationFollowUps),
        );
        self.schedule_housekeeping(crate::clock::now_ms()).await?;
        crate::worker::start(self, Arc::new(crate::retention::Housekeeping));
        self.start_refusal_flusher();
        Ok(())
    }

    /// Takes back the leases a dead process of this node (or, with the store held exclusively,
    /// any process) still held, so its work is claimable now: fenced as ever, so a late write from
    /// a process somehow alive is refused.
    async fn supersede_earlier_boots(&self) -> Result<(), RuntimeError> {
        let stale = match (&self.config.boot.node_id, self.config.boot.store_exclusive) {
            (_, true) => aip_store::StaleLeases::All,
            (Some(node), false) => aip_store::StaleLeases::OfNode(node),
            (None, false) => return Ok(()),
        };
        let lapsed = self
            .store
            .supersede_leases(stale, &self.worker_id, crate::clock::now_ms())
            .await?;
        if lapsed > 0 {
            tracing::info!(
                leases = lapsed,
                worker = %self.worker_id,
                "took back the leases of earlier boots: their work is claimable now"
            );
        }
        Ok(())
    }

    /// Begins a graceful drain: new work is refused from now on (`aip.runtime.draining`, retryable;
    /// reads are still served) and the workers stop claiming jobs. Handlers already running go on;
    /// [`Runtime::drained`] waits for them.
    pub fn begin_drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.shutdown.cancel();
    }

    /// Whether a drain began.
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits up to `grace` for the handlers running on this node to finish and commit, and up to
    /// `mutation_grace` (at least `grace`) for a mutation whose release would leave an uncertain
    /// outcome. Handlers still running then are released (spec 11): each lease is given back in
    /// the store, claimable at once by a restarted node or another one (the attempt is not
    /// counted), and the handler is interrupted through its cancellation token; nothing it returns
    /// after that is committed, so the action is never marked cancelled (a cancel is the user's
    /// decision) and its next claim follows its retry safety as recovered work does: re-run when
    /// safe to retry, an uncertain outcome for a mutation.
    pub async fn drained(
        &self,
        grace: std::time::Duration,
        mutation_grace: std::time::Duration,
    ) -> Drain {
        use std::sync::atomic::Ordering::SeqCst;
        let started = tokio::time::Instant::now();
        let at_start = self.runs.load(SeqCst);
        let mut released = Vec::new();
        let phases = [
            (started + grace, false),
            (started + mutation_grace.max(grace), true),
        ];
        for (deadline, mutations_too) in phases {
            while !self.idle() {
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            if self.idle() {
                break;
            }
            released.extend(self.release_running(mutations_too).await);
            self.release_held(mutations_too).await;
        }
        Drain {
            finished: at_start.saturating_sub(released.len()),
            released,
        }
    }

    /// Nothing left that may still commit: no action run but released ones winding down (which
    /// commit nothing), and no leased job (a callback delivery, a timer) not released.
    fn idle(&self) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let runs = self.runs.load(SeqCst);
        let winding_down = self
            .running()
            .values()
            .filter(|h| h.released.load(SeqCst))
            .count();
        let held = self
            .held()
            .values()
            .filter(|(_, released)| !released)
            .count();
        runs <= winding_down && held == 0
    }

    /// Gives back the leases of held jobs not released yet (keeping those of running mutations
    /// unless `mutations_too`): a restarted node or another one claims them at once, and a late
    /// commit of this node is refused by the fence.
    async fn release_held(&self, mutations_too: bool) {
        use std::sync::atomic::Ordering::SeqCst;
        let kept: std::collections::HashSet<String> = if mutations_too {
            std::collections::HashSet::new()
        } else {
            self.running()
                .values()
                .filter(|h| h.mutation && !h.released.load(SeqCst))
                .filter_map(|h| h.fence.as_ref().map(|f| f.job_id.clone()))
                .collect()
        };
        let fences: Vec<aip_store::Fence> = self
            .held()
            .iter_mut()
            .filter(|(job, (_, released))| !released && !kept.contains(*job))
            .map(|(_, (fence, released))| {
                *released = true;
                fence.clone()
            })
            .collect();
        for fence in fences {
            self.give_back(&fence).await;
        }
    }

    /// Gives `fence`'s lease back in the store at the drain deadline; a lease already settled,
    /// given back or taken over needs nothing, and one that cannot be given back lapses instead.
    async fn give_back(&self, fence: &aip_store::Fence) {
        match self.store.release_job(fence, crate::clock::now_ms()).await {
            Ok(())
            | Err(aip_store::StoreError::StaleLease | aip_store::StoreError::NotFound { .. }) => {}
            Err(err) => {
                tracing::warn!(job = %fence.job_id, %err, "could not release a lease at the drain deadline; it lapses instead");
            }
        }
    }

    /// The held jobs; see [`Runtime::running`] for why a poisoned lock is still usable.
    fn held(&self) -> MutexGuard<'_, HashMap<String, (aip_store::Fence, bool)>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `fence` as held by this node until the returned guard drops (a worker holds it
    /// while it runs and settles the job).
    pub(crate) fn hold(&self, fence: &aip_store::Fence) -> HeldJob<'_> {
        self.held()
            .insert(fence.job_id.clone(), (fence.clone(), false));
        HeldJob {
            runtime: self,
            job_id: fence.job_id.clone(),
        }
    }

    /// Releases the running handlers not released yet (only those safe to run again unless
    /// `mutations_too`): the lease back in the store, then the handler interrupted.
    async fn release_running(&self, mutations_too: bool) -> Vec<(String, String)> {
        use std::sync::atomic::Ordering::SeqCst;
        let cut: Vec<(
            (String, String),
            Option<aip_store::Fence>,
            CancellationToken,
        )> = self
            .running()
            .iter()
            .filter(|(_, handler)| mutations_too || !handler.mutation)
            .filter(|(_, handler)| !handler.released.swap(true, SeqCst))
            .map(|(key, handler)| (key.clone(), handler.fence.clone(), handler.token.clone()))
            .collect();
        let mut released = Vec::with_capacity(cut.len());
        for (key, fence, token) in cut {
            if let Some(fence) = &fence {
                self.give_back(fence).await;
            }
            token.cancel();
            tracing::warn!(tenant = %key.0, action = %key.1, "drain deadline: lease released, handler interrupted");
            released.push(key);
        }
        released
    }

    pub(crate) fn quotas(&self) -> &crate::security::rate::QuotaPolicy {
        &self.config.quotas
    }

    pub(crate) fn rate_limits(&self) -> &crate::security::rate::RateLimits {
        &self.rate_limits
    }

    /// Charges one request that admits no action (a read, a handshake, a decision) to `caller`'s
    /// read buckets (spec 22.8): past them it is refused `aip.limit.rate_limited` (bucket
    /// `principal_reads` / `tenant_reads`), counted and audited like an admission's refusal.
    pub async fn check_read_rate(&self, caller: &crate::Caller) -> Result<(), RuntimeError> {
        let Err(limited) = self.read_limits.check(caller) else {
            return Ok(());
        };
        let bucket = if limited.bucket == "tenant" {
            "tenant_reads"
        } else {
            "principal_reads"
        };
        let err = limited.refusal(bucket);
        Err(self.audit_limit_refusal(caller, err, None).await)
    }

    /// Counts one action run until the returned guard drops.
    pub(crate) fn count_run(&self) -> RunGuard {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RunGuard(Arc::clone(&self.runs))
    }

    /// Stop claiming new work (in-flight leases lapse and are re-claimed after restart).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Resolves once [`Runtime::shutdown`] was called (for a binding's background tasks).
    pub async fn stopped(&self) {
        self.shutdown.cancelled().await;
    }

    /// The bounds every envelope is decoded under (bindings that decode first use the same).
    pub fn decode_limits(&self) -> &aip_core::Limits {
        &self.config.decode_limits
    }

    /// The store (for readiness probes).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The longest bounded wait a read may ask for (streams poll within it).
    pub fn max_wait_ms(&self) -> u64 {
        self.config.max_wait_ms
    }

    /// The profiles this node serves (spec 23.3).
    pub fn profiles(&self) -> &[ProfileId] {
        &self.config.profiles
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    pub(crate) fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    pub(crate) fn refusal_log(&self) -> &crate::security::refusals::RefusalLog {
        &self.refusal_log
    }

    pub(crate) fn policy(&self) -> &dyn PolicyGate {
        self.policy.as_ref()
    }

    pub(crate) fn worker_id(&self) -> &WorkerId {
        &self.worker_id
    }

    pub(crate) fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Wakes a worker: work was queued or a cancellation recorded.
    pub(crate) fn notify_work(&self) {
        self.work_ready.notify_one();
    }

    /// Bounded waits on single actions, woken when this node moves the action.
    pub(crate) fn action_waiters(&self) -> &crate::read::ActionWaiters {
        &self.action_waiters
    }

    /// Commits an action transition; this node's bounded waits on that action then re-read it.
    pub(crate) async fn transition_action(
        &self,
        transition: aip_store::Transition,
    ) -> aip_store::StoreResult<aip_store::ActionRecord> {
        let moved = self.store().transition_action(transition).await?;
        self.action_waiters.wake(&moved.tenant, &moved.action_id);
        // The transition may have queued a callback delivery (spec 17.3).
        self.callbacks_ready.notify_one();
        Ok(moved)
    }

    /// Commits an approval write; when it moved the governed action, that action's waits re-read
    /// it, and when it queued a job, a worker wakes for it.
    pub(crate) async fn write_approval(
        &self,
        write: aip_store::ApprovalWrite,
    ) -> aip_store::StoreResult<aip_store::ApprovalWritten> {
        let moved = write
            .action
            .as_ref()
            .map(|t| (t.tenant.clone(), t.action_id.clone()));
        let queued = write.job.is_some();
        let written = self.store().write_approval(write).await?;
        if matches!(written, aip_store::ApprovalWritten::Written(_)) {
            if let Some((tenant, action_id)) = moved {
                self.action_waiters.wake(&tenant, &action_id);
            }
            if queued {
                self.notify_work();
            }
        }
        Ok(written)
    }

    pub(crate) fn work_ready(&self) -> &Notify {
        &self.work_ready
    }

    /// Wakes a callback worker: a delivery may have been queued.
    pub(crate) fn callbacks_ready(&self) -> &Notify {
        &self.callbacks_ready
    }

    /// The node's signing key, when configured.
    pub(crate) fn node_key(&self) -> Option<&ed25519_dalek::SigningKey> {
        self.config.node_key.as_deref()
    }

    /// Installs the NATS publisher of callback deliveries (the NATS binding, once connected); a
    /// second call is ignored.
    pub fn set_callback_publisher(&self, publisher: Arc<dyn crate::callback::CallbackPublisher>) {
        let _already = self.publisher.set(publisher);
    }

    /// The HTTP client of callback deliveries (built once, with the callback policy's resolver).
    pub(crate) fn callback_client(&self) -> Result<&reqwest::Client, reqwest::Error> {
        if let Some(client) = self.callback_client.get() {
            return Ok(client);
        }
        let client = crate::callback::http_client(&self.config.callbacks)?;
        Ok(self.callback_client.get_or_init(|| client))
    }

    /// The publisher of NATS callback deliveries, when a binding installed one.
    pub(crate) fn callback_publisher(&self) -> Option<&crate::callback::Publisher> {
        self.publisher.get()
    }

    /// Lease length of claimed (and sync) work.
    pub(crate) fn lease_ms(&self) -> i64 {
        i64::try_from(self.config.lease_ms).unwrap_or(30_000)
    }

    /// The handlers running on this node, by (tenant, action id).
    pub(crate) fn running(&self) -> MutexGuard<'_, HashMap<(String, String), RunningHandler>> {
        // A poisoned lock only means another task panicked mid-insert; the map itself stays usable.
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A handler running on this node: how to interrupt it, the lease it runs under, and whether a
/// drain gave that lease back (then nothing it returns is committed).
pub(crate) struct RunningHandler {
    /// Cancels the handler (a user's cancel, or the drain's interrupt).
    pub(crate) token: CancellationToken,
    /// The lease of leased work; `None` for work that runs unleased.
    pub(crate) fence: Option<aip_store::Fence>,
    /// Set by the drain before it releases the lease and interrupts the handler.
    pub(crate) released: Arc<std::sync::atomic::AtomicBool>,
    /// A mutation whose release would settle as an uncertain outcome: the drain waits longer.
    pub(crate) mutation: bool,
}

/// A job lease held by one of this node's workers (see [`Runtime::hold`]).
pub(crate) struct HeldJob<'r> {
    runtime: &'r Runtime,
    job_id: String,
}

impl Drop for HeldJob<'_> {
    fn drop(&mut self) {
        self.runtime.held().remove(&self.job_id);
    }
}

/// What a drain did ([`Runtime::drained`]).
#[derive(Debug, Default)]
pub struct Drain {
    /// Handlers running at the signal that finished and committed.
    pub finished: usize,
    /// Handlers still running at their grace, released: (tenant, action id).
    pub released: Vec<(String, String)>,
}

/// One action run in progress (see [`Runtime::count_run`]).
pub(crate) struct RunGuard(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for RunGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
