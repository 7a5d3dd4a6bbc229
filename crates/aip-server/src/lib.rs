//! Bindings over the AIP runtime: the native HTTP binding (spec 20.1), its configuration and transport
//! authentication. The server keeps no durable state of its own.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod app;
pub mod auth;
pub mod config;
pub mod error;
pub mod http;
pub mod nats;
pub mod routes;
pub mod sse;
