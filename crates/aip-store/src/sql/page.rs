//! Reader-scoped list pages behind opaque cursors (spec 16.2).

use crate::cursor::{CursorKey, CursorKind};
use crate::db::Row;
use crate::error::StoreResult;
use crate::model::Page;

/// Where a list page starts for one reader's query, and how the next page's cursor is named.
pub(super) struct ListCursor<'k> {
    key: &'k CursorKey,
    kind: CursorKind,
    scope: Vec<String>,
    /// The list position the page starts after (0 for the first page).
    pub(super) after: i64,
}

impl<'k> ListCursor<'k> {
    /// Decodes `cursor` for a list of `kind` under `scope` (the reader's query fingerprint); no
    /// cursor starts at the beginning.
    pub(super) fn open(
        key: &'k CursorKey,
        kind: CursorKind,
        scope: Vec<String>,
        cursor: Option<&str>,
    ) -> StoreResult<Self> {
        let after = match cursor {
            Some(c) => key.decode(kind, &scope_refs(&scope), c)?.1,
            None => 0,
        };
        Ok(ListCursor {
            key,
            kind,
            scope,
            after,
        })
    }

    /// The page of `rows` (in list order), each decoded by `decode`, with the cursor after the
    /// last one's `position` column (or this page's start when there are none).
    pub(super) fn page<T>(
        self,
        rows: &[Row],
        position: &str,
        decode: fn(&Row) -> StoreResult<T>,
    ) -> StoreResult<Page<T>> {
        let mut last = self.after;
        let mut items = Vec::with_capacity(rows.len());
        for row in rows {
            last = row.try_get(position)?;
            items.push(decode(row)?);
        }
        let next_cursor = self
            .key
            .encode(self.kind, &scope_refs(&self.scope), (0, last));
        Ok(Page { items, next_cursor })
    }
}

fn scope_refs(scope: &[String]) -> Vec<&str> {
    scope.iter().map(String::as_str).collect()
}
