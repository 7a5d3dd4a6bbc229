//! The optional session-encryption primitive (spec 22.11): ephemeral X25519 agreement, a 256-bit key
//! from HKDF-SHA256 (salt = session id, info = `aip-session-v1`), AES-256-GCM with unique 96-bit
//! nonces and associated data.
//!
//! Profile choices made here (22.11 requires a profile to define them): one key per session and
//! direction pair, nonce = 4-byte direction tag ‖ 64-bit big-endian counter owned by the sender, the
//! caller supplies associated data (e.g. the envelope's message id), and rekeying means a new
//! handshake — a sender refuses to encrypt once its counter would wrap.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{EphemeralSecret, PublicKey};

/// HKDF info string of 22.11.
pub const INFO: &[u8] = b"aip-session-v1";

/// Which side of the session a cipher belongs to; selects the nonce direction tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The handshake initiator.
    Initiator,
    /// The handshake responder.
    Responder,
}

impl Role {
    fn tag(self) -> [u8; 4] {
        match self {
            Role::Initiator => *b"AIPi",
            Role::Responder => *b"AIPr",
        }
    }

    fn peer(self) -> Role {
        match self {
            Role::Initiator => Role::Responder,
            Role::Responder => Role::Initiator,
        }
    }
}

/// Session-encryption failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionCryptoError {
    /// The peer's public key produced an all-zero (non-contributory) shared secret.
    #[error("non-contributory X25519 key agreement")]
    WeakKey,
    /// The nonce counter is exhausted; a new handshake must rekey.
    #[error("nonce counter exhausted; rekey")]
    NonceExhausted,
    /// The nonce does not carry the peer's direction tag, or is not 12 bytes.
    #[error("nonce not from the peer direction")]
    BadNonce,
    /// Authentication failed: wrong key, nonce, associated data, or tampered ciphertext.
    #[error("decryption failed")]
    Decrypt,
}

/// One side's ephemeral X25519 key pair.
pub struct EphemeralKeyPair {
    secret: EphemeralSecret,
    public: PublicKey,
}

impl EphemeralKeyPair {
    /// Generates a fresh pair from the OS RNG.
    pub fn generate() -> Self {
        let secret = EphemeralSecret::random_from_rng(rand_core::OsRng);
        let public = PublicKey::from(&secret);
        Self { secret, public }
    }

    /// The public half to send to the peer.
    pub fn public_bytes(&self) -> [u8; 32] {
        self.public.to_bytes()
    }

    /// Completes the agreement and derives the session key (consumes the secret: ephemeral).
    pub fn agree(
        self,
        peer_public: [u8; 32],
        session_id: &str,
    ) -> Result<SessionKey, SessionCryptoError> {
        let shared = self.secret.diffie_hellman(&PublicKey::from(peer_public));
        if !shared.was_contributory() {
            return Err(SessionCryptoError::WeakKey);
        }
        Ok(derive_key(shared.as_bytes(), session_id))
    }
}

/// A derived 256-bit session key.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKey([u8; 32]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

impl SessionKey {
    /// The raw key bytes (for a profile that stores them; keep them secret).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// HKDF-SHA256 with the session id as salt and `aip-session-v1` as info.
pub fn derive_key(shared_secret: &[u8], session_id: &str) -> SessionKey {
    let hk = Hkdf::<Sha256>::new(Some(session_id.as_bytes()), shared_secret);
    let mut okm = [0u8; 32];
    // 32 bytes is far below HKDF-SHA256's 255 * 32 byte output limit.
    let _ = hk.expand(INFO, &mut okm);
    SessionKey(okm)
}

/// An encrypted record: the nonce travels with the ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// 96-bit nonce: direction tag ‖ counter.
    pub nonce: [u8; 12],
    /// Ciphertext with the 16-byte GCM tag appended.
    pub ciphertext: Vec<u8>,
}

/// AES-256-GCM for one side of a session.
pub struct SessionCipher {
    aead: Aes256Gcm,
    role: Role,
    counter: u64,
}

impl SessionCipher {
    /// A cipher for `role` under `key`.
    pub fn new(key: &SessionKey, role: Role) -> Self {
        Self {
            aead: Aes256Gcm::new(&key.0.into()),
            role,
            counter: 0,
        }
    }

    /// Encrypts with a fresh, never-reused nonce, authenticating `aad` as well.
    pub fn seal(&mut self, aad: &[u8], plaintext: &[u8]) -> Result<Sealed, SessionCryptoError> {
        if self.counter == u64::MAX {
            return Err(SessionCryptoError::NonceExhausted);
        }
        let mut nonce = [0u8; 12];
        nonce[..4].copy_from_slice(&self.role.tag());
        nonce[4..].copy_from_slice(&self.counter.to_be_bytes());
        self.counter += 1;
        let ciphertext = self
            .aead
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .map_err(|_| SessionCryptoError::Decrypt)?;
        Ok(Sealed { nonce, ciphertext })
    }

    /// Decrypts a record from the peer; rejects nonces from this side's own direction (reflection).
    pub fn open(&self, aad: &[u8], sealed: &Sealed) -> Result<Vec<u8>, SessionCryptoError> {
        if sealed.nonce[..4] != self.role.peer().tag() {
            return Err(SessionCryptoError::BadNonce);
        }
        self.aead
            .decrypt(
                Nonce::from_slice(&sealed.nonce),
                Payload {
                    msg: &sealed.ciphertext,
                    aad,
                },
            )
            .map_err(|_| SessionCryptoError::Decrypt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(session: &str) -> (SessionCipher, SessionCipher) {
        let a = EphemeralKeyPair::generate();
        let b = EphemeralKeyPair::generate();
        let (pa, pb) = (a.public_bytes(), b.public_bytes());
        let ka = a.agree(pb, session).unwrap();
        let kb = b.agree(pa, session).unwrap();
        assert_eq!(ka, kb);
        (
            SessionCipher::new(&ka, Role::Initiator),
            SessionCipher::new(&kb, Role::Responder),
        )
    }

    #[test]
    fn both_sides_derive_the_same_key_and_exchange_messages() {
        let (mut i, mut r) = pair("sess_1");
        let s = i.seal(b"msg_1", b"hello").unwrap();
        assert_eq!(r.open(b"msg_1", &s).unwrap(), b"hello");
        let back = r.seal(b"msg_2", b"hi").unwrap();
        assert_eq!(i.open(b"msg_2", &back).unwrap(), b"hi");
    }

    #[test]
    fn nonces_are_unique_per_message() {
        let (mut i, _) = pair("sess_1");
        let a = i.seal(b"", b"x").unwrap();
        let b = i.seal(b"", b"x").unwrap();
        assert_ne!(a.nonce, b.nonce);
        assert_ne!(a.ciphertext, b.ciphertext);
    }

    #[test]
    fn tampering_wrong_aad_reflection_and_another_session_all_fail() {
        let (mut i, r) = pair("sess_1");
        let s = i.seal(b"aad", b"secret").unwrap();
        assert_eq!(r.open(b"other", &s), Err(SessionCryptoError::Decrypt));
        let mut t = s.clone();
        t.ciphertext[0] ^= 1;
        assert_eq!(r.open(b"aad", &t), Err(SessionCryptoError::Decrypt));
        assert_eq!(i.open(b"aad", &s), Err(SessionCryptoError::BadNonce));
        let (_, other) = pair("sess_2");
        assert_eq!(other.open(b"aad", &s), Err(SessionCryptoError::Decrypt));
    }

    #[test]
    fn the_salt_is_the_session_id() {
        let secret = [7u8; 32];
        assert_ne!(derive_key(&secret, "sess_a"), derive_key(&secret, "sess_b"));
        assert_eq!(derive_key(&secret, "sess_a"), derive_key(&secret, "sess_a"));
    }

    #[test]
    fn a_low_order_peer_key_is_rejected() {
        let a = EphemeralKeyPair::generate();
        assert_eq!(
            a.agree([0u8; 32], "s").err(),
            Some(SessionCryptoError::WeakKey)
        );
    }
}
