//! The fast path of [`crate::verify_document`]: receipt-chain verification over the
//! received bytes (spec 18.2).
//!
//! Canonicalising every receipt through a `serde_json::Value` costs several times the SHA-256 of the
//! same bytes. Receipts produced by aip-core (and most senders) are already in the canonical form
//! of [`aip_core::canonical`]: compact, members sorted by name bytes, serde_json's string and number
//! encoding. For such a receipt the hashed bytes are the received bytes minus the `hash` member, so
//! the verifier scans each receipt once, checks that it is canonical, and hashes the bytes around
//! the `hash` member as they stand (a receipt off only in its top-level member order is hashed from
//! its members' bytes in name order).
//!
//! The scan has two levels: a strict one that accepts only the canonical form and is fast, and a
//! general one that rescans whatever the strict one refused and tells how far it is from canonical.
//! Large arrays are hashed on a second thread while this one scans ([`Scanner::receipts_pipelined`]).
//!
//! The fast path only ever answers "verified, with this root". Everything else — a receipt that is
//! not canonical is re-canonicalised through the reference code; bytes that are not JSON, duplicate
//! members that select the chain, a bad hash, link or root, escapes it does not vet — makes it give
//! up ([`Bail`]) so the reference path decides, which keeps the verdicts, the roots and the first
//! broken index identical to [`aip_core::chain::verify_chain_value`] by construction.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};

use serde_json::Value;

use aip_core::chain::{HashForm, VerifiedChain, receipt_value_hash, receipt_value_hash_null_form};

/// The fast path cannot decide; the reference path must.
#[derive(Debug)]
pub(crate) struct Bail;

type Scan<T> = Result<T, Bail>;

/// Deepest nesting the scanner follows (serde_json's own limit is 128).
const MAX_DEPTH: usize = 100;

/// Receipt arrays with at least this many bytes (counted to the document's end) are hashed on a
/// second thread while they are scanned; below ~100 KB handing work over cost more than it saved.
pub(crate) const PARALLEL_MIN_BYTES: usize = 128 << 10;

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

/// A `receipts` array whose receipts, links and root verified; `Err` when the array is not all
/// objects or a receipt or link does not verify (decided only if this chain is the one the
/// reference path would select).
type Receipts = Scan<Verified>;

/// What a verified `receipts` array gives.
struct Verified {
    count: usize,
    /// Lowercase hex root over the receipts' hashes, in order.
    root: [u8; 64],
}

/// A canonical receipt whose hash is still to be computed from the received bytes.
#[derive(Clone, Copy)]
struct Job {
    start: usize,
    end: usize,
    /// Content bounds of the stated `hash` string.
    value: (usize, usize),
    /// Bounds of the whole `hash` member.
    member: (usize, usize),
    /// Received out of member order: the range of its members, sorted by name, in the member list
    /// the job travels with.
    sorted: Option<(usize, usize)>,
}

/// A receipt on its way to the hasher, in chain order.
enum Item<'a> {
    /// To be hashed from the bytes; its stated hash then feeds the root.
    Hash(Job),
    /// Verified already (through the reference canonicaliser); its hash feeds the root.
    Verified(Cow<'a, [u8]>),
}

/// Receipts handed to the hasher's thread at once, with the sorted members their jobs refer to.
struct Batch<'a> {
    items: Vec<Item<'a>>,
    members: Vec<Member>,
}

impl Batch<'_> {
    fn with_capacity(receipts: usize) -> Self {
        Batch {
            items: Vec::with_capacity(receipts),
            members: Vec::new(),
        }
    }
}

/// Receipts in the first batch (small, so the hasher starts early) and in each later one.
const FIRST_BATCH: usize = 8;
const BATCH: usize = 64;

/// Where the scanner sends each receipt it has checked for canonical form and linked.
enum Sink<'s, 'a> {
    /// One thread: hash it now, while its bytes are in cache.
    Inline(&'s mut Hasher<'a>),
    /// Two threads: batch it for the hasher's thread.
    Send {
        tx: mpsc::Sender<Batch<'a>>,
        batch: Batch<'a>,
        /// Receipts in the batch being filled before it is sent.
        limit: usize,
        /// Set by the hasher when a receipt did not verify: nothing more needs hashing.
        failed: &'s AtomicBool,
    },
}

impl<'a> Sink<'_, 'a> {
    /// `members` is the list a [`Job::sorted`] range points into.
    #[inline(always)]
    fn push(&mut self, item: Item<'a>, members: &[Member]) -> Scan<()> {
        match self {
            Sink::Inline(hasher) => hasher.item(&item, members),
            Sink::Send {
                tx,
                batch,
                limit,
                failed,
            } => {
                let item = match item {
                    Item::Hash(mut job) => {
                        if let Some((s, e)) = job.sorted {
                            let ms = members.get(s..e).ok_or(Bail)?;
                            let at = batch.members.len();
                            batch.members.extend_from_slice(ms);
                            job.sorted = Some((at, batch.members.len()));
                        }
                        Item::Hash(job)
                    }
                    verified => verified,
                };
                batch.items.push(item);
                if batch.items.len() >= *limit {
                    if failed.load(Ordering::Relaxed) {
                        return Err(Bail);
                    }
                    *limit = BATCH;
                    // The hasher drops its receiver only after the last batch.
                    let _ = tx.send(std::mem::replace(batch, Batch::with_capacity(BATCH)));
                }
                Ok(())
            }
        }
    }

    /// Hands over what is left; the hasher's thread sees the end of the array once the sink is
    /// dropped.
    fn finish(self) {
        if let Sink::Send { tx, batch, .. } = self
            && !batch.items.is_empty()
        {
            let _ = tx.send(batch);
        }
    }
}

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
const SHA256_INIT: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// Bytes a [`Sha`] collects before it runs the block function over them.
const SHA_PENDING: usize = 8 << 10;

/// SHA-256 driven through the bare block function: input is collected and compressed many blocks
/// per call, and the padding is written into the same buffer, so a receipt of a few hundred bytes
/// costs one call instead of one per `update` plus one for the padding (the per-call setup was a
/// fifth of the hashing time).
struct Sha {
    state: [u32; 8],
    pending: Vec<u8>,
    /// Bytes compressed so far.
    done: u64,
}

impl Sha {
    fn new() -> Self {
        Sha {
            state: SHA256_INIT,
            pending: Vec::with_capacity(SHA_PENDING + 128),
            done: 0,
        }
    }

    #[inline(always)]
    fn update(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        if self.pending.len() >= SHA_PENDING {
            let (blocks, _) = self.pending.as_chunks::<64>();
            sha2_blocks::block_api::compress256(&mut self.state, blocks);
            let n = blocks.len() * 64;
            self.done += n as u64;
            self.pending.drain(..n);
        }
    }

    /// The digest of everything given; starts over.
    fn finish(&mut self) -> [u8; 32] {
        pad(&mut self.pending, self.done);
        let (blocks, _) = self.pending.as_chunks::<64>();
        sha2_blocks::block_api::compress256(&mut self.state, blocks);
        let out = digest_bytes(self.state);
        self.state = SHA256_INIT;
        self.pending.clear();
        self.done = 0;
        out
    }
}

/// SHA-256 of one receipt after another, reusing the work on their common start: receipts of one
/// chain usually open with the same bytes (in name order `actor` comes first, and one actor often
/// writes the whole chain), and the hash state after a run of 64-byte blocks depends on nothing
/// but those blocks. When a message's leading blocks are byte for byte those of the message
/// before, the state after them is taken from that message instead of being computed again; the
/// digests are exactly SHA-256's. At most two calls of the block function a receipt.
struct ReceiptSha {
    /// The message being written, then padded.
    cur: Vec<u8>,
    /// The message before, padded.
    prev: Vec<u8>,
    /// How many leading blocks `prev` shared with the one before it, and the state after them.
    checkpoint: (usize, [u32; 8]),
}

impl ReceiptSha {
    fn new() -> Self {
        ReceiptSha {
            cur: Vec::with_capacity(1024),
            prev: Vec::with_capacity(1024),
            checkpoint: (0, SHA256_INIT),
        }
    }

    #[inline(always)]
    fn update(&mut self, data: &[u8]) {
        self.cur.extend_from_slice(data);
    }

    /// The digest of the bytes given since the last call.
    fn finish(&mut self) -> [u8; 32] {
        pad(&mut self.cur, 0);
        let (blocks, _) = self.cur.as_chunks::<64>();
        let (before, _) = self.prev.as_chunks::<64>();
        // At least the last block is always compressed.
        let shared = blocks[..blocks.len() - 1]
            .iter()
            .zip(before)
            .take_while(|(a, b)| a == b)
            .count();
        let (mut state, from) = match self.checkpoint {
            (at, state) if at > 0 && shared >= at => (state, at),
            _ => (SHA256_INIT, 0),
        };
        if shared > from {
            sha2_blocks::block_api::compress256(&mut state, &blocks[from..shared]);
        }
        self.checkpoint = (shared, state);
        sha2_blocks::block_api::compress256(&mut state, &blocks[shared..]);
        std::mem::swap(&mut self.cur, &mut self.prev);
        self.cur.clear();
        digest_bytes(state)
    }
}

/// Appends SHA-256's padding to a message of which `done` bytes were compressed already.
#[inline(always)]
fn pad(pending: &mut Vec<u8>, done: u64) {
    let bits = (done + pending.len() as u64) * 8;
    pending.push(0x80);
    let zeros = (64 + 56 - pending.len() % 64) % 64;
    pending.resize(pending.len() + zeros, 0);
    pending.extend_from_slice(&bits.to_be_bytes());
}

/// The digest a final hash state stands for.
#[inline(always)]
fn digest_bytes(state: [u32; 8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_exact_mut(4).zip(state) {
        o.copy_from_slice(&w.to_be_bytes());
    }
    out
}

/// Verifies receipts' hashes and folds their hashes into the root, in chain order.
struct Hasher<'a> {
    b: &'a [u8],
    form: HashForm,
    root: Sha,
    count: usize,
    /// Each receipt's canonical bytes.
    receipt: ReceiptSha,
}

impl<'a> Hasher<'a> {
    fn new(b: &'a [u8], form: HashForm) -> Self {
        Hasher {
            b,
            form,
            root: Sha::new(),
            count: 0,
            receipt: ReceiptSha::new(),
        }
    }

    #[inline(always)]
    fn item(&mut self, item: &Item<'a>, members: &[Member]) -> Scan<()> {
        let b = self.b;
        match item {
            Item::Verified(hash) => self.root.update(hash),
            Item::Hash(job) => {
                self.job(job, members)?;
                self.root.update(&b[job.value.0..job.value.1]);
            }
        }
        self.count += 1;
        Ok(())
    }

    /// Checks a canonical receipt's stated hash against the SHA-256 of its bytes without the
    /// `hash` member (or, when the form allows it, with `"hash":null`).
    fn job(&mut self, job: &Job, members: &[Member]) -> Scan<()> {
        let b = self.b;
        let (vs, ve) = job.value;
        let found = &b[vs..ve];
        let h = &mut self.receipt;
        if let Some((s, e)) = job.sorted {
            let ms = members.get(s..e).ok_or(Bail)?;
            // The canonical receipt: its members in name order, `hash` left out (or set to null).
            let mut digest = |null_hash: bool| {
                h.update(b"{");
                let mut first = true;
                for m in ms {
                    let is_hash = b[m.name.0..m.name.1] == *b"hash";
                    if is_hash && !null_hash {
                        continue;
                    }
                    if !first {
                        h.update(b",");
                    }
                    first = false;
                    if is_hash {
                        h.update(b"\"hash\":null");
                    } else {
                        h.update(&b[m.span.0..m.span.1]);
                    }
                }
                h.update(b"}");
                hex64(&h.finish())
            };
            let ok = digest(false) == found
                || (self.form == HashForm::AcceptNull && digest(true) == found);
            return if ok { Ok(()) } else { Err(Bail) };
        }
        let (ms, me) = job.member;
        // The bytes to drop: the member and one adjacent comma (or just the member when it is alone).
        let (cut_start, cut_end) = if b[ms - 1] == b',' {
            (ms - 1, me)
        } else if b.get(me) == Some(&b',') {
            (ms, me + 1)
        } else {
            (ms, me)
        };
        h.update(&b[job.start..cut_start]);
        h.update(&b[cut_end..job.end]);
        let mut ok = hex64(&h.finish()) == found;
        if !ok && self.form == HashForm::AcceptNull {
            // The canonical receipt with `"hash": null` in the same (sorted) place.
            h.update(&b[job.start..vs - 1]);
            h.update(b"null");
            h.update(&b[ve + 1..job.end]);
            ok = hex64(&h.finish()) == found;
        }
        if ok { Ok(()) } else { Err(Bail) }
    }

    fn finish(mut self) -> Verified {
        Verified {
            count: self.count,
            root: hex64(&self.root.finish()),
        }
    }
}

/// The hashing side of a two-thread array: whoever calls this first takes the receiver and hashes
/// every batch until the scanner's sink is gone; later calls return at once.
fn hash_batches<'a>(
    b: &'a [u8],
    form: HashForm,
    rx: &Mutex<Option<mpsc::Receiver<Batch<'a>>>>,
    failed: &AtomicBool,
    out: &Mutex<Option<Receipts>>,
) {
    let Some(rx) = rx.lock().ok().and_then(|mut slot| slot.take()) else {
        return;
    };
    let mut hasher = Hasher::new(b, form);
    let mut verdict = Ok(());
    for batch in rx.iter() {
        if verdict.is_err() {
            continue;
        }
        for item in &batch.items {
            if let Err(e) = hasher.item(item, &batch.members) {
                failed.store(true, Ordering::Relaxed);
                verdict = Err(e);
                break;
            }
        }
    }
    let result = verdict.map(|()| hasher.finish());
    if let Ok(mut slot) = out.lock() {
        *slot = Some(result);
    }
}

/// A chain candidate: the document itself or its `body.receipt_chain`.
struct Chain {
    /// `Err`: `receipts` is absent, not an array of objects, or a receipt's hash is wrong.
    receipts: Receipts,
    root: Root,
}

#[inline(always)]
fn is_special(c: u8) -> bool {
    c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c)
}

/// One bit a byte of 16 bytes, with SIMD compares (`wide` keeps them safe): the quotes, and the
/// other bytes that end a plain run of string content (`\`, control bytes, non-ASCII).
#[inline(always)]
fn classify16(lane: &[u8; 16]) -> (u16, u16) {
    use wide::{CmpEq, CmpLt, i8x16};
    let v = i8x16::new(lane.map(|c| c as i8));
    // Signed: non-ASCII bytes are negative, so one compare flags them and the control bytes.
    let others = v.cmp_eq(i8x16::splat(b'\\' as i8)) | v.cmp_lt(i8x16::splat(0x20));
    // move_mask sets the low 16 bits only.
    (
        v.cmp_eq(i8x16::splat(b'"' as i8)).move_mask() as u16,
        others.move_mask() as u16,
    )
}

/// Index of the first byte at or after `i` that ends a plain run of string content (`"`, `\`, a
/// control byte, or a non-ASCII byte), or `b.len()`. Sixteen bytes at a time ([`classify16`]):
/// string scanning is a large part of verifying a receipt.
#[inline(always)]
fn next_special(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..).and_then(|s| s.first_chunk::<16>()) {
        let (quotes, others) = classify16(chunk);
        let m = quotes | others;
        if m != 0 {
            return i + m.trailing_zeros() as usize;
        }
        i += 16;
    }
    while let Some(&c) = b.get(i) {
        if is_special(c) {
            return i;
        }
        i += 1;
    }
    i
}

/// Where the quotes and the bytes that end a plain run of string content (`\\`, control bytes,
/// non-ASCII) stand in one 64-byte block of the input, one bit a byte. With them a string's end is
/// found with a few bit operations instead of a loop of loads and compares per string, and the
/// block's loads and compares do not wait on the string before (the scan of a receipt was bound
/// by that chain of dependent loads).
#[derive(Clone, Copy)]
struct Masks {
    /// Offset of the block; `usize::MAX` before the first.
    base: usize,
    quote: u64,
    special: u64,
}

impl Masks {
    const NONE: Masks = Masks {
        base: usize::MAX,
        quote: 0,
        special: 0,
    };

    #[inline(always)]
    fn load(b: &[u8], base: usize) -> Masks {
        let (mut quote, mut special) = (0u64, 0u64);
        if let Some(block) = b.get(base..).and_then(|s| s.first_chunk::<64>()) {
            for (n, lane) in block.as_chunks::<16>().0.iter().enumerate() {
                let (mq, ms) = classify16(lane);
                quote |= u64::from(mq) << (16 * n);
                special |= u64::from(ms) << (16 * n);
            }
        } else {
            for (n, &c) in b.get(base..).unwrap_or_default().iter().enumerate() {
                quote |= u64::from(c == b'"') << n;
                special |= u64::from(c != b'"' && is_special(c)) << n;
            }
        }
        Masks {
            base,
            quote,
            special,
        }
    }

    /// The closing quote of the string whose opening quote is `b[open]`, and whether its content
    /// is plain (no escape, control or non-ASCII byte); `None` when `b` ends first. When the
    /// content is not plain the index is only where a plain scan would have stopped looking.
    #[inline(always)]
    fn string_end(&mut self, b: &[u8], open: usize) -> Option<(usize, bool)> {
        let mut base = open & !63;
        if self.base != base {
            *self = Masks::load(b, base);
        }
        // Bits strictly after `open`.
        let after = (!0u64).checked_shl((open - base + 1) as u32).unwrap_or(0);
        let (mut q, mut x) = (self.quote & after, self.special & after);
        loop {
            if q != 0 {
                let t = q.trailing_zeros();
                let inside = (1u64 << t) - 1;
                return Some((base + t as usize, x & inside == 0));
            }
            if x != 0 {
                return Some((base, false));
            }
            base += 64;
            if base >= b.len() {
                return None;
            }
            *self = Masks::load(b, base);
            (q, x) = (self.quote, self.special);
        }
    }
}

/// A member name in strict canonical form at `b[i]` (its opening quote): content bounds. An
/// escaped name is left to the general scan, which compares names only after unescaping.
#[inline(always)]
fn strict_key(b: &[u8], i: usize, masks: &mut Masks) -> Option<(usize, usize)> {
    if *b.get(i)? != b'"' {
        return None;
    }
    match masks.string_end(b, i)? {
        (end, true) => Some((i + 1, end)),
        _ => {
            let end = strict_string(b, i)?;
            if b[i + 1..end].contains(&b'\\') {
                return None;
            }
            Some((i + 1, end))
        }
    }
}

/// [`strict_string`] through the block masks: the index of the closing quote.
#[inline(always)]
fn strict_string_masked(b: &[u8], i: usize, masks: &mut Masks) -> Option<usize> {
    match masks.string_end(b, i)? {
        (end, true) => Some(end),
        _ => strict_string(b, i),
    }
}

/// A string in strict canonical form starting at its opening quote `b[i]`: the index of its
/// closing quote. Escapes are taken only in serde_json's own spelling; non-ASCII must be UTF-8.
#[inline(always)]
fn strict_string(b: &[u8], i: usize) -> Option<usize> {
    let start = i + 1;
    let mut j = start;
    let mut non_ascii = false;
    loop {
        j = next_special(b, j);
        match *b.get(j)? {
            b'"' => break,
            b'\\' => {
                j = match *b.get(j + 1)? {
                    b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => j + 2,
                    b'u' => {
                        let d = b.get(j + 2..j + 6)?;
                        // serde_json writes the control characters without a short escape as
                        // lowercase \u00xx; every other \u escape is not canonical.
                        let low = HEX_LOWER.iter().position(|&h| h == d[3])?;
                        let ok = d[0] == b'0'
                            && d[1] == b'0'
                            && (d[2] == b'0' && !matches!(low, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d)
                                || d[2] == b'1');
                        if !ok {
                            return None;
                        }
                        j + 6
                    }
                    _ => return None,
                }
            }
            c if c < 0x20 => return None,
            _ => {
                non_ascii = true;
                j += 1;
            }
        }
    }
    if non_ascii && std::str::from_utf8(&b[start..j]).is_err() {
        return None;
    }
    Some(j)
}

/// An integer of up to 18 digits (what serde_json writes back unchanged) starting at `b[i]`: the
/// index after it. Anything else (fractions, exponents, `-0`, longer integers) is left to the
/// general scan.
#[inline(always)]
fn strict_number(b: &[u8], i: usize) -> Option<usize> {
    let neg = usize::from(b[i] == b'-');
    let d = i + neg;
    let mut j = d;
    while let Some(b'0'..=b'9') = b.get(j) {
        j += 1;
    }
    let digits = j - d;
    let leading_zero = b.get(d) == Some(&b'0');
    if digits == 0
        || digits > 18
        || (leading_zero && (digits > 1 || neg == 1))
        || matches!(b.get(j), Some(b'.' | b'e' | b'E'))
    {
        return None;
    }
    Some(j)
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

/// [`prefix_key`] of the name at `b[start..end]`; a short name is read as one masked 8-byte load
/// when the bytes after it are there (inside a receipt they always are).
#[inline(always)]
fn prefix_key_at(b: &[u8], start: usize, end: usize) -> u64 {
    let len = end - start;
    if len < 8
        && let Some(word) = b.get(start..).and_then(|s| s.first_chunk::<8>())
    {
        return u64::from_be_bytes(*word) & !(u64::MAX >> (8 * len));
    }
    prefix_key(&b[start..end])
}

/// Byte order of two member names, with their [`prefix_key`]s.
#[inline(always)]
fn name_cmp(x: (u64, &[u8]), y: (u64, &[u8])) -> std::cmp::Ordering {
    x.0.cmp(&y.0).then_with(|| x.1.cmp(y.1))
}

/// Sorts a receipt's members by name (insertion sort: a receipt has few); `true` when two share a
/// name.
fn sort_members(b: &[u8], ms: &mut [Member]) -> bool {
    let name = |m: &Member| (m.key, &b[m.name.0..m.name.1]);
    for j in 1..ms.len() {
        let mut k = j;
        while k > 0 && name_cmp(name(&ms[k - 1]), name(&ms[k])).is_gt() {
            ms.swap(k - 1, k);
            k -= 1;
        }
    }
    ms.windows(2)
        .any(|w| name_cmp(name(&w[0]), name(&w[1])).is_eq())
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
    /// The block masks the strict scan last used.
    masks: Masks,
    /// Top-level members of the receipt strictly scanned before, in received order.
    prev: Vec<Member>,
    /// Bit `n`: member `n` of the receipt before repeated the one before it.
    repeats: u64,
    /// Receipts strictly scanned in this array.
    seen: usize,
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

    /// A string token starting at its opening quote. Always inlined: returning the token through
    /// memory from a call cost more than scanning a typical short string.
    #[inline(always)]
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
        let key = prefix_key_at(self.b, k.start, k.end);
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
    fn receipts_member(&mut self, slot: &mut Option<Receipts>, depth: usize) -> Scan<()> {
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
    fn chain(&mut self, depth: usize) -> Scan<Chain> {
        let mut receipts: Option<Receipts> = None;
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
    /// cache); a large array is hashed on a second thread while this one scans.
    fn receipts(&mut self, depth: usize) -> Scan<Receipts> {
        if depth > MAX_DEPTH {
            return Err(Bail);
        }
        let mut ignored = CANONICAL;
        self.i += 1;
        self.ws(&mut ignored);
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(Ok(Hasher::new(self.b, self.form).finish()));
        }
        let rest = self.b.len() - self.i;
        if rest >= self.parallel_min && rayon::current_num_threads() >= 2 {
            return self.receipts_pipelined(depth);
        }
        let mut hasher = Hasher::new(self.b, self.form);
        let verdict = self.run(depth, &mut Sink::Inline(&mut hasher))?;
        Ok(verdict.map(|()| hasher.finish()))
    }

    /// Scans and links the receipts on this thread while a worker of rayon's pool (kept warm:
    /// starting a thread per call costs more than hashing 100 receipts) hashes them, batch by
    /// batch, and feeds the root. The two sides of the work take about the same time, and
    /// SHA-256 on one core slows a scan on the other far less than a second scan would. Whoever
    /// claims the hashing first does it, so this never waits on a worker that has not started
    /// (the pool may be busy, or this thread its only worker).
    fn receipts_pipelined(&mut self, depth: usize) -> Scan<Receipts> {
        let (b, form) = (self.b, self.form);
        let (tx, rx) = mpsc::channel::<Batch<'a>>();
        let rx = Mutex::new(Some(rx));
        let failed = AtomicBool::new(false);
        let hashed: Mutex<Option<Receipts>> = Mutex::new(None);
        let verdict = rayon::in_place_scope(|s| {
            let (rx, failed, hashed) = (&rx, &failed, &hashed);
            s.spawn(move |_| hash_batches(b, form, rx, failed, hashed));
            let mut sink = Sink::Send {
                tx,
                batch: Batch::with_capacity(FIRST_BATCH),
                limit: FIRST_BATCH,
                failed,
            };
            let verdict = self.run(depth, &mut sink);
            sink.finish();
            hash_batches(b, form, rx, failed, hashed);
            verdict
        })?;
        let hashed = hashed.into_inner().map_err(|_| Bail)?.ok_or(Bail)?;
        Ok(verdict.and(hashed))
    }

    /// Array elements from the current element start up to and including the closing `]`. Each
    /// receipt is checked for canonical form and its link, then goes to `sink`; the outer `Err`
    /// is bytes the fast path cannot scan, the inner one a chain that does not verify.
    fn run(&mut self, depth: usize, sink: &mut Sink<'_, 'a>) -> Scan<Scan<()>> {
        let mut ignored = CANONICAL;
        let mut verdict = Ok(());
        // The stated hash of the receipt before (already verified, or about to be).
        let mut last: Option<Cow<'a, [u8]>> = None;
        let mut first = true;
        // Members are reused only within one array (one depth).
        self.prev.clear();
        (self.repeats, self.seen) = (!0, 0);
        loop {
            if self.peek()? == b'{' {
                let start = self.i;
                let r = match self.strict_receipt(depth + 1) {
                    Some(r) => r,
                    None => {
                        self.i = start;
                        self.members.clear();
                        self.receipt(depth + 1)?
                    }
                };
                if verdict.is_ok() {
                    verdict = self.link(&r, &mut last, first, sink);
                }
                first = false;
                self.members.clear();
            } else {
                verdict = Err(Bail);
                self.outside_value(depth)?;
            }
            if !self.next_or_close(b']', &mut ignored)? {
                return Ok(verdict);
            }
        }
    }

    /// Checks that a scanned receipt links to the one before (the first to none) and hands it to
    /// `sink`: a canonical receipt as a job, any other verified here through the reference
    /// canonicaliser.
    #[inline(always)]
    fn link(
        &self,
        r: &Receipt,
        last: &mut Option<Cow<'a, [u8]>>,
        first: bool,
        sink: &mut Sink<'_, 'a>,
    ) -> Scan<()> {
        let b = self.b;
        let (hash, previous, item) = if r.level != CANONICAL {
            let Stated { hash, previous } = reference_check(&b[r.start..r.end], self.form)?;
            (hash.clone(), previous, Item::Verified(hash))
        } else {
            let HashField::Str { value, member } = r.hash else {
                return Err(Bail);
            };
            let job = Job {
                start: r.start,
                end: r.end,
                value,
                member,
                sorted: r.unsorted.clone().map(|u| (u.start, u.end)),
            };
            (
                Cow::Borrowed(&b[value.0..value.1]),
                r.previous.map(|(s, e)| Cow::Borrowed(&b[s..e])),
                Item::Hash(job),
            )
        };
        let linked = if first {
            previous.is_none()
        } else {
            previous.as_deref() == last.as_deref()
        };
        if !linked {
            return Err(Bail);
        }
        *last = Some(hash);
        sink.push(item, &self.members)
    }

    /// One receipt in the strict canonical form only: the common case, scanned without tracking
    /// how far anything is from canonical. `None` (anything else: whitespace, escapes it would
    /// have to compare, number spellings, duplicate names, bytes that are not JSON) leaves the
    /// receipt to [`Self::receipt`], which rescans it from the same start.
    #[inline(always)]
    fn strict_receipt(&mut self, depth: usize) -> Option<Receipt> {
        if depth > MAX_DEPTH {
            return None;
        }
        let b = self.b;
        let start = self.i;
        let mut i = start + 1;
        let mut hash = HashField::Absent;
        let mut previous = None;
        let mut in_order = true;
        let mut last_key = (0u64, 0usize, 0usize);
        let first_member = self.members.len();
        // Slots whose member repeated the one before.
        let mut hits = 0u64;
        if *b.get(i)? == b'}' {
            self.i = i + 1;
        } else {
            loop {
                let member_start = i;
                let slot = self.members.len() - first_member;
                // A slot whose member changed last time is compared again only every eighth
                // receipt: ids, hashes and data change in every receipt.
                let try_it =
                    slot >= 64 || self.repeats >> slot & 1 == 1 || self.seen.is_multiple_of(8);
                let same = if try_it {
                    self.same_member(member_start, slot)
                } else {
                    None
                };
                let m = match same {
                    Some(m) => {
                        if slot < 64 {
                            hits |= 1 << slot;
                        }
                        self.i = m.span.1;
                        m
                    }
                    None => {
                        let (ks, ke) = strict_key(b, i, &mut self.masks)?;
                        if *b.get(ke + 1)? != b':' {
                            return None;
                        }
                        self.i = ke + 2;
                        self.strict_value(depth)?;
                        Member {
                            name: (ks, ke),
                            key: prefix_key_at(b, ks, ke),
                            span: (member_start, self.i),
                        }
                    }
                };
                let (ks, ke) = m.name;
                if self.members.len() > first_member {
                    in_order &= name_cmp(
                        (last_key.0, &b[last_key.1..last_key.2]),
                        (m.key, &b[ks..ke]),
                    )
                    .is_lt();
                }
                last_key = (m.key, ks, ke);
                let name = &b[ks..ke];
                if name == b"hash" || name == b"previous_hash" {
                    // The value follows `":`; a string's content is inside its quotes.
                    let string = (b[ke + 2] == b'"').then_some((ke + 3, m.span.1 - 1));
                    if name == b"previous_hash" {
                        previous = string;
                    } else {
                        hash = match string {
                            Some(value) => HashField::Str {
                                value,
                                member: m.span,
                            },
                            None => HashField::NotString,
                        };
                    }
                }
                self.members.push(m);
                i = self.i + 1;
                match *b.get(self.i)? {
                    b',' => {}
                    b'}' => break,
                    _ => return None,
                }
            }
            self.i = i;
        }
        // The next receipt compares its members with these, in received order.
        self.repeats = hits;
        self.seen += 1;
        self.prev.clear();
        self.prev.extend_from_slice(&self.members[first_member..]);
        let mut unsorted = None;
        if !in_order {
            // A duplicate name (serde_json keeps the last) is left to the general scan.
            if sort_members(b, &mut self.members[first_member..]) {
                return None;
            }
            unsorted = Some(first_member..self.members.len());
        }
        Some(Receipt {
            start,
            end: self.i,
            level: CANONICAL,
            hash,
            previous,
            unsorted,
        })
    }

    /// The `n`th member of the receipt scanned before, when the bytes at `at` repeat it exactly
    /// and end where it ended: a member's validity and canonical form depend on its bytes alone
    /// (at the same depth), so it needs no second scan. Receipts of one chain repeat most of their
    /// members (actor, type, correlation, timestamps), and comparing bytes is far cheaper than
    /// scanning them.
    #[inline(always)]
    fn same_member(&self, at: usize, n: usize) -> Option<Member> {
        let b = self.b;
        let p = self.prev.get(n)?;
        let len = p.span.1 - p.span.0;
        let end = at + len;
        if p.span.0 >= at
            || !matches!(b.get(end), Some(b',' | b'}'))
            || b.get(at..end)? != &b[p.span.0..p.span.1]
        {
            return None;
        }
        let shift = at - p.span.0;
        Some(Member {
            name: (p.name.0 + shift, p.name.1 + shift),
            key: p.key,
            span: (at, end),
        })
    }

    /// Any value in strict canonical form (see [`Self::strict_receipt`]).
    fn strict_value(&mut self, depth: usize) -> Option<()> {
        let b = self.b;
        let i = self.i;
        match *b.get(i)? {
            b'"' => self.i = strict_string_masked(b, i, &mut self.masks)? + 1,
            b'{' => self.strict_object(depth + 1)?,
            b'[' => self.strict_array(depth + 1)?,
            b'-' | b'0'..=b'9' => self.i = strict_number(b, i)?,
            b't' if b.get(i..i + 4)? == b"true" => self.i = i + 4,
            b'f' if b.get(i..i + 5)? == b"false" => self.i = i + 5,
            b'n' if b.get(i..i + 4)? == b"null" => self.i = i + 4,
            _ => return None,
        }
        Some(())
    }

    fn strict_object(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let b = self.b;
        let mut i = self.i + 1;
        if *b.get(i)? == b'}' {
            self.i = i + 1;
            return Some(());
        }
        let mut last: Option<(u64, usize, usize)> = None;
        loop {
            let (ks, ke) = strict_key(b, i, &mut self.masks)?;
            let key = prefix_key_at(b, ks, ke);
            if let Some((pk, ps, pe)) = last
                && !name_cmp((pk, &b[ps..pe]), (key, &b[ks..ke])).is_lt()
            {
                return None;
            }
            last = Some((key, ks, ke));
            if *b.get(ke + 1)? != b':' {
                return None;
            }
            self.i = ke + 2;
            self.strict_value(depth)?;
            i = self.i + 1;
            match *b.get(self.i)? {
                b',' => {}
                b'}' => {
                    self.i = i;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn strict_array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        let b = self.b;
        self.i += 1;
        if *b.get(self.i)? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.strict_value(depth)?;
            let c = *b.get(self.i)?;
            self.i += 1;
            match c {
                b',' => {}
                b']' => return Some(()),
                _ => return None,
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
            // A duplicate name (serde_json keeps the last) is left to the reference canonicaliser.
            if sort_members(self.b, &mut self.members[first_member..]) {
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
    fn document(&mut self) -> Scan<Chain> {
        let mut ignored = CANONICAL;
        self.ws(&mut ignored);
        if self.peek()? != b'{' {
            return Err(Bail);
        }
        let mut top_receipts: Option<Receipts> = None;
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

/// The two lowercase hex digits of every byte value.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut n = 0;
    while n < 256 {
        t[n] = [HEX_LOWER[n >> 4], HEX_LOWER[n & 15]];
        n += 1;
    }
    t
};

/// Lowercase hex of a digest, without allocating.
fn hex64(digest: &[u8]) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (pair, &byte) in out.chunks_exact_mut(2).zip(digest) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(byte)]);
    }
    out
}

/// The hash and `previous_hash` (when a string) a receipt states.
struct Stated<'a> {
    hash: Cow<'a, [u8]>,
    previous: Option<Cow<'a, [u8]>>,
}

/// Verifies a receipt that is not in canonical form through the reference canonicaliser.
fn reference_check<'a>(receipt: &[u8], form: HashForm) -> Scan<Stated<'a>> {
    let v: Value = serde_json::from_slice(receipt).map_err(|_| Bail)?;
    let found = match v.get("hash") {
        Some(Value::String(h)) => h.as_str(),
        _ => return Err(Bail),
    };
    let ok = receipt_value_hash(&v) == found
        || (form == HashForm::AcceptNull && receipt_value_hash_null_form(&v) == found);
    if !ok {
        return Err(Bail);
    }
    Ok(Stated {
        hash: Cow::Owned(found.as_bytes().to_vec()),
        previous: v
            .get("previous_hash")
            .and_then(Value::as_str)
            .map(|p| Cow::Owned(p.as_bytes().to_vec())),
    })
}

/// The fast path: `Ok` only when every receipt, link and the root verify. Receipt arrays of at
/// least `parallel_min` bytes are hashed on a second thread while they are scanned.
pub(crate) fn verify(bytes: &[u8], form: HashForm, parallel_min: usize) -> Scan<VerifiedChain> {
    let mut s = Scanner {
        b: bytes,
        i: 0,
        form,
        members: Vec::new(),
        masks: Masks::NONE,
        prev: Vec::new(),
        // Set for each array by `run`.
        repeats: 0,
        seen: 0,
        parallel_min,
    };
    let chain = s.document()?;
    let Verified { count, root } = chain.receipts?;
    let matches = match chain.root {
        Root::Str(s, e) => bytes[s..e] == root,
        Root::Absent | Root::NotString => count == 0,
    };
    if !matches {
        return Err(Bail);
    }
    Ok(VerifiedChain {
        // Hex digits are ASCII.
        root_hash: root.iter().map(|&c| char::from(c)).collect(),
        receipts: count,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;
    use sha2::{Digest, Sha256};

    fn reference(data: &[u8]) -> [u8; 32] {
        Sha256::digest(data).into()
    }

    #[test]
    fn the_block_driven_sha256_matches_sha2_at_every_padding_boundary() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut sha = Sha::new();
        for len in (0..300).chain([SHA_PENDING - 1, SHA_PENDING, SHA_PENDING + 1, 20_000]) {
            // Fed in uneven pieces, across the point where pending input is compressed.
            for piece in data[..len].chunks(777) {
                sha.update(piece);
            }
            assert_eq!(sha.finish(), reference(&data[..len]), "length {len}");
        }
    }

    proptest! {
        #[test]
        fn receipt_hashes_that_reuse_a_shared_start_are_exactly_sha256(
            messages in proptest::collection::vec(
                (0usize..400, 0usize..700, any::<u8>()), 1..12)
        ) {
            // Each message keeps a prefix of a common text and then diverges: shared starts
            // of every length, ending inside, at and across block boundaries.
            let common: Vec<u8> = (0..1100u32).map(|i| (i % 97) as u8 + 20).collect();
            let mut sha = ReceiptSha::new();
            for (keep, extra, fill) in messages {
                let mut m = common[..keep].to_vec();
                m.extend(std::iter::repeat_n(fill, extra));
                sha.update(&m);
                prop_assert_eq!(sha.finish(), reference(&m));
            }
        }
    }
}
