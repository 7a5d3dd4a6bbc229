//! Bindings over the AIP runtime: the native HTTP binding (spec 20.1), SSE (20.2), WebSocket (20.3),
//! NATS (20.4), their configuration and transport authentication. The server keeps no durable state of its own.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod app;
pub mod auth;
pub mod boot;
pub mod callbacks;
pub mod config;
pub mod console;
pub mod error;
pub mod http;
pub mod identity;
pub mod links;
pub mod listener;
pub mod nats;
pub mod overload;
pub mod peers;
pub mod profile;
pub mod routes;
pub mod sse;
pub mod status;
pub mod ws;
