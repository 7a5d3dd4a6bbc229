//! The closed set of storage failures the runtime can act on.

/// A storage failure. Each variant has one stable [`StoreError::code`]; `Display` text is for humans.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or failed to execute a statement.
    #[error("storage backend error: {0}")]
    Backend(String),
    /// The backend is busy (pool exhausted, lock timeout); the operation may be retried.
    #[error("storage is busy: {0}")]
    Unavailable(String),
    /// A stored value could not be decoded into its record type (a bug or a tampered database).
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A caller-supplied value is outside what the store accepts.
    #[error("invalid store input: {0}")]
    InvalidInput(&'static str),
    /// The named object does not exist.
    #[error("{kind} not found")]
    NotFound {
        /// What was looked up (`action`, `session`, `job`, ...).
        kind: &'static str,
    },
    /// An object with this id already exists.
    #[error("{kind} already exists")]
    Duplicate {
        /// What was inserted (`action`, `session`, `event`, ...).
        kind: &'static str,
    },
    /// A compare-and-set transition found the object in another state (spec 11.5, 10.3).
    #[error("state conflict: current state is {actual}")]
    StateConflict {
        /// The state the object is actually in.
        actual: String,
    },
    /// The object is in a terminal state and cannot change any more (spec 11.5).
    #[error("object is in terminal state {state}")]
    Terminal {
        /// The terminal state.
        state: String,
    },
    /// The requested transition is not part of the state machine (spec 10.3).
    #[error("invalid transition from {from} to {to}")]
    InvalidTransition {
        /// The current state.
        from: String,
        /// The requested state.
        to: String,
    },
    /// An admission would exceed a concurrency quota (spec 22.8); nothing was written.
    #[error("the {bucket} already has {limit} unfinished actions, its quota")]
    QuotaExceeded {
        /// `principal` or `tenant`.
        bucket: &'static str,
        /// The quota.
        limit: u32,
    },
    /// A queued admission found `limit` actions already waiting for a worker (spec 22.8);
    /// nothing was written.
    #[error("{limit} actions already wait for a worker, the queue's bound")]
    QueueFull {
        /// The bound.
        limit: u32,
    },
    /// A write carried a fencing token that no longer owns the lease (spec 13.4, 17.3).
    #[error("stale lease: the fencing token no longer owns this work")]
    StaleLease,
    /// A cursor is malformed, or was not issued by this store.
    #[error("invalid cursor")]
    InvalidCursor,
    /// A cursor was issued for another reader or query scope (spec 16.2).
    #[error("cursor belongs to another query scope")]
    ForeignCursor,
    /// A cursor points into history that retention has purged (spec 16.2): what followed it is
    /// gone, so continuing would silently skip it. Start again without a cursor.
    #[error("cursor is past retention: the history after it was purged")]
    CursorExpired,
    /// A chunk reuses a sequence number with different content (spec 11.6).
    #[error("chunk sequence {sequence} was already used with different content")]
    ChunkConflict {
        /// The reused sequence number.
        sequence: u64,
    },
    /// A chunk sequence is not greater than the last stored one (spec 11.6).
    #[error("chunk sequence {sequence} is not greater than the last stored sequence {last}")]
    ChunkOutOfOrder {
        /// The offered sequence number.
        sequence: u64,
        /// The highest stored sequence number.
        last: u64,
    },
    /// A receipt does not extend its chain: the previous hash or position does not match (spec 18.2).
    #[error("receipt does not extend chain {chain_id}")]
    ReceiptChainConflict {
        /// The chain that was not extended.
        chain_id: String,
    },
    /// A resume token is unknown, expired, or already used (spec 10.5).
    #[error("resume token is invalid, expired or already used")]
    ResumeTokenInvalid,
    /// A migration that was already applied has changed since (its checksum differs).
    #[error("migration {version} ({name}) changed after it was applied: refusing to start")]
    MigrationChanged {
        /// The migration version.
        version: i64,
        /// The migration name.
        name: String,
    },
    /// The database has a migration applied that this build does not know (a newer build wrote it).
    #[error("database has unknown migration {version}: it was written by a newer build")]
    MigrationUnknown {
        /// The unknown version.
        version: i64,
    },
    /// A migration this build knows is not applied (another process rolled the schema back).
    #[error("migration {version} is not applied")]
    MigrationPending {
        /// The first missing version.
        version: i64,
    },
}

impl StoreError {
    /// The stable machine-readable code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::Backend(_) => "store.backend",
            StoreError::Unavailable(_) => "store.unavailable",
            StoreError::Corrupt(_) => "store.corrupt",
            StoreError::InvalidInput(_) => "store.invalid_input",
            StoreError::NotFound { .. } => "store.not_found",
            StoreError::CursorExpired => "store.cursor_expired",
            StoreError::Duplicate { .. } => "store.duplicate",
            StoreError::StateConflict { .. } => "store.state_conflict",
            StoreError::Terminal { .. } => "store.terminal",
            StoreError::InvalidTransition { .. } => "store.invalid_transition",
            StoreError::StaleLease => "store.stale_lease",
            StoreError::QuotaExceeded { .. } => "store.quota_exceeded",
            StoreError::QueueFull { .. } => "store.queue_full",
            StoreError::InvalidCursor => "store.invalid_cursor",
            StoreError::ForeignCursor => "store.foreign_cursor",
            StoreError::ChunkConflict { .. } => "store.chunk_conflict",
            StoreError::ChunkOutOfOrder { .. } => "store.chunk_out_of_order",
            StoreError::ReceiptChainConflict { .. } => "store.receipt_chain_conflict",
            StoreError::ResumeTokenInvalid => "store.resume_token_invalid",
            StoreError::MigrationChanged { .. } => "store.migration_changed",
            StoreError::MigrationUnknown { .. } => "store.migration_unknown",
            StoreError::MigrationPending { .. } => "store.migration_pending",
        }
    }

    /// Whether retrying the same operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Result alias for store operations.
pub type StoreResult<T> = Result<T, StoreError>;

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => {
                StoreError::Unavailable(e.to_string())
            }
            sqlx::Error::Database(db) => {
                // SQLITE_BUSY (5) / SQLITE_LOCKED (6) and their extended codes; PostgreSQL
                // serialization_failure, deadlock_detected, lock_not_available.
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                let busy = matches!(
                    code.as_str(),
                    "5" | "6" | "261" | "262" | "517" | "40001" | "40P01" | "55P03"
                );
                if busy {
                    StoreError::Unavailable(db.message().to_owned())
                } else {
                    StoreError::Backend(db.message().to_owned())
                }
            }
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::ColumnNotFound(_) => StoreError::Corrupt(e.to_string()),
            _ => StoreError::Backend(e.to_string()),
        }
    }
}

/// Whether a sqlx error is a unique-constraint violation.
pub(crate) fn is_unique_violation(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => db.is_unique_violation(),
        _ => false,
    }
}
