//! A tokio-tungstenite client for the tests that speak to `aip serve` over WebSocket.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use super::Server;

/// A client connection.
pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Upgrades an authenticated connection to `/aip/v1/ws`.
pub async fn connect(server: &Server, token: &str) -> Socket {
    let mut request = format!("ws://{}/aip/v1/ws", server.base)
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let (socket, response) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(response.status(), 101);
    socket
}

/// Sends one envelope as a text frame.
pub async fn send(socket: &mut Socket, envelope: &Value) {
    socket
        .send(Message::Text(envelope.to_string().into()))
        .await
        .unwrap();
}

/// The next frame within 20 s (no test waits on time otherwise).
pub async fn next_frame(socket: &mut Socket) -> Option<Message> {
    tokio::time::timeout(Duration::from_secs(20), socket.next())
        .await
        .expect("the connection stalled")
        .map(|m| m.unwrap())
}

/// The next envelope, skipping control frames.
pub async fn next_envelope(socket: &mut Socket) -> Value {
    loop {
        match next_frame(socket).await.expect("connection ended") {
            Message::Text(text) => return serde_json::from_str(text.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}
