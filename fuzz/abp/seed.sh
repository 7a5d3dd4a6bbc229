#!/usr/bin/env bash
# Seed the fuzz corpora (fuzz/abp/corpus/<target>, not committed) from the ABP conformance corpus:
# every case's `text`, decoded `base64url`, `entry` and `envelope` input, plus the golden vectors.
set -euo pipefail
cd "$(dirname "$0")"
shared="${AIP_SHARED_DIR:-$(cd ../../.. && pwd)/shared}/abp-conformance"
mkdir -p corpus/decode corpus/canonicalize
python3 - "$shared" <<'PY'
import base64, glob, hashlib, json, os, sys
src = sys.argv[1]
seeds = []
for f in glob.glob(os.path.join(src, "cases", "*.json")):
    for c in json.load(open(f, encoding="utf-8"))["cases"]:
        inp = c["input"]
        for k in ("text", "entry", "envelope"):
            if isinstance(inp.get(k), str):
                seeds.append(inp[k].encode("utf-8"))
        if isinstance(inp.get("base64url"), str):
            s = inp["base64url"]
            try:
                seeds.append(base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))
            except Exception:
                pass
for f in glob.glob(os.path.join(src, "vectors", "*.json")) + glob.glob(os.path.join(src, "schemas", "*.json")):
    seeds.append(open(f, "rb").read())
for s in seeds:
    name = hashlib.sha1(s).hexdigest()
    open(os.path.join("corpus/decode", name), "wb").write(s)
    open(os.path.join("corpus/canonicalize", name), "wb").write(b"\x40" + s)
print(f"seeded {len(seeds)} inputs per target")
PY
