//! Versioned, checksummed, immutable migrations. Each applied migration is recorded in
//! `aip_migrations` with the SHA-256 of its text; a store refuses to start when an applied migration
//! changed or when the database holds a migration this build does not know.

use sha2::Digest as _;

use crate::error::{StoreError, StoreResult};

/// One embedded migration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

impl Migration {
    pub(crate) fn checksum(&self) -> String {
        sha2::Sha256::digest(self.sql.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The statement that creates the bookkeeping table (identical on both backends).
pub(crate) const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS aip_migrations (\
     version BIGINT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)";

/// SQLite migrations, in order.
pub(crate) const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "event_positions",
        sql: include_str!("../migrations/sqlite/0002_event_positions.sql"),
    },
    Migration {
        version: 3,
        name: "event_counter_trigger",
        sql: include_str!("../migrations/sqlite/0003_event_counter_trigger.sql"),
    },
    Migration {
        version: 4,
        name: "drop_superseded_event_indexes",
        sql: include_str!("../migrations/sqlite/0004_drop_superseded_event_indexes.sql"),
    },
    Migration {
        version: 5,
        name: "tenant_scoped_action_ids",
        sql: include_str!("../migrations/sqlite/0005_tenant_scoped_action_ids.sql"),
    },
    Migration {
        version: 6,
        name: "approvals",
        sql: include_str!("../migrations/sqlite/0006_approvals.sql"),
    },
    Migration {
        version: 7,
        name: "escalations",
        sql: include_str!("../migrations/sqlite/0007_escalations.sql"),
    },
    Migration {
        version: 8,
        name: "transactions",
        sql: include_str!("../migrations/sqlite/0008_transactions.sql"),
    },
    Migration {
        version: 9,
        name: "callbacks",
        sql: include_str!("../migrations/sqlite/0009_callbacks.sql"),
    },
    Migration {
        version: 10,
        name: "channels",
        sql: include_str!("../migrations/sqlite/0010_channels.sql"),
    },
    Migration {
        version: 11,
        name: "audit_positions",
        sql: include_str!("../migrations/sqlite/0011_audit_positions.sql"),
    },
    Migration {
        version: 12,
        name: "settlements",
        sql: include_str!("../migrations/sqlite/0012_settlements.sql"),
    },
    Migration {
        version: 13,
        name: "evidence_retention",
        sql: include_str!("../migrations/sqlite/0013_evidence_retention.sql"),
    },
    Migration {
        version: 14,
        name: "conversation_as_of",
        sql: include_str!("../migrations/sqlite/0014_conversation_as_of.sql"),
    },
    Migration {
        version: 15,
        name: "action_subscriptions",
        sql: include_str!("../migrations/sqlite/0015_action_subscriptions.sql"),
    },
    Migration {
        version: 16,
        name: "session_tail_indexes",
        sql: include_str!("../migrations/sqlite/0016_session_tail_indexes.sql"),
    },
    Migration {
        version: 17,
        name: "unfinished_actions",
        sql: include_str!("../migrations/sqlite/0017_unfinished_actions.sql"),
    },
    Migration {
        version: 18,
        name: "claimable_jobs",
        sql: include_str!("../migrations/sqlite/0018_claimable_jobs.sql"),
    },
];

/// PostgreSQL migrations, in order.
pub(crate) const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "event_positions",
        sql: include_str!("../migrations/postgres/0002_event_positions.sql"),
    },
    Migration {
        version: 3,
        name: "tenant_scoped_action_ids",
        sql: include_str!("../migrations/postgres/0003_tenant_scoped_action_ids.sql"),
    },
    Migration {
        version: 4,
        name: "approvals",
        sql: include_str!("../migrations/postgres/0004_approvals.sql"),
    },
    Migration {
        version: 5,
        name: "escalations",
        sql: include_str!("../migrations/postgres/0005_escalations.sql"),
    },
    Migration {
        version: 6,
        name: "transactions",
        sql: include_str!("../migrations/postgres/0006_transactions.sql"),
    },
    Migration {
        version: 7,
        name: "callbacks",
        sql: include_str!("../migrations/postgres/0007_callbacks.sql"),
    },
    Migration {
        version: 8,
        name: "channels",
        sql: include_str!("../migrations/postgres/0008_channels.sql"),
    },
    Migration {
        version: 9,
        name: "audit_positions",
        sql: include_str!("../migrations/postgres/0009_audit_positions.sql"),
    },
    Migration {
        version: 10,
        name: "settlements",
        sql: include_str!("../migrations/postgres/0010_settlements.sql"),
    },
    Migration {
        version: 11,
        name: "evidence_retention",
        sql: include_str!("../migrations/postgres/0011_evidence_retention.sql"),
    },
    Migration {
        version: 12,
        name: "conversation_as_of",
        sql: include_str!("../migrations/postgres/0012_conversation_as_of.sql"),
    },
    Migration {
        version: 13,
        name: "action_subscriptions",
        sql: include_str!("../migrations/postgres/0013_action_subscriptions.sql"),
    },
    Migration {
        version: 14,
        name: "session_tail_indexes",
        sql: include_str!("../migrations/postgres/0014_session_tail_indexes.sql"),
    },
    Migration {
        version: 15,
        name: "unfinished_actions",
        sql: include_str!("../migrations/postgres/0015_unfinished_actions.sql"),
    },
    Migration {
        version: 16,
        name: "claimable_jobs",
        sql: include_str!("../migrations/postgres/0016_claimable_jobs.sql"),
    },
];

/// Checks the applied `(version, checksum)` rows against `known` and returns the migrations still to
/// apply, in order.
pub(crate) fn pending<'a>(
    applied: &[(i64, String)],
    known: &'a [Migration],
) -> StoreResult<Vec<&'a Migration>> {
    for (version, checksum) in applied {
        let Some(m) = known.iter().find(|m| m.version == *version) else {
            return Err(StoreError::MigrationUnknown { version: *version });
        };
        if m.checksum() != *checksum {
            return Err(StoreError::MigrationChanged {
                version: m.version,
                name: m.name.to_owned(),
            });
        }
    }
    Ok(known
        .iter()
        .filter(|m| !applied.iter().any(|(v, _)| *v == m.version))
        .collect())
}

/// Milliseconds since the epoch, for bookkeeping only.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_versions_are_strictly_increasing_on_both_backends() {
        for set in [SQLITE, POSTGRES] {
            assert!(set.windows(2).all(|w| w[0].version < w[1].version));
            assert_eq!(set.first().map(|m| m.version), Some(1));
        }
    }

    #[test]
    fn a_changed_checksum_is_refused() {
        let applied = vec![(1, "0".repeat(64))];
        assert!(matches!(
            pending(&applied, SQLITE),
            Err(StoreError::MigrationChanged { version: 1, .. })
        ));
    }

    #[test]
    fn an_unknown_applied_version_is_refused() {
        let applied = vec![(1, SQLITE[0].checksum()), (99, "x".into())];
        assert!(matches!(
            pending(&applied, SQLITE),
            Err(StoreError::MigrationUnknown { version: 99 })
        ));
    }

    #[test]
    fn only_unapplied_migrations_are_pending() {
        assert_eq!(pending(&[], SQLITE).unwrap().len(), SQLITE.len());
        assert_eq!(
            pending(&[(1, SQLITE[0].checksum())], SQLITE).unwrap().len(),
            SQLITE.len() - 1
        );
        let all: Vec<_> = SQLITE.iter().map(|m| (m.version, m.checksum())).collect();
        assert!(pending(&all, SQLITE).unwrap().is_empty());
    }
}
