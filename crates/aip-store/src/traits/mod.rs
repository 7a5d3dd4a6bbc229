//! The storage traits the runtime talks to, one per aggregate: no SQL crosses them.
//!
//! Each aggregate (actions, approvals, escalations, jobs, events, sessions, receipts, replay claims, application records,
//! housekeeping, transactions, callback deliveries, conversations) has its own trait in its own file, so a feature adds a trait and a file here (and
//! its line in [`Store`]) without touching the others. [`Store`] is all of them together; the
//! runtime holds it as `Arc<dyn Store>`, on which every method resolves through the supertraits.
//! On a concrete store the method's trait must be in scope: `use aip_store::prelude::*;`.
//!
//! Times are epoch milliseconds supplied by the caller, so leases and expiries are testable with an
//! injected clock. Both backends implement every trait with one behaviour, proven by one shared test
//! suite.

mod action;
mod approval;
mod callback;
mod channel;
mod escalation;
mod event;
mod housekeeping;
mod job;
mod receipt;
mod record;
mod replay;
mod session;
mod settlement;
mod transaction;

pub use action::ActionStore;
pub use approval::ApprovalStore;
pub use callback::CallbackStore;
pub use channel::ChannelStore;
pub use escalation::EscalationStore;
pub use event::EventStore;
pub use housekeeping::HousekeepingStore;
pub use job::JobStore;
pub use receipt::ReceiptStore;
pub use record::RecordStore;
pub use replay::ReplayStore;
pub use session::SessionStore;
pub use settlement::SettlementStore;
pub use transaction::TransactionStore;

/// Durable state of an AIP runtime: every aggregate's trait. Hold it as `Arc<dyn Store>`; anything
/// implementing all the aggregate traits is a `Store`.
pub trait Store:
    ActionStore
    + ApprovalStore
    + EscalationStore
    + JobStore
    + EventStore
    + SessionStore
    + ReceiptStore
    + ReplayStore
    + RecordStore
    + HousekeepingStore
    + TransactionStore
    + CallbackStore
    + ChannelStore
    + SettlementStore
{
}

impl<T> Store for T where
    T: ActionStore
        + ApprovalStore
        + EscalationStore
        + JobStore
        + EventStore
        + SessionStore
        + ReceiptStore
        + ReplayStore
        + RecordStore
        + HousekeepingStore
        + TransactionStore
        + CallbackStore
        + ChannelStore
        + SettlementStore
{
}
