#!/usr/bin/env bash
# Seed the fuzz corpora (fuzz/core/corpus/<target>, not committed): the envelopes and receipt chains
# under ../shared (AIP_SHARED_DIR) plus small hand-made receipt pieces for receipt_verify's mode 1.
set -euo pipefail
cd "$(dirname "$0")"
shared="${AIP_SHARED_DIR:-$(cd ../../.. && pwd)/shared}"
mkdir -p corpus/decode_envelope corpus/receipt_verify
python3 - "$shared" <<'PY'
import glob, hashlib, json, os, sys
src = sys.argv[1]
n = 0
for f in glob.glob(os.path.join(src, "**", "*.json"), recursive=True)[:400]:
    b = open(f, "rb").read()
    if len(b) > 64 * 1024:
        continue
    name = hashlib.sha1(b).hexdigest()
    open(os.path.join("corpus/decode_envelope", name), "wb").write(b)
    n += 1
pieces = [
    b'{"id":"r0","data":{"a":1,"b":[true,null,"x"]}}',
    b'{ "z" : 1.5e0 , "a" : "\\u00e9\\/" }',
    b'{"\\ud83d\\ude00":"\xc3\xa9","\xee\x80\x80":-0,"n":12345678901234567890}',
    b'{}',
    b'{"k":"\\u001F\\u001f\\n","arr":[{"y":1,"x":2}]}',
    b'{"a":01,"b":1.0,"c":"\\u0041","d":{"y":1,"x":2}}',
]
for mode in (2, 3, 6, 10, 14, 18, 30, 34, 35, 50):
    s = bytes([mode]) + b"\xff".join(pieces)
    open(os.path.join("corpus/receipt_verify", hashlib.sha1(s).hexdigest()), "wb").write(s)
def chain(pretty):
    import hashlib as h
    prev, rs, hs = None, [], []
    for i in range(3):
        r = {"id": f"r{i}", "data": {"n": i, "s": "x"}}
        if prev: r["previous_hash"] = prev
        d = h.sha256(json.dumps(r, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        r["hash"] = d; prev = d; rs.append(r); hs.append(d)
    c = {"chain_id": "c", "receipts": rs, "root_hash": h.sha256("".join(hs).encode()).hexdigest()}
    return json.dumps(c, indent=1 if pretty else None, sort_keys=not pretty, separators=None if pretty else (",", ":")).encode()
for pretty in (False, True):
    for mode in (0, 1):
        s = bytes([mode]) + chain(pretty)
        open(os.path.join("corpus/receipt_verify", hashlib.sha1(s).hexdigest()), "wb").write(s)
print(f"seeded {n} decode_envelope inputs and 14 receipt_verify inputs")
PY
