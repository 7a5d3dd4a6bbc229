//! Upgrades: stores written by earlier migrations, opened by this build, keep their rows readable.

use aip_store::*;

use crate::harness::Harness;

/// The bookkeeping table, as the store creates it.
const BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS aip_migrations (version BIGINT PRIMARY KEY, \
     name TEXT NOT NULL, checksum TEXT NOT NULL, applied_at_ms BIGINT NOT NULL);\n";

/// The schema before action ids became tenant-scoped (`migrations`, as the bookkeeping table
/// records them) with the rows of `data/pre_tenant_keys.sql`: what an upgrade starts from.
fn pre_tenant_keys(migrations: &[(i64, &str, &str)]) -> String {
    let mut prepare = String::from(BOOKKEEPING);
    for (version, name, sql) in migrations {
        push_applied(&mut prepare, *version, name, sql);
    }
    prepare.push_str(include_str!("../data/pre_tenant_keys.sql"));
    prepare
}

/// After the upgrade the old rows are read under their tenant, and the append-only guards hold.
async fn the_pre_tenant_rows_are_kept_under_their_tenant(h: &Harness) {
    let s = &h.store;
    assert_eq!(
        s.get_action("t1", "a1").await.unwrap().unwrap().state,
        ActionState::Queued
    );
    assert!(s.get_action("t2", "a1").await.unwrap().is_none());
    let chunks = s.list_chunks("t1", "a1", None, Limit::max()).await.unwrap();
    assert_eq!(chunks.len(), 1);
    let chain = s.list_receipts("t1", "a1", Limit::max()).await.unwrap();
    assert_eq!(chain.len(), 1);
    let lease = s
        .claim("actions", &WorkerId::fresh(), 2, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (lease.tenant.as_str(), lease.action_id.as_deref()),
        ("t1", Some("a1"))
    );
    let audit = AuditQuery {
        tenant: "t1".into(),
        action_id: Some("a1".into()),
        ..Default::default()
    };
    let found = s.list_audit(&audit, None, Limit::max()).await.unwrap();
    assert_eq!(
        found.items.len(),
        1,
        "the audit record's action was filled in"
    );
    assert!(
        h.raw_exec("DELETE FROM aip_receipts").await.is_err(),
        "receipts stay append-only"
    );
    assert!(
        h.raw_exec("DELETE FROM aip_audit").await.is_err(),
        "audit stays append-only"
    );
}

/// A SQLite store written before action ids became tenant-scoped (migrations 1-4) keeps its rows
/// through migration 5 and gains the tenant keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_store_written_before_tenant_scoped_action_ids_keeps_its_data_under_tenant_keys() {
    let prepare = pre_tenant_keys(&[
        (
            1,
            "init",
            include_str!("../../migrations/sqlite/0001_init.sql"),
        ),
        (
            2,
            "event_positions",
            include_str!("../../migrations/sqlite/0002_event_positions.sql"),
        ),
        (
            3,
            "event_counter_trigger",
            include_str!("../../migrations/sqlite/0003_event_counter_trigger.sql"),
        ),
        (
            4,
            "drop_superseded_event_indexes",
            include_str!("../../migrations/sqlite/0004_drop_superseded_event_indexes.sql"),
        ),
    ]);
    let h = Harness::sqlite_from(Some(&prepare)).await;
    the_pre_tenant_rows_are_kept_under_their_tenant(&h).await;
}

/// The same upgrade on PostgreSQL (migrations 1-2, then 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_store_written_before_tenant_scoped_action_ids_keeps_its_data_under_tenant_keys()
{
    let prepare = pre_tenant_keys(&[
        (
            1,
            "init",
            include_str!("../../migrations/postgres/0001_init.sql"),
        ),
        (
            2,
            "event_positions",
            include_str!("../../migrations/postgres/0002_event_positions.sql"),
        ),
    ]);
    let Some(h) = Harness::postgres_from(Some(&prepare)).await else {
        return;
    };
    the_pre_tenant_rows_are_kept_under_their_tenant(&h).await;
}

/// The SQLite migrations up to `through`, from the repository's migration files (`NNNN_name.sql`),
/// each recorded in the bookkeeping table as the store records it.
fn sqlite_schema_through(through: i64) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/sqlite");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    let mut prepare = String::from(BOOKKEEPING);
    for file in files {
        let stem = file.file_stem().unwrap().to_str().unwrap().to_owned();
        let (version, name) = stem.split_once('_').unwrap();
        let version: i64 = version.parse().unwrap();
        if version > through {
            continue;
        }
        push_applied(
            &mut prepare,
            version,
            name,
            &std::fs::read_to_string(&file).unwrap(),
        );
    }
    prepare
}

/// Appends a migration's text to `prepare` and records it applied, as the store does.
fn push_applied(prepare: &mut String, version: i64, name: &str, sql: &str) {
    use sha2::Digest;
    let checksum: String = sha2::Sha256::digest(sql.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    prepare.push_str(sql);
    prepare.push_str(&format!(
        "\nINSERT INTO aip_migrations VALUES ({version}, '{name}', '{checksum}', 0);\n"
    ));
}

/// Rows bound to a session before the session-tail indexes (SQLite migration 16) are listed by
/// that session after the upgrade, and sessionless rows stay out of its listings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_store_written_before_session_tail_indexes_lists_its_old_session_rows_by_session()
{
    let mut prepare = sqlite_schema_through(15);
    prepare.push_str(
        "INSERT INTO aip_sessions (session_id, tenant, principal, state, created_at_ms, updated_at_ms, data) \
         VALUES ('sess_old_0123456789ab', 't1', 'alice', 'active', 1, 1, '{}');
         INSERT INTO aip_actions (action_id, tenant, principal, session_id, capability, mode, state, created_at_ms, updated_at_ms, request) \
         VALUES ('a1', 't1', 'alice', 'sess_old_0123456789ab', 'cap:demo:echo', 'sync', 'completed', 1, 1, '{}'), \
                ('a2', 't1', 'alice', NULL, 'cap:demo:echo', 'sync', 'completed', 2, 2, '{}');
         INSERT INTO aip_events (seq, pos, event_id, kind, tenant, principal, session_id, action_id, occurred_at_ms, data) \
         VALUES (1, 1, 'e1', 'aip.session.created', 't1', 'alice', 'sess_old_0123456789ab', NULL, 1, '{}'), \
                (2, 2, 'e2', 'aip.action.completed', 't1', 'alice', NULL, 'a2', 2, '{}');
         INSERT INTO aip_audit (seq, pos, audit_id, tenant, actor, action_label, occurred_at_ms, data, action_id, session_id) \
         VALUES (1, 1, 'au1', 't1', 'alice', 'session.created', 1, '{}', NULL, 'sess_old_0123456789ab'), \
                (2, 2, 'au2', 't1', 'alice', 'action.cancel_requested', 2, '{}', 'a2', NULL);",
    );
    let h = Harness::sqlite_from(Some(&prepare)).await;
    assert_eq!(
        crate::cases::session_rows(&h.store, "t1", "sess_old_0123456789ab").await,
        [vec!["a1"], vec!["e1"], vec!["au1"]]
    );
}
