//! Storage backends for the AIP runtime: SQLite (embedded default) and PostgreSQL.
//!
//! The runtime holds an `Arc<dyn Store>` and never sees SQL. [`Store`] is the sum of one trait per
//! aggregate (`traits/`, all in [`prelude`]). Both backends are one generic implementation,
//! `SqlStore<D>` over a dialect (`sql/`, one file per aggregate; the dialects in `sqlite/` and
//! `postgres/`), and pass one shared test suite (`tests/store_suite.rs`). Design rules
//! (`design.md`, "Durability"): every observable change is committed before it is acknowledged;
//! admission writes action, idempotency reservation, receipts, events and queue entry in one
//! transaction; leases carry fencing tokens; cursors are opaque and reader-scoped; migrations are
//! versioned and checksummed.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cursor;
mod db;
mod error;
mod migrate;
mod model;
mod postgres;
mod sql;
mod sqlite;
mod traits;
mod watch;

use std::sync::Arc;

pub use error::{StoreError, StoreResult};
pub use model::*;
pub use postgres::{PostgresOptions, PostgresStore};
pub use sql::CLAIM_PICKS;
pub use sqlite::{SqliteOptions, SqliteStore};
pub use traits::*;
pub use watch::ChangeWatch;

/// Every storage trait, for `use aip_store::prelude::*;`. A method called on a concrete store
/// (`SqliteStore`, `PostgresStore`) needs the aggregate trait that declares it in scope; on
/// `dyn Store` (or under a `Store` bound) it resolves through the supertraits.
pub mod prelude {
    pub use crate::traits::*;
}

/// Opens a store from a location: `postgres://…` / `postgresql://…` connects to PostgreSQL,
/// `sqlite://PATH` or a plain file path opens SQLite.
pub async fn open(location: &str) -> StoreResult<Arc<dyn Store>> {
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(location).await?));
    }
    let path = location.strip_prefix("sqlite://").unwrap_or(location);
    if path.is_empty() {
        return Err(StoreError::InvalidInput("empty SQLite path"));
    }
    Ok(Arc::new(SqliteStore::open(path).await?))
}
