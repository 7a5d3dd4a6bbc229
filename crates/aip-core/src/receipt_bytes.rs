//! The fast path of [`crate::receipts::verify_document`]: receipt-chain verification over the
//! received bytes (spec 18.2).
//!
//! Canonicalising every receipt through a `serde_json::Value` costs several times the SHA-256 of the
//! same bytes. Receipts produced by this crate (and most senders) are already in the canonical form
//! of [`crate::canonical`]: compact, members sorted by name bytes, serde_json's string and number
//! encoding. For such a receipt the hashed bytes are the received bytes minus the `hash` member, so
//! the verifier scans each receipt once, checks that it is canonical, and feeds the two raw slices
//! around the `hash` member straight into SHA-256.
//!
//! The fast path only ever answers "verified, with this root". Everything else — a receipt that is
//! not canonical is re-canonicalised through the reference code; bytes that are not JSON, duplicate
//! members that select the chain, a bad hash, link or root, escapes it does not vet — makes it give
//! up ([`Bail`]) so the reference path decides, which keeps the verdicts, the roots and the first
//! broken index identical to [`crate::receipts::verify_chain_value`] by construction.

use std::borrow::Cow;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::receipts::{HashForm, VerifiedChain, receipt_value_hash, receipt_value_hash_null_form};

/// The fast path cannot decide; the reference path must.
#[derive(Debug)]
pub(crate) struct Bail;

type Scan<T> = Result<T, Bail>;

/// Deepest nesting the scanner follows (serde_json's own limit is 128).
const MAX_DEPTH: usize = 100;

/// Receipt arrays with at least this many bytes are scanned and hashed on two threads.
pub(crate) const PARALLEL_MIN_BYTES: usize = 256 << 10;

/// How far a token is from the canonical form.
const CANONICAL: u8 = 0;
/// Valid JSON, but not in canonical form (whitespace, escapes, member order, number spelling).
const VALID: u8 = 1;
/// Not vetted here (a `\u` surrogate escape): only serde_json can tell whether it is valid.
const UNVETTED: u8 = 2;

/// A string token: content bounds (without quotes).
#[derive(Clone, Copy)]
struct Str {
    start: usize,
    end: usize,
    level: u8,
    escaped: bool,
}

/// How a receipt's `hash` member was found.
#[derive(Clone, Copy)]
enum HashField {
    Absent,
    NotString,
    /// Content bounds of the string and the bounds of the whole member.
    Str {
        value: (usize, usize),
        member: (usize, usize),
    },
}

/// One receipt located in the bytes.
struct Receipt {
    start: usize,
    end: usize,
    level: u8,
    hash: HashField,
    /// Content bounds of `previous_hash` when it is a string.
    previous: Option<(usize, usize)>,
    /// When the top-level members are out of order (a struct serialized in field order) but
    /// everything else is canonical: the range of its members in [`Scanner::members`].
    unsorted: Option<std::ops::Range<usize>>,
}

/// A top-level receipt member: name bounds and the bounds of the whole member (`"name":value`).
#[derive(Clone, Copy)]
struct Member {
    name: (usize, usize),
    /// [`prefix_key`] of the name.
    key: u64,
    span: (usize, usize),
}

/// `root_hash` of a chain.
#[derive(Clone, Copy)]
enum Root {
    Absent,
    NotString,
    Str(usize, usize),
}

/// The receipts of a `receipts` array, each hash already verified as it was scanned; `Err` when
/// the array is not all objects or a receipt does not verify (decided only if this chain is the one
/// the reference path would select).
type Receipts<'a> = Scan<Vec<Checked<'a>>>;

/// A chain candidate: the document itself or its `body.receipt_chain`.
struct Chain<'a> {
    /// `Err`: `receipts` is absent, not an array of objects, or a receipt's hash is wrong.
    receipts: Receipts<'a>,
    root: Root,
}

/// Elements of a `receipts` array scanned up to its `]` or to a given element start.
struct Run<'a> {
    receipts: Receipts<'a>,
    /// The scan stopped at the requested element start instead of the closing `]`.
    at_stop: bool,
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `v` that ends a plain run of string content: `"`, `\`, a control
/// byte, or a non-ASCII byte. The lowest set bit is always exact (false positives only follow a
/// true one).
#[inline(always)]
fn special(v: u64) -> u64 {
    let q = v ^ (LO * u64::from(b'"'));
    let s = v ^ (LO * u64::from(b'\\'));
    let zq = q.wrapping_sub(LO) & !q;
    let zs = s.wrapping_sub(LO) & !s;
    let ctl = v.wrapping_sub(LO * 0x20) & !v;
    (zq | zs | ctl | v) & HI
}

#[inline(always)]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c)
}

/// Index of the first byte at or after `i` that [`special`] flags, or `b.len()`.
#[inline(always)]
fn next_special(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..).and_then(|s| s.first_chunk::<8>()) {
        let m = special(u64::from_le_bytes(*chunk));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if is_special(c) {
            return i;
        }
        i += 1;
    }
    i
}

/// The first 8 bytes of a member name, big-endian and zero-padded: when two keys differ they order
/// the names as byte strings do (a zero pad only ever stands where one name has ended); when they
/// are equal the whole names decide.
#[inline(always)]
fn prefix_key(name: &[u8]) -> u64 {
    if let Some(head) = name.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    let mut k = 0u64;
    for (n, &c) in name.iter().enumerate() {
        k |= u64::from(c) << (56 - 8 * n);
    }
    k
}

/// Byte order of two member names, with their [`prefix_key`]s.
#[inline(always)]
fn name_cmp(x: (u64, &[u8]), y: (u64, &[u8])) -> std::cmp::Ordering {
    x.0.cmp(&y.0).then_with(|| x.1.cmp(y.1))
}

fn hex_value(c: u8) -> Scan<u16> {
    match c {
        b'0'..=b'9' => Ok(u16::from(c - b'0')),
        b'a'..=b'f' => Ok(u16::from(c - b'a' + 10)),
        b'A'..=b'F' => Ok(u16::from(c - b'A' + 10)),
        _ => Err(Bail),
    }
}

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
    form: HashForm,
    /// Top-level members of the receipt being checked, in received order.
    members: Vec<Member>,
    /// Reused buffer for receipts hashed from sorted member slices.
    scratch: Vec<u8>,
    /// A `receipts` array with at least this many bytes after its `[` is scanned on two threads.
    parallel_min: usize,
}

impl<'a> Scanner<'a> {
    #[inline(always)]
    fn peek(&self) -> Scan<u8> {
        self.b.get(self.i).copied().ok_or(Bail)
    }

    /// Skips JSON whitespace; any whitespace makes the enclosing value non-canonical.
    #[inline(always)]
    fn ws(&mut self, level: &mut u8) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
            *level = (*level).max(VALID);
        }
    }

    #[inline(always)]
    fn expect(&mut self, c: u8) -> Scan<()> {
        if self.peek()? == c {
            self.i += 1;
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// A string token starting at its opening quote.
    fn string(&mut self) -> Scan<Str> {
        let b = self.b;
        let start = self.i + 1;
        let mut i = start;
        let mut level = CANONICAL;
        let mut escaped = false;
        let mut non_ascii = false;
        loop {
            i = next_special(b, i);
            match *b.get(i).ok_or(Bail)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    match *b.get(i + 1).ok_or(Bail)? {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'/' => {
                            level = level.max(VALID);
                            i += 2;
                        }
                        b'u' => {
                            let digits = b.get(i + 2..i + 6).ok_or(Bail)?;
                            let mut cp = 0u16;
                            for &d in digits {
                                cp = (cp << 4) | hex_value(d)?;
                            }
                            let short = matches!(cp, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d);
                            // serde_json writes the other control characters as lowercase \u00xx.
                            let canonical_form = [
                                b'0',
                                b'0',
                                HEX_LOWER[usize::from(cp >> 4) & 15],
                                HEX_LOWER[usize::from(cp) & 15],
                            ];
                            if (0xd800..0xe000).contains(&cp) {
                                level = level.max(UNVETTED);
                            } else if cp >= 0x20 || short || digits != canonical_form {
                                level = level.max(VALID);
                            }
                            i += 6;
                        }
                        _ => return Err(Bail),
                    }
                }
                c if c < 0x20 => return Err(Bail),
                _ => {
                    non_ascii = true;
                    i += 1;
                }
            }
        }
        if non_ascii && std::str::from_utf8(&b[start..i]).is_err() {
            return Err(Bail);
        }
        self.i = i + 1;
        Ok(Str {
            start,
            end: i,
            level,
            escaped,
        })
    }

    /// A number token; returns how canonical it is (serde_json's own parser vets the unusual ones).
    fn number(&mut self) -> Scan<u8> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let neg = b.get(i) == Some(&b'-');
        if neg {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = b.get(i) {
                    i += 1;
                }
            }
            _ => return Err(Bail),
        }
        let int_digits = i - start - usize::from(neg);
        let mut plain = true;
        if b.get(i) == Some(&b'.') {
            plain = false;
            i += 1;
            let d = i;
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            if i == d {
                return Err(Bail);
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            plain = false;
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let d = i;
            while let Some(b'0'..=b'9') = b.get(i) {
                i += 1;
            }
            if i == d {
                return Err(Bail);
            }
        }
        self.i = i;
        let token = &b[start..i];
        // Up to 18 digits always fits serde_json's u64/i64 and is written back unchanged; `-0`
        // parses as the float -0.0.
        if plain && int_digits <= 18 && token != b"-0" {
            return Ok(CANONICAL);
        }
        let n: serde_json::Number = serde_json::from_slice(token).map_err(|_| Bail)?;
        let written = serde_json::to_vec(&n).map_err(|_| Bail)?;
        Ok(if written == token { CANONICAL } else { VALID })
    }

    fn literal(&mut self, word: &[u8]) -> Scan<()> {
        if self.b.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(Bail)
        }
    }

    /// Any value, vetted for validity; `level` rises to how far it is from canonical.
    fn value(&mut self, depth: usize, level: &mut u8) -> Scan<()> {
        match self.peek()? {
            b'{' => self.object(depth + 1, level),
            b'[' => self.array(depth + 1, level),
            b'"' => {
                let s = self.string()?;
                *level = (*level).max(s.level);
                Ok(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => {
                let l = self.number()?;
                *level = (*level).max(l);
                Ok(())
            }
            _ => Err(Bail),
        }
    }

    /// A key: members must be strictly increasing by name bytes (no duplicates) to be canonical;
    /// an escaped name is compared only after unescaping, so it counts as non-canonical.
    #[inline(always)]
    fn key(
        &mut self,
        previous: &mut Option<(u64, usize, usize)>,
        level: &mut u8,
    ) -> Scan<(Str, u64, bool)> {
        if self.peek()? != b'"' {
            return Err(Bail);
        }
        let k = self.string()?;
        *level = (*level).max(k.level);
        if k.escaped {
            *level = (*level).max(VALID);
        }
        let name = &self.b[k.start..k.end];
        let key = prefix_key(name);
        let in_order = match *previous {
            Some((pk, ps, pe)) => name_cmp((pk, &self.b[ps..pe]), (key, name)).is_lt(),
            None => true,
        };
        *previous = Some((key, k.start, k.end));
        Ok((k, key, in_order))
    }

    /// After a member or element: `,` (more follow) or `close` (done).
    #[inline(always)]
    fn next_or_close(&mut self, close: u8, level: &mut u8) -> Scan<bool> {
        self.ws(level);
        let c = self.peek()?;
        self.i += 1;
        if c == b',' {
            self.ws(level);
            Ok(true)
        } else if c == close {
            Ok(false)
        } else {
            Err(Bail)
        }
    }

    fn object(&mut self, depth: usize, level: &mut u8) -> Scan<()> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        self.i += 1;
        self.ws(level);
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        let mut previous = None;
        loop {
            if !self.key(&mut previous, level)?.2 {
                *level = (*level).max(VALID);
            }
            self.ws(level);
            self.expect(b':')?;
            self.ws(level);
            self.value(depth, level)?;
            if !self.next_or_close(b'}', level)? {
                return Ok(());
            }
        }
    }

    fn array(&mut self, depth: usize, level: &mut u8) -> Scan<()> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        self.i += 1;
        self.ws(level);
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.value(depth, level)?;
            if !self.next_or_close(b']', level)? {
                return Ok(());
            }
        }
    }

    /// A value outside the receipts: only its validity matters.
    fn outside_value(&mut self, depth: usize) -> Scan<()> {
        let mut level = CANONICAL;
        self.value(depth, &mut level)?;
        if level >= UNVETTED { Err(Bail) } else { Ok(()) }
    }

    /// A member name outside the receipts, compared raw: an escaped one could spell a name that
    /// selects the chain, so it is left to the reference path.
    fn outside_key(&mut self) -> Scan<&'a [u8]> {
        if self.peek()? != b'"' {
            return Err(Bail);
        }
        let k = self.string()?;
        if k.escaped {
            return Err(Bail);
        }
        let b = self.b;
        Ok(&b[k.start..k.end])
    }

    /// Walks an object outside the receipts, handing each member name to `member` with the
    /// scanner positioned on the value (which `member` must consume).
    fn outside_object(
        &mut self,
        depth: usize,
        mut member: impl FnMut(&mut Self, &'a [u8], usize) -> Scan<()>,
    ) -> Scan<()> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        let mut ignored = CANONICAL;
        self.i += 1;
        self.ws(&mut ignored);
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            let k = self.outside_key()?;
            self.ws(&mut ignored);
            self.expect(b':')?;
            self.ws(&mut ignored);
            member(self, k, depth)?;
            if !self.next_or_close(b'}', &mut ignored)? {
                return Ok(());
            }
        }
    }

    /// The value of a chain's `receipts` member into `slot`; a duplicate member (serde_json keeps the
    /// last) or a non-array is left to the reference path.
    fn receipts_member(&mut self, slot: &mut Option<Receipts<'a>>, depth: usize) -> Scan<()> {
        if slot.is_some() {
            return Err(Bail);
        }
        *slot = Some(if self.peek()? == b'[' {
            self.receipts(depth + 1)?
        } else {
            self.outside_value(depth)?;
            Err(Bail)
        });
        Ok(())
    }

    /// The value of a chain's `root_hash` member into `slot`; a duplicate member or an escaped string
    /// is left to the reference path, a non-string is recorded as such.
    fn root_hash_member(&mut self, slot: &mut Option<Root>, depth: usize) -> Scan<()> {
        if slot.is_some() {
            return Err(Bail);
        }
        *slot = Some(if self.peek()? == b'"' {
            let r = self.string()?;
            if r.level >= UNVETTED {
                return Err(Bail);
            }
            Root::Str(r.start, r.end)
        } else {
            self.outside_value(depth)?;
            Root::NotString
        });
        Ok(())
    }

    /// A chain candidate object: `receipts` and `root_hash` are recorded; a duplicate of either
    /// (serde_json keeps the last) is left to the reference path.
    fn chain(&mut self, depth: usize) -> Scan<Chain<'a>> {
        let mut receipts: Option<Receipts<'a>> = None;
        let mut root: Option<Root> = None;
        self.outside_object(depth, |s, k, depth| match k {
            b"receipts" => s.receipts_member(&mut receipts, depth),
            b"root_hash" => s.root_hash_member(&mut root, depth),
            _ => s.outside_value(depth),
        })?;
        Ok(Chain {
            receipts: receipts.unwrap_or(Err(Bail)),
            root: root.unwrap_or(Root::Absent),
        })
    }

    /// The `receipts` array, each receipt checked as soon as it is scanned (while its bytes are in
    /// cache); a large array is split between two threads.
    fn receipts(&mut self, depth: usize) -> Scan<Receipts<'a>> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        let mut ignored = CANONICAL;
        self.i += 1;
        self.ws(&mut ignored);
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(Ok(Vec::new()));
        }
        if let Some(stop) = self.split_point() {
            return self.receipts_split(depth, stop);
        }
        Ok(self.run(depth, None)?.receipts)
    }

    /// Where a second thread may start: the first `},` after the middle of the remaining bytes that
    /// is followed by the first receipt's opening bytes (`{"name":`). Only a guess — the scan from
    /// the start confirms it by arriving there, or ignores it.
    fn split_point(&self) -> Option<usize> {
        let b = self.b;
        let rest = b.len().checked_sub(self.i)?;
        if rest < self.parallel_min
            || self.b.get(self.i) != Some(&b'{')
            || std::thread::available_parallelism().map_or(1, usize::from) < 2
        {
            return None;
        }
        let first = b.get(self.i..(self.i + 48).min(b.len()))?;
        let prefix = &first[..=first.iter().position(|&c| c == b':')?];
        let mut at = self.i + rest / 2;
        loop {
            let close = at + b.get(at..)?.iter().position(|&c| c == b'}')?;
            if b.get(close + 1) == Some(&b',') && b.get(close + 2..)?.starts_with(prefix) {
                return Some(close + 2);
            }
            at = close + 1;
        }
    }

    /// Scans the array from its first element with a second thread starting at `stop`; the
    /// second thread's work is used only if this one arrives exactly at `stop` as an element start.
    fn receipts_split(&mut self, depth: usize, stop: usize) -> Scan<Receipts<'a>> {
        let (b, form, parallel_min) = (self.b, self.form, self.parallel_min);
        std::thread::scope(|s| {
            let handle = std::thread::Builder::new()
                .spawn_scoped(s, move || {
                    let mut other = Scanner {
                        b,
                        i: stop,
                        form,
                        members: Vec::new(),
                        scratch: Vec::new(),
                        parallel_min,
                    };
                    let run = other.run(depth, None)?;
                    Ok::<_, Bail>((run.receipts, other.i))
                })
                .ok();
            let first = self.run(depth, if handle.is_some() { Some(stop) } else { None });
            // Always joined, also when its work goes unused: the scope alone waits only until the
            // worker's closure returns, not until its thread has exited, and a thread still
            // exiting holds glibc's thread-exit allocations (which LeakSanitizer reported).
            let joined = handle.map(|h| h.join());
            let first = first?;
            if !first.at_stop {
                return Ok(first.receipts);
            }
            // A panicking worker is a bug; this thread then scans the rest itself.
            let tail = match joined {
                Some(Ok(Ok((tail, end)))) => {
                    self.i = end;
                    tail
                }
                _ => self.run(depth, None)?.receipts,
            };
            Ok(match (first.receipts, tail) {
                (Ok(mut head), Ok(tail)) => {
                    head.extend(tail);
                    Ok(head)
                }
                _ => Err(Bail),
            })
        })
    }

    /// Array elements from the current element start up to and including the closing `]`, or up
    /// to the element starting at `stop`.
    fn run(&mut self, depth: usize, stop: Option<usize>) -> Scan<Run<'a>> {
        let mut ignored = CANONICAL;
        let mut receipts: Receipts<'a> = Ok(Vec::new());
        loop {
            if stop == Some(self.i) {
                return Ok(Run {
                    receipts,
                    at_stop: true,
                });
            }
            if self.peek()? == b'{' {
                let r = self.receipt(depth + 1)?;
                if let Ok(done) = &mut receipts {
                    match check(self.b, &self.members, &r, self.form, &mut self.scratch) {
                        Ok(c) => done.push(c),
                        Err(e) => receipts = Err(e),
                    }
                }
                self.members.clear();
            } else {
                receipts = Err(Bail);
                self.outside_value(depth)?;
            }
            if !self.next_or_close(b']', &mut ignored)? {
                return Ok(Run {
                    receipts,
                    at_stop: false,
                });
            }
        }
    }

    /// One receipt object: checks canonical form and locates `hash` and `previous_hash`.
    fn receipt(&mut self, depth: usize) -> Scan<Receipt> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        let start = self.i;
        let mut level = CANONICAL;
        let mut hash = HashField::Absent;
        let mut previous = None;
        let mut previous_key = None;
        let mut in_order = true;
        let first_member = self.members.len();
        self.i += 1;
        self.ws(&mut level);
        if self.peek()? == b'}' {
            self.i += 1;
        } else {
            loop {
                let member_start = self.i;
                let (k, key, ordered) = self.key(&mut previous_key, &mut level)?;
                in_order &= ordered;
                self.ws(&mut level);
                self.expect(b':')?;
                self.ws(&mut level);
                let name = &self.b[k.start..k.end];
                if name == b"hash" && self.peek()? == b'"' {
                    let v = self.string()?;
                    level = level.max(v.level);
                    hash = HashField::Str {
                        value: (v.start, v.end),
                        member: (member_start, self.i),
                    };
                } else if name == b"hash" {
                    self.value(depth, &mut level)?;
                    hash = HashField::NotString;
                } else if name == b"previous_hash" && self.peek()? == b'"' {
                    let v = self.string()?;
                    level = level.max(v.level);
                    previous = Some((v.start, v.end));
                } else {
                    self.value(depth, &mut level)?;
                }
                self.members.push(Member {
                    name: (k.start, k.end),
                    key,
                    span: (member_start, self.i),
                });
                if !self.next_or_close(b'}', &mut level)? {
                    break;
                }
            }
        }
        let mut unsorted = None;
        if !in_order {
            let b = self.b;
            let ms = &mut self.members[first_member..];
            let name = |m: &Member| (m.key, &b[m.name.0..m.name.1]);
            // Insertion sort: a receipt has few members.
            for j in 1..ms.len() {
                let mut k = j;
                while k > 0 && name_cmp(name(&ms[k - 1]), name(&ms[k])).is_gt() {
                    ms.swap(k - 1, k);
                    k -= 1;
                }
            }
            // A duplicate name (serde_json keeps the last) is left to the reference canonicaliser.
            if ms
                .windows(2)
                .any(|w| name_cmp(name(&w[0]), name(&w[1])).is_eq())
            {
                level = level.max(VALID);
            }
            unsorted = Some(first_member..self.members.len());
        }
        Ok(Receipt {
            start,
            end: self.i,
            level,
            hash,
            previous,
            unsorted,
        })
    }

    /// The whole document: a chain, or an object whose `body.receipt_chain` is one (the reference
    /// takes `/body/receipt_chain` when that pointer resolves).
    fn document(&mut self) -> Scan<Chain<'a>> {
        let mut ignored = CANONICAL;
        self.ws(&mut ignored);
        if self.peek()? != b'{' {
            return Err(Bail);
        }
        let mut top_receipts: Option<Receipts<'a>> = None;
        let mut top_root: Option<Root> = None;
        let mut body_seen = false;
        // Some(None): `receipt_chain` present but not an object.
        let mut nested: Option<Option<Chain>> = None;
        self.outside_object(1, |s, k, depth| match k {
            b"receipts" => s.receipts_member(&mut top_receipts, depth),
            b"root_hash" => s.root_hash_member(&mut top_root, depth),
            b"body" => {
                if body_seen {
                    return Err(Bail);
                }
                body_seen = true;
                if s.peek()? != b'{' {
                    return s.outside_value(depth);
                }
                s.outside_object(depth + 1, |s, k, depth| {
                    if k != b"receipt_chain" {
                        return s.outside_value(depth);
                    }
                    if nested.is_some() {
                        return Err(Bail);
                    }
                    nested = Some(if s.peek()? == b'{' {
                        Some(s.chain(depth + 1)?)
                    } else {
                        s.outside_value(depth)?;
                        None
                    });
                    Ok(())
                })
            }
            _ => s.outside_value(depth),
        })?;
        self.ws(&mut ignored);
        if self.i != self.b.len() {
            return Err(Bail);
        }
        match nested {
            Some(Some(chain)) => Ok(chain),
            Some(None) => Err(Bail),
            None => Ok(Chain {
                receipts: top_receipts.unwrap_or(Err(Bail)),
                root: top_root.unwrap_or(Root::Absent),
            }),
        }
    }
}

/// Lowercase hex of a digest, without allocating.
fn hex64(digest: &[u8]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (pair, byte) in out.chunks_exact_mut(2).zip(digest) {
        pair[0] = HEX_LOWER[usize::from(byte >> 4)];
        pair[1] = HEX_LOWER[usize::from(byte & 15)];
    }
    out
}

/// The hash and `previous_hash` a verified receipt carries.
struct Checked<'a> {
    hash: Cow<'a, [u8]>,
    previous: Option<Cow<'a, [u8]>>,
}

/// Verifies one receipt's hash: a canonical receipt by hashing its raw bytes around `hash`, any
/// other through the reference canonicaliser.
fn check<'a>(
    b: &'a [u8],
    members: &[Member],
    r: &Receipt,
    form: HashForm,
    scratch: &mut Vec<u8>,
) -> Scan<Checked<'a>> {
    if r.level != CANONICAL {
        let v: Value = serde_json::from_slice(&b[r.start..r.end]).map_err(|_| Bail)?;
        let found = match v.get("hash") {
            Some(Value::String(h)) => h.as_str(),
            _ => return Err(Bail),
        };
        let ok = receipt_value_hash(&v) == found
            || (form == HashForm::AcceptNull && receipt_value_hash_null_form(&v) == found);
        if !ok {
            return Err(Bail);
        }
        return Ok(Checked {
            hash: Cow::Owned(found.as_bytes().to_vec()),
            previous: v
                .get("previous_hash")
                .and_then(Value::as_str)
                .map(|p| Cow::Owned(p.as_bytes().to_vec())),
        });
    }
    let HashField::Str {
        value: (vs, ve),
        member: (ms, me),
    } = r.hash
    else {
        return Err(Bail);
    };
    let found = &b[vs..ve];
    if let Some(range) = r.unsorted.clone() {
        let ms = members.get(range).ok_or(Bail)?;
        // The canonical receipt: its members in name order, `hash` left out (or set to null).
        let mut digest = |null_hash: bool| {
            scratch.clear();
            scratch.push(b'{');
            for m in ms {
                let is_hash = b[m.name.0..m.name.1] == *b"hash";
                if is_hash && !null_hash {
                    continue;
                }
                if scratch.len() > 1 {
                    scratch.push(b',');
                }
                if is_hash {
                    scratch.extend_from_slice(b"\"hash\":null");
                } else {
                    scratch.extend_from_slice(&b[m.span.0..m.span.1]);
                }
            }
            scratch.push(b'}');
            hex64(&Sha256::digest(&scratch[..]))
        };
        let ok = digest(false) == found || (form == HashForm::AcceptNull && digest(true) == found);
        if !ok {
            return Err(Bail);
        }
        return Ok(Checked {
            hash: Cow::Borrowed(found),
            previous: r.previous.map(|(s, e)| Cow::Borrowed(&b[s..e])),
        });
    }
    // The bytes to drop: the member and one adjacent comma (or just the member when it is alone).
    let (cut_start, cut_end) = if b[ms - 1] == b',' {
        (ms - 1, me)
    } else if b.get(me) == Some(&b',') {
        (ms, me + 1)
    } else {
        (ms, me)
    };
    let mut h = Sha256::new();
    h.update(&b[r.start..cut_start]);
    h.update(&b[cut_end..r.end]);
    let mut ok = hex64(&h.finalize()) == found;
    if !ok && form == HashForm::AcceptNull {
        // The canonical receipt with `"hash": null` in the same (sorted) place.
        let mut h = Sha256::new();
        h.update(&b[r.start..vs - 1]);
        h.update(b"null");
        h.update(&b[ve + 1..r.end]);
        ok = hex64(&h.finalize()) == found;
    }
    if !ok {
        return Err(Bail);
    }
    Ok(Checked {
        hash: Cow::Borrowed(found),
        previous: r.previous.map(|(s, e)| Cow::Borrowed(&b[s..e])),
    })
}

/// The fast path: `Ok` only when every receipt, link and the root verify. Receipt arrays of at
/// least `parallel_min` bytes are scanned and hashed on two threads.
pub(crate) fn verify(bytes: &[u8], form: HashForm, parallel_min: usize) -> Scan<VerifiedChain> {
    let mut s = Scanner {
        b: bytes,
        i: 0,
        form,
        members: Vec::new(),
        scratch: Vec::new(),
        parallel_min,
    };
    let chain = s.document()?;
    let checked = chain.receipts?;
    let mut root = Sha256::new();
    let mut prior: Option<&[u8]> = None;
    for c in &checked {
        if c.previous.as_deref() != prior {
            return Err(Bail);
        }
        root.update(&c.hash);
        prior = Some(&c.hash);
    }
    let root = hex64(&root.finalize());
    let matches = match chain.root {
        Root::Str(s, e) => bytes[s..e] == root,
        Root::Absent | Root::NotString => checked.is_empty(),
    };
    if !matches {
        return Err(Bail);
    }
    Ok(VerifiedChain {
        // Hex digits are ASCII.
        root_hash: root.iter().map(|&c| char::from(c)).collect(),
        receipts: checked.len(),
    })
}
