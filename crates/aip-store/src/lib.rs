//! Storage backends for the AIP runtime: SQLite (embedded default) and PostgreSQL.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
