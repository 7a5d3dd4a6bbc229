//! Compatibility profiles (spec 21): foreign protocols mapped onto the native runtime at the
//! gateway boundary. No foreign type crosses into the runtime or the store; each profile calls the
//! same runtime entry points as the native bindings.

pub mod mcp;
pub mod webhook;
