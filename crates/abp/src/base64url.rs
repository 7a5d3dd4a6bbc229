//! Strict unpadded base64url (spec 3): exact alphabet, no padding, canonical trailing bits.

use crate::error::{Code, Error, Result};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Encode without padding.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn sextet(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    } as u32)
}

/// Decode strictly: padded input denies `base64url_padded`; a non-alphabet character, an impossible
/// length or non-zero trailing bits deny `base64url_invalid`.
pub fn decode(text: &str) -> Result<Vec<u8>> {
    let s = text.as_bytes();
    if s.contains(&b'=') {
        return Err(Error::new(Code::Base64urlPadded, "base64url"));
    }
    let invalid = || Error::new(Code::Base64urlInvalid, "base64url");
    if s.len() % 4 == 1 {
        return Err(invalid());
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3 + 2);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= sextet(*c).ok_or_else(invalid)? << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = chunk.len() - 1;
        let unused = match keep {
            1 => n & 0xFFFF,
            2 => n & 0xFF,
            _ => 0,
        };
        if unused != 0 {
            return Err(invalid());
        }
        out.extend_from_slice(&bytes[..keep]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_denies_padding_and_foreign_characters() {
        for len in 0..40 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(decode(&encode(&bytes)).expect("round trip"), bytes);
        }
        assert_eq!(decode("-_8").expect("valid"), vec![0xfb, 0xff]);
        assert_eq!(
            decode("QQ==").expect_err("padded").code,
            Code::Base64urlPadded
        );
        assert_eq!(
            decode("QQ+/").expect_err("std alphabet").code,
            Code::Base64urlInvalid
        );
        assert_eq!(
            decode("Q").expect_err("length").code,
            Code::Base64urlInvalid
        );
        assert_eq!(
            decode("QR").expect_err("trailing bits").code,
            Code::Base64urlInvalid
        );
    }
}
