//! What every store runs inside one transaction when it opens: migrations and the cursor key.

use crate::cursor::CursorKey;
use crate::db::{Tx, query};
use crate::error::StoreResult;
use crate::migrate::{self, Migration};

/// Applies pending migrations of `set` inside `tx` after checking the applied ones.
pub(crate) async fn migrate(tx: &mut dyn Tx, set: &[Migration]) -> StoreResult<()> {
    query(migrate::CREATE_TABLE).execute(&mut *tx).await?;
    let applied = applied_migrations(&mut *tx).await?;
    for m in migrate::pending(&applied, set)? {
        tx.batch(m.sql).await?;
        query("INSERT INTO aip_migrations (version, name, checksum, applied_at_ms) VALUES ($1, $2, $3, $4)")
            .bind(m.version)
            .bind(m.name)
            .bind(m.checksum())
            .bind(migrate::now_ms())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// The `(version, checksum)` of every applied migration, in order.
pub(crate) async fn applied_migrations(tx: &mut dyn Tx) -> StoreResult<Vec<(i64, String)>> {
    query("SELECT version, checksum FROM aip_migrations ORDER BY version")
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|r| Ok((r.try_get("version")?, r.try_get("checksum")?)))
        .collect()
}

/// Loads the store's cursor key, creating it on first start (shared by every node).
pub(crate) async fn cursor_key(tx: &mut dyn Tx) -> StoreResult<CursorKey> {
    query("INSERT INTO aip_meta (name, value) VALUES ('cursor_key', $1) ON CONFLICT (name) DO NOTHING")
        .bind(CursorKey::random_hex()?)
        .execute(&mut *tx)
        .await?;
    let hex: String = query("SELECT value FROM aip_meta WHERE name = 'cursor_key'")
        .fetch_one(&mut *tx)
        .await?
        .try_get("value")?;
    CursorKey::from_hex(&hex)
}
