//! The node's HTTP listener (spec 20.1, 22.8): its own accept loop over hyper, so that the
//! connection-level bounds an operator expects of a gateway hold.
//!
//! - At most `limits.max_connections` connections at once. A connection past it is answered a
//!   fixed `503 aip.runtime.overloaded` with `Retry-After: 1` and closed, without reading a
//!   request or touching the store (its answer costs one static write, bounded in time).
//! - A client that does not send a whole request head within `limits.header_read_timeout_ms` is
//!   disconnected (HTTP/1.1; slow-header clients cannot hold connections).
//! - Shutdown: once the drain is over, the listener closes, every connection is told to finish
//!   its request and close (HTTP/1.1 keep-alive ends, HTTP/2 sends GOAWAY), streams end with
//!   their final resumable frame, and the process waits at most [`CLOSE_TIMEOUT`] for them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// Connection-level bounds of the listener.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Longest time a client may take to send a request head.
    pub header_read_timeout: Duration,
}

/// Longest wait, after the drain, for connections and streams to close before the process exits
/// anyway: a peer that never reads its last frame does not hold the shutdown.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest time spent answering a connection refused for the connection bound.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);

/// Refused connections answered at once; past this a refused connection is closed unanswered,
/// so a flood of connections costs no more than this many small tasks.
const MAX_REFUSALS_IN_FLIGHT: usize = 256;

/// Serves `app` on `listener` until `stop` resolves, then closes as described in the module doc;
/// `open_streams` is waited for too, since upgraded WebSocket connections leave hyper's watch.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    open_streams: Arc<crate::overload::OpenStreams>,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: back off briefly instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            metrics::counter!("aip_connections_refused_total").increment(1);
            if let Ok(slot) = Arc::clone(&refusals).try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream).await;
                    drop(slot);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = connection_service(app.clone(), peer);
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let watched = graceful.watch(connection);
        metrics::gauge!("aip_http_connections").increment(1.0);
        tokio::spawn(async move {
            if let Err(error) = watched.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            metrics::gauge!("aip_http_connections").decrement(1.0);
            drop(permit);
        });
    }
    drop(listener);
    let open = graceful.count();
    let closed = tokio::time::timeout(CLOSE_TIMEOUT, async {
        graceful.shutdown().await;
        while open_streams.open() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    if closed.is_err() {
        tracing::warn!(
            connections = open,
            "connections still open {} s after the drain were cut",
            CLOSE_TIMEOUT.as_secs()
        );
        println!(
            "aip serve: connections still open {} s after the drain were cut",
            CLOSE_TIMEOUT.as_secs()
        );
    }
    Ok(())
}

/// The router as one connection's hyper service, each request carrying the peer address as axum's
/// `ConnectInfo` (as `into_make_service_with_connect_info` would).
fn connection_service(
    app: Router,
    peer: SocketAddr,
) -> hyper_util::service::TowerToHyperService<
    tower::util::MapRequest<Router, impl FnMut(Request) -> Request + Clone>,
> {
    let app = app.map_request(move |mut request: Request| {
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        request
    });
    hyper_util::service::TowerToHyperService::new(app)
}

/// A request as hyper hands it over.
type Request = hyper::Request<hyper::body::Incoming>;

/// The fixed answer to a connection past the bound: the request is not read, so nothing the
/// client sends can cost more than this write.
const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 154\r\n\
\r\n\
{\"error\":{\"code\":\"aip.runtime.overloaded\",\"message\":\"the node holds as many connections as it is configured to; nothing was done\",\"category\":\"temporary\"}}";

/// Answers a connection refused for the connection bound, then closes it gently (the bytes the
/// client already sent are read and dropped first, so the close does not reset the answer away).
async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, async {
        if stream.write_all(REFUSAL).await.is_err() {
            return;
        }
        let _ = stream.shutdown().await;
        let mut sink = [0_u8; 4096];
        let mut read = 0_usize;
        while read < 64 * 1024 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_says_its_length_exactly() {
        let text = std::str::from_utf8(REFUSAL).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let parsed: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(parsed["error"]["code"], "aip.runtime.overloaded");
        assert_eq!(
            aip_core::ErrorCode::Overloaded.as_str(),
            "aip.runtime.overloaded"
        );
    }
}
