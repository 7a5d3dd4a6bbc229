//! Callback delivery (spec 17). What exists so far is the address policy every outbound call to a
//! target named by a request must pass (`ssrf`); callback contexts themselves are still refused at
//! admission (`aip.action.unsupported_context`) until the durable outbox delivers them.

pub mod ssrf;
