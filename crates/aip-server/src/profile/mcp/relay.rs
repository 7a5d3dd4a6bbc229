//! Server-to-client requests of an upstream MCP tool (`sampling/createMessage`,
//! `elicitation/create`), relayed to the client of the `/mcp` call that runs the tool: the call's
//! response stream carries the request, the client's JSON-RPC response comes back on a POST of the
//! same session, and its answer goes upstream. Only a call followed on this node by a client that
//! declared the capability (elicitation from MCP 2025-06-18) is asked; everything else is refused
//! to the upstream, which then fails or degrades as its tool decides. Bounded: at most
//! 10,000 answers owed per node, each wait bounded by the action's deadline.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// A JSON-RPC error: code and message.
pub type RpcError = (i64, String);

/// Answers owed by clients on one node before new requests are refused.
const MAX_OWED: usize = 10_000;
/// Requests queued for one call's stream.
const CALL_QUEUE: usize = 8;

/// Method not found: the client cannot answer this (no capability, or no client at all).
const METHOD_NOT_FOUND: i64 = -32601;

/// One request for the client of a call.
pub struct ClientRequest {
    /// `sampling/createMessage` or `elicitation/create`.
    pub method: String,
    /// Its params, as the upstream sent them.
    pub params: Value,
    /// Where the client's answer goes.
    pub reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// What a call's client declared it answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answers {
    /// `sampling/createMessage`.
    pub sampling: bool,
    /// `elicitation/create`.
    pub elicitation: bool,
}

impl Answers {
    /// Whether the client answers anything.
    pub fn any(self) -> bool {
        self.sampling || self.elicitation
    }

    fn allows(self, method: &str) -> bool {
        match method {
            "sampling/createMessage" => self.sampling,
            "elicitation/create" => self.elicitation,
            _ => false,
        }
    }
}

type Owed = HashMap<(String, String), oneshot::Sender<Result<Value, RpcError>>>;

/// The node's relay.
#[derive(Default)]
pub struct Relay {
    calls: Mutex<HashMap<String, (mpsc::Sender<ClientRequest>, Answers)>>,
    owed: Mutex<Owed>,
    next: AtomicU64,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Relay {
    /// Opens the call running `action_id` to requests its client `answers`; they arrive on the
    /// returned receiver until [`Relay::close`].
    pub fn open(&self, action_id: &str, answers: Answers) -> mpsc::Receiver<ClientRequest> {
        let (tx, rx) = mpsc::channel(CALL_QUEUE);
        locked(&self.calls).insert(action_id.to_owned(), (tx, answers));
        rx
    }

    /// Closes [`Relay::open`].
    pub fn close(&self, action_id: &str) {
        locked(&self.calls).remove(action_id);
    }

    /// Asks the client of the call running `action_id`, waiting at most `wait`.
    pub async fn ask(
        &self,
        action_id: &str,
        method: &str,
        params: Value,
        wait: Duration,
    ) -> Result<Value, RpcError> {
        let refused = || {
            Err((
                METHOD_NOT_FOUND,
                format!("{method}: the calling MCP client cannot answer it"),
            ))
        };
        let target = locked(&self.calls)
            .get(action_id)
            .filter(|(_, answers)| answers.allows(method))
            .map(|(tx, _)| tx.clone());
        let Some(tx) = target else {
            return refused();
        };
        let (reply, answer) = oneshot::channel();
        let request = ClientRequest {
            method: method.to_owned(),
            params,
            reply,
        };
        if tx.try_send(request).is_err() {
            return refused();
        }
        match tokio::time::timeout(wait, answer).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err((
                -32603,
                "the client's stream ended before it answered".into(),
            )),
            Err(_) => Err((-32603, "the client did not answer in time".into())),
        }
    }

    /// Records that session `session` owes an answer to a request sent now; its JSON-RPC id.
    pub fn owe(
        &self,
        session: &str,
        reply: oneshot::Sender<Result<Value, RpcError>>,
    ) -> Result<String, oneshot::Sender<Result<Value, RpcError>>> {
        let mut owed = locked(&self.owed);
        // Answers whose asker gave up make room first.
        owed.retain(|_, tx| !tx.is_closed());
        if owed.len() >= MAX_OWED {
            return Err(reply);
        }
        let id = format!("aip-{}", self.next.fetch_add(1, Ordering::Relaxed));
        owed.insert((session.to_owned(), id.clone()), reply);
        Ok(id)
    }

    /// A client's response in session `session`: to whoever waits for it. Whether one did (a
    /// response nobody awaits, or from another session, changes nothing).
    pub fn answer(&self, session: &str, id: &Value, outcome: Result<Value, RpcError>) -> bool {
        let Some(id) = id.as_str() else {
            return false;
        };
        let waiter = locked(&self.owed).remove(&(session.to_owned(), id.to_owned()));
        waiter.is_some_and(|tx| tx.send(outcome).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_reaches_only_a_call_whose_client_answers_it_and_the_answer_only_its_session()
    {
        let relay = std::sync::Arc::new(Relay::default());
        let mut rx = relay.open(
            "act_1",
            Answers {
                sampling: false,
                elicitation: true,
            },
        );
        let refused = relay
            .ask(
                "act_1",
                "sampling/createMessage",
                Value::Null,
                Duration::from_secs(1),
            )
            .await;
        assert_eq!(refused.unwrap_err().0, METHOD_NOT_FOUND);
        assert!(
            relay
                .ask(
                    "act_2",
                    "elicitation/create",
                    Value::Null,
                    Duration::from_secs(1)
                )
                .await
                .is_err()
        );
        let asker = {
            let relay = std::sync::Arc::clone(&relay);
            tokio::spawn(async move {
                relay
                    .ask(
                        "act_1",
                        "elicitation/create",
                        serde_json::json!({"m": 1}),
                        Duration::from_secs(5),
                    )
                    .await
            })
        };
        let request = rx.recv().await.unwrap();
        assert_eq!(request.method, "elicitation/create");
        let id = relay.owe("ses_a", request.reply).ok().unwrap();
        assert!(!relay.answer("ses_b", &Value::String(id.clone()), Ok(Value::Null)));
        assert!(relay.answer(
            "ses_a",
            &Value::String(id.clone()),
            Ok(serde_json::json!({"action": "accept"}))
        ));
        assert!(!relay.answer("ses_a", &Value::String(id), Ok(Value::Null)));
        assert_eq!(asker.await.unwrap().unwrap()["action"], "accept");
        relay.close("act_1");
    }
}
