//! Signed webhook verification for the webhook ingress profile `aip.http.webhook.v1` (spec 21.3):
//! the raw body's signature is checked before anything parses it. The scheme is
//! Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`
//! over `"{id}.{timestamp}.{raw body}"`, secrets `whsec_<base64>`, several signatures for key
//! rotation), or the other signing order some senders use (`"{timestamp}.{id}.{raw body}"`).
//!
//! This is the verifier alone; the route, the durable replay claim and the admission of the event as
//! an action live beside it in the profile's module.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// A subscription secret (`whsec_<base64 key>`).
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A secret is never printed.
        f.write_str("Secret(..)")
    }
}

/// Which string a sender signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SigningOrder {
    /// Standard Webhooks: `{id}.{timestamp}.{body}`.
    IdTimestampBody,
    /// `{timestamp}.{id}.{body}`.
    TimestampIdBody,
}

/// Why a delivery is refused (each answered 401 by the ingress, nothing parsed or stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// A `webhook-*` header is missing or empty.
    #[error("the {0} header is missing")]
    MissingHeader(&'static str),
    /// The timestamp is not unix seconds.
    #[error("the webhook timestamp is not a number of seconds")]
    BadTimestamp,
    /// The timestamp is outside the tolerance window.
    #[error("the webhook timestamp is outside the accepted window")]
    OutsideWindow,
    /// No signature verifies with any of the subscription's secrets.
    #[error("no webhook signature verifies")]
    BadSignature,
}

/// Why a secret cannot be used; the configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a webhook secret must be whsec_ followed by a base64 key of 24-64 bytes")]
pub struct SecretError;

impl Secret {
    /// Parses `whsec_<base64>`.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let key = text.strip_prefix("whsec_").ok_or(SecretError)?;
        let key = base64::engine::general_purpose::STANDARD
            .decode(key)
            .map_err(|_| SecretError)?;
        if !(24..=64).contains(&key.len()) {
            return Err(SecretError);
        }
        Ok(Self(key))
    }

    fn mac(
        &self,
        order: SigningOrder,
        id: &str,
        timestamp: &str,
        body: &[u8],
    ) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).ok()?;
        let (first, second) = match order {
            SigningOrder::IdTimestampBody => (id, timestamp),
            SigningOrder::TimestampIdBody => (timestamp, id),
        };
        mac.update(first.as_bytes());
        mac.update(b".");
        mac.update(second.as_bytes());
        mac.update(b".");
        mac.update(body);
        Some(mac)
    }

    /// The `v1,<base64>` signature of a delivery (what a sender puts in `webhook-signature`).
    pub fn sign(&self, order: SigningOrder, id: &str, timestamp: &str, body: &[u8]) -> String {
        let tag = self
            .mac(order, id, timestamp, body)
            .map(|m| m.finalize().into_bytes().to_vec())
            .unwrap_or_default();
        format!(
            "v1,{}",
            base64::engine::general_purpose::STANDARD.encode(tag)
        )
    }
}

/// The headers of one delivery.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// `webhook-id`.
    pub id: Option<&'a str>,
    /// `webhook-timestamp`.
    pub timestamp: Option<&'a str>,
    /// `webhook-signature` (space-separated `v1,<base64>` entries).
    pub signature: Option<&'a str>,
}

/// The header's value, unless it is missing or empty.
fn present<'a>(value: Option<&'a str>, name: &'static str) -> Result<&'a str, WebhookError> {
    value
        .filter(|s| !s.is_empty())
        .ok_or(WebhookError::MissingHeader(name))
}

/// Verifies `body` (the raw bytes as received) against any of `secrets`, with the timestamp within
/// `tolerance_s` of `now_s`. Comparisons are constant-time.
pub fn verify(
    secrets: &[Secret],
    order: SigningOrder,
    delivery: Delivery<'_>,
    body: &[u8],
    (now_s, tolerance_s): (i64, i64),
) -> Result<(), WebhookError> {
    let id = present(delivery.id, "webhook-id")?;
    let timestamp = present(delivery.timestamp, "webhook-timestamp")?;
    let signature = present(delivery.signature, "webhook-signature")?;
    if timestamp.is_empty()
        || timestamp.len() > 12
        || !timestamp.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(WebhookError::BadTimestamp);
    }
    let ts: i64 = timestamp.parse().map_err(|_| WebhookError::BadTimestamp)?;
    if (now_s - ts).abs() > tolerance_s {
        return Err(WebhookError::OutsideWindow);
    }
    // At most 16 signatures are considered (key rotation needs two or three).
    for entry in signature.split(' ').filter(|e| !e.is_empty()).take(16) {
        let Some(encoded) = entry.strip_prefix("v1,") else {
            continue;
        };
        let Ok(tag) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            continue;
        };
        for secret in secrets {
            if let Some(mac) = secret.mac(order, id, timestamp, body)
                && mac.verify_slice(&tag).is_ok()
            {
                return Ok(());
            }
        }
    }
    Err(WebhookError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn delivery<'a>(id: &'a str, ts: &'a str, sig: &'a str) -> Delivery<'a> {
        Delivery {
            id: Some(id),
            timestamp: Some(ts),
            signature: Some(sig),
        }
    }

    #[test]
    fn the_standard_webhooks_vectors_sign_and_verify() {
        let secret = Secret::parse(SECRET).unwrap();
        let order = SigningOrder::IdTimestampBody;
        let (id, ts, body) = (
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            "1614265330",
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(
            secret.sign(order, id, ts, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
        let sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(
            verify(
                std::slice::from_ref(&secret),
                order,
                delivery(id, ts, sig),
                body,
                (1_614_265_330, 300)
            ),
            Ok(())
        );
        let aip_body = br#"{"event_type":"order.created","data":{"id":"o-1"}}"#;
        assert_eq!(
            secret.sign(
                order,
                "dlv_01J0000000000000000000000",
                "1767225600",
                aip_body
            ),
            "v1,GIN4f9Zu+onWVPRuH2aGq3t4XVMko1M23jUl/Aognlo="
        );
    }

    #[test]
    fn a_changed_byte_a_reserialized_body_a_wrong_secret_or_a_stale_time_is_refused() {
        let secret = Secret::parse(SECRET).unwrap();
        let other = Secret::parse("whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").unwrap();
        let order = SigningOrder::IdTimestampBody;
        let body: &[u8] = br#"{"a":1,"b":2}"#;
        let sig = secret.sign(order, "m1", "1000", body);
        let rotated = format!("v1,bad {sig}");
        let mine = std::slice::from_ref(&secret);
        let both = [other.clone(), secret.clone()];
        let now = (1000, 300);
        type Case<'a> = (
            &'a [Secret],
            &'a str,
            &'a str,
            &'a [u8],
            (i64, i64),
            Result<(), WebhookError>,
        );
        let cases: [Case<'_>; 8] = [
            (mine, "1000", &sig, body, now, Ok(())),
            (
                mine,
                "1000",
                &sig,
                br#"{"a":1,"b":3}"#,
                now,
                Err(WebhookError::BadSignature),
            ),
            // The same JSON re-serialized: raw bytes are signed.
            (
                mine,
                "1000",
                &sig,
                br#"{"b":2,"a":1}"#,
                now,
                Err(WebhookError::BadSignature),
            ),
            (
                std::slice::from_ref(&other),
                "1000",
                &sig,
                body,
                now,
                Err(WebhookError::BadSignature),
            ),
            (
                mine,
                "1000",
                &sig,
                body,
                (1601, 300),
                Err(WebhookError::OutsideWindow),
            ),
            (
                mine,
                "1000",
                &sig,
                body,
                (399, 300),
                Err(WebhookError::OutsideWindow),
            ),
            (
                mine,
                "10x0",
                &sig,
                body,
                now,
                Err(WebhookError::BadTimestamp),
            ),
            // Key rotation: any listed signature by any configured secret.
            (&both, "1000", &rotated, body, now, Ok(())),
        ];
        for (secrets, ts, signature, body, now, expected) in cases {
            let got = verify(secrets, order, delivery("m1", ts, signature), body, now);
            assert_eq!(got, expected, "{ts} {signature} {now:?}");
        }
        let missing = Delivery {
            id: Some("m1"),
            timestamp: None,
            signature: Some(&sig),
        };
        assert_eq!(
            verify(mine, order, missing, body, now),
            Err(WebhookError::MissingHeader("webhook-timestamp"))
        );
        // The other signing order is a different signature.
        let alt = secret.sign(SigningOrder::TimestampIdBody, "m1", "1000", body);
        assert_ne!(alt, sig);
        let alt_delivery = delivery("m1", "1000", &alt);
        assert_eq!(
            verify(mine, SigningOrder::TimestampIdBody, alt_delivery, body, now),
            Ok(())
        );
    }

    #[test]
    fn secrets_must_be_whsec_base64_of_a_sane_length() {
        assert!(Secret::parse(SECRET).is_ok());
        assert!(Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(Secret::parse("whsec_!!").is_err());
        assert!(Secret::parse("whsec_AAAA").is_err());
        assert_eq!(
            format!("{:?}", Secret::parse(SECRET).unwrap()),
            "Secret(..)"
        );
    }
}
