//! Fast receipt-chain verification (spec 18.2) over the received bytes, for chains large enough
//! that canonicalising every receipt through a `serde_json::Value` is the cost (`aip receipts
//! verify`).
//!
//! Kept out of `aip-core` so that the wire model does not pull in a thread pool, SIMD compares and
//! a second `sha2`. It uses only `aip-core`'s public receipt API, and every verdict, root and first
//! broken link equals [`aip_core::chain::verify_document_reference`]'s: the fast path only ever
//! says "verified"; anything else is decided by the reference path.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use aip_core::chain::{DocumentError, HashForm, VerifiedChain, verify_document_reference};

mod scan;

/// Verifies the receipt chain in received bytes: a `ReceiptChain` object, or an envelope carrying
/// one at `/body/receipt_chain`.
///
/// Same verdict, root and first broken link as [`verify_document_reference`], at close to the speed
/// of SHA-256 over the bytes when the receipts arrive in canonical form (as `aip-core` writes them):
/// such receipts are hashed straight from the received bytes. Anything else falls back to the
/// reference path.
pub fn verify_document(bytes: &[u8], form: HashForm) -> Result<VerifiedChain, DocumentError> {
    match verify_document_fast(bytes, form) {
        Some(v) => Ok(v),
        None => verify_document_reference(bytes, form),
    }
}

/// The byte-level fast path alone: `Some` only when the whole chain verifies; `None` leaves the
/// decision (and the error) to [`verify_document_reference`]. Exposed for tests and fuzzing.
pub fn verify_document_fast(bytes: &[u8], form: HashForm) -> Option<VerifiedChain> {
    scan::verify(bytes, form, scan::PARALLEL_MIN_BYTES).ok()
}

/// [`verify_document_fast`] with the two-thread path (scan on one thread, hash on another) taken
/// for every `receipts` array of at least `parallel_min` bytes (normally 128 KiB), so tests and
/// fuzzing can reach it on small chains.
#[doc(hidden)]
pub fn verify_document_fast_split(
    bytes: &[u8],
    form: HashForm,
    parallel_min: usize,
) -> Option<VerifiedChain> {
    scan::verify(bytes, form, parallel_min).ok()
}
