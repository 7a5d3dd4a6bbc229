//! Transport bindings over the AIP runtime: native HTTP, SSE, WebSocket, NATS, MCP and A2A profiles.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
