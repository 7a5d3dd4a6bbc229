//! A local callback receiver for the tests: records every request and answers from a script
//! (then 200), optionally redirecting.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One received request.
#[derive(Debug, Clone)]
pub struct Hit {
    pub headers: HashMap<String, String>,
    pub body: Bytes,
}

#[derive(Default)]
struct Inner {
    hits: Vec<Hit>,
    script: VecDeque<u16>,
    otherwise: Option<u16>,
    location: Option<String>,
    /// How long each answer waits; the first request waits `hold_first` instead, when set.
    delay_ms: u64,
    hold_first: Option<u64>,
    /// Requests in flight per delivery id, and the most ever seen for one id.
    in_flight: HashMap<String, usize>,
    max_in_flight: usize,
}

/// The receiver: `url()` is its hook.
#[derive(Clone)]
pub struct Receiver {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl Receiver {
    /// Answers `script` in order, then `otherwise` (200 when `None`).
    pub async fn start(script: &[u16], otherwise: Option<u16>) -> Self {
        let inner = Arc::new(Mutex::new(Inner {
            script: script.iter().copied().collect(),
            otherwise,
            ..Inner::default()
        }));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(hook))
            .with_state(Arc::clone(&inner));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, inner }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.addr.port())
    }

    /// 3xx answers carry this `Location`.
    pub fn redirect_to(&self, location: &str) {
        self.inner.lock().unwrap().location = Some(location.to_owned());
    }

    /// From now on answer `status`.
    pub fn answer(&self, status: u16) {
        let mut inner = self.inner.lock().unwrap();
        inner.script.clear();
        inner.otherwise = Some(status);
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.inner.lock().unwrap().hits.clone()
    }

    /// Every answer waits `delay_ms`; the very first waits `hold_first_ms` (to be cut mid-way).
    pub fn slow(&self, delay_ms: u64, hold_first_ms: Option<u64>) {
        let mut inner = self.inner.lock().unwrap();
        inner.delay_ms = delay_ms;
        inner.hold_first = hold_first_ms;
    }

    /// The most requests ever in flight at once for one delivery id.
    pub fn max_in_flight(&self) -> usize {
        self.inner.lock().unwrap().max_in_flight
    }
}

async fn hook(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap, body: Bytes) -> Response {
    let id = headers
        .get("aip-delivery-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let wait = {
        let mut inner = inner.lock().unwrap();
        let first = inner.hits.is_empty();
        inner.hits.push(Hit {
            headers: headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
                .collect(),
            body,
        });
        let now = {
            let n = inner.in_flight.entry(id.clone()).or_default();
            *n += 1;
            *n
        };
        inner.max_in_flight = inner.max_in_flight.max(now);
        match inner.hold_first {
            Some(hold) if first => hold,
            _ => inner.delay_ms,
        }
    };
    if wait > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    }
    let mut inner = inner.lock().unwrap();
    if let Some(n) = inner.in_flight.get_mut(&id) {
        *n -= 1;
    }
    let status = inner.script.pop_front().or(inner.otherwise).unwrap_or(200);
    let status = StatusCode::from_u16(status).unwrap();
    match (&inner.location, status.is_redirection()) {
        (Some(location), true) => (status, [(header::LOCATION, location.clone())]).into_response(),
        _ => (status, "ok").into_response(),
    }
}
