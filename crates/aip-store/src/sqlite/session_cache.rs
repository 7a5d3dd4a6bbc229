//! The sessions this process read lately, so the session check on every MCP or A2A request is not a
//! database read. Exact for this process: the writer thread (every write of the file from this
//! process goes through it) empties the cache after any transaction that touched `aip_sessions`,
//! before it answers that transaction's writers. A read that raced such a transaction is not kept
//! (generation check). Another process writing the same file (not a supported deployment: several
//! nodes share PostgreSQL) is seen within [`TTL`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::model::SessionRecord;

/// How long an entry answers before it is read again.
pub(crate) const TTL: Duration = Duration::from_secs(1);
/// Most sessions kept; past it the cache starts over (it is only a shortcut).
const CAPACITY: usize = 4096;

#[derive(Debug, Default)]
struct Inner {
    /// Moves on at every invalidation: a read that started before it is not kept.
    generation: u64,
    entries: HashMap<String, (SessionRecord, Instant)>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct SessionCache(Mutex<Inner>);

impl SessionCache {
    /// Every change is one assignment or map operation: a lock poisoned by a panic elsewhere still
    /// guards a whole state.
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The generation to hand back to [`SessionCache::keep`] after reading the database.
    pub(crate) fn generation(&self) -> u64 {
        self.inner().generation
    }

    /// The session as last read, if read within [`TTL`] and unchanged since.
    pub(crate) fn get(&self, session_id: &str) -> Option<SessionRecord> {
        let inner = self.inner();
        let (record, at) = inner.entries.get(session_id)?;
        (at.elapsed() < TTL).then(|| record.clone())
    }

    /// Keeps `record`, read from the database after [`SessionCache::generation`] answered
    /// `generation`, unless sessions changed since.
    pub(crate) fn keep(&self, generation: u64, record: &SessionRecord) {
        let mut inner = self.inner();
        if inner.generation != generation {
            return;
        }
        if inner.entries.len() >= CAPACITY {
            inner.entries.clear();
        }
        inner
            .entries
            .insert(record.session_id.clone(), (record.clone(), Instant::now()));
    }

    /// Forgets every session: called by the writer after a transaction that touched sessions.
    pub(crate) fn invalidate(&self) {
        let mut inner = self.inner();
        inner.generation = inner.generation.wrapping_add(1);
        inner.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            session_id: id.into(),
            tenant: "t".into(),
            principal: "p".into(),
            peer: None,
            state: crate::model::SessionState::Active,
            created_at_ms: 1,
            updated_at_ms: 1,
            expires_at_ms: None,
            data: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_read_that_raced_an_invalidation_is_not_kept_and_an_invalidation_forgets_every_session() {
        let cache = SessionCache::default();
        let before = cache.generation();
        cache.invalidate();
        cache.keep(before, &record("s1"));
        assert!(cache.get("s1").is_none());
        let now = cache.generation();
        cache.keep(now, &record("s1"));
        assert_eq!(cache.get("s1").unwrap().session_id, "s1");
        cache.invalidate();
        assert!(cache.get("s1").is_none());
    }
}
