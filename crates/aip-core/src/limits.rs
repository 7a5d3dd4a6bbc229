//! Input bounds (spec 22.8) and a single-pass pre-scan that enforces them on raw bytes before any
//! allocation-heavy parsing.

use crate::decode_error::{DecodeError, LimitKind};

/// Bounds applied to every decoded input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted input in bytes.
    pub max_bytes: usize,
    /// Deepest nesting of arrays and objects (the envelope itself is depth 1).
    pub max_depth: usize,
    /// Longest encoded string in bytes, escapes counted as written.
    pub max_string_bytes: usize,
    /// Most items in one array or members in one object.
    pub max_collection_len: usize,
}

impl Default for Limits {
    /// 1 MiB, depth 64, 256 KiB strings, 10,000 items per collection.
    fn default() -> Self {
        Self {
            max_bytes: 1 << 20,
            max_depth: 64,
            max_string_bytes: 256 << 10,
            max_collection_len: 10_000,
        }
    }
}

impl Limits {
    /// Checks `bytes` against every bound without building a value. Malformed JSON that stays within
    /// bounds passes here and is reported by the parser.
    pub fn prescan(&self, bytes: &[u8]) -> Result<(), DecodeError> {
        if bytes.len() > self.max_bytes {
            return Err(limit(LimitKind::EnvelopeBytes, self.max_bytes, 0));
        }
        // counts[d] = separators seen in the open container at depth d (+1 = its element count).
        let mut counts: Vec<usize> = Vec::with_capacity(16);
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'"' => {
                    let start = i;
                    i += 1;
                    while i < bytes.len() {
                        match bytes[i] {
                            b'\\' => i += 2,
                            b'"' => break,
                            _ => i += 1,
                        }
                    }
                    if i.saturating_sub(start + 1) > self.max_string_bytes {
                        return Err(limit(LimitKind::StringLength, self.max_string_bytes, start));
                    }
                }
                b'[' | b'{' => {
                    if counts.len() >= self.max_depth {
                        return Err(limit(LimitKind::Depth, self.max_depth, i));
                    }
                    counts.push(0);
                }
                b']' | b'}' => {
                    counts.pop();
                }
                b',' => {
                    if let Some(c) = counts.last_mut() {
                        *c += 1;
                        if *c >= self.max_collection_len {
                            return Err(limit(
                                LimitKind::CollectionSize,
                                self.max_collection_len,
                                i,
                            ));
                        }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Ok(())
    }
}

fn limit(kind: LimitKind, max: usize, offset: usize) -> DecodeError {
    DecodeError::Limit {
        kind,
        limit: max as u64,
        offset,
        pointer: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Limits {
        Limits {
            max_bytes: 200,
            max_depth: 3,
            max_string_bytes: 10,
            max_collection_len: 3,
        }
    }

    fn kind(r: Result<(), DecodeError>) -> Option<LimitKind> {
        match r {
            Err(DecodeError::Limit { kind, .. }) => Some(kind),
            _ => None,
        }
    }

    #[test]
    fn input_within_every_bound_passes_the_prescan() {
        assert!(
            small()
                .prescan(br#"{"a":[1,2,3],"b":{"c":"0123456789"}}"#)
                .is_ok()
        );
    }

    #[test]
    fn each_bound_is_reported_with_its_kind() {
        let l = small();
        assert_eq!(
            kind(l.prescan(&[b' '; 201])),
            Some(LimitKind::EnvelopeBytes)
        );
        assert_eq!(kind(l.prescan(br#"{"a":[[{}]]}"#)), Some(LimitKind::Depth));
        assert_eq!(
            kind(l.prescan(br#"{"a":"01234567890"}"#)),
            Some(LimitKind::StringLength)
        );
        assert_eq!(
            kind(l.prescan(br#"[1,2,3,4]"#)),
            Some(LimitKind::CollectionSize)
        );
        assert_eq!(
            kind(l.prescan(br#"{"a":1,"b":2,"c":3,"d":4}"#)),
            Some(LimitKind::CollectionSize)
        );
    }

    #[test]
    fn escaped_quotes_and_brackets_inside_strings_do_not_confuse_the_prescan() {
        assert!(small().prescan(br#"{"a":"[[[\"{{"}"#).is_ok());
    }
}
