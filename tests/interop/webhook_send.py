"""A Standard Webhooks sender for the ingress tests (crates/aip-cli/tests/serve_webhooks.rs).

Signs each delivery with the `standardwebhooks` 1.1.0 library (pinned in .ci/run), optionally spoils
it the way a forger or a broken sender would, POSTs it and reports what the server answered.

Reads a JSON list of cases on stdin, each:
  {"name", "url", "secret", "id", "body" (text), "ts_offset" (seconds, default 0),
   "tamper": null | "flip" | "reserialize" | "drop:<header>" | "rotate" | "ts:<value>"}
Prints one JSON list of {"name", "status", "body", "retry_after"} (body parsed as JSON when it is;
retry_after is the Retry-After header or null).
Exit 0 when every case got an HTTP answer, 2 when a connection failed.
"""

import json
import sys
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone

from standardwebhooks import Webhook


def delivery(case):
    body = case["body"]
    ts = datetime.now(tz=timezone.utc) + timedelta(seconds=case.get("ts_offset", 0))
    signature = Webhook(case["secret"]).sign(case["id"], ts, body)
    headers = {
        "content-type": "application/json",
        "webhook-id": case["id"],
        "webhook-timestamp": str(int(ts.timestamp())),
        "webhook-signature": signature,
    }
    raw = body.encode("utf-8")
    tamper = case.get("tamper")
    if tamper == "flip":
        # One byte changed after signing.
        raw = raw[:-2] + bytes([raw[-2] ^ 0x01]) + raw[-1:]
    elif tamper == "reserialize":
        # The same JSON, written differently, under the original signature.
        raw = json.dumps(json.loads(body), indent=2, sort_keys=True).encode("utf-8")
    elif tamper == "rotate":
        # A key rotation: a signature no key verifies first, the good one second.
        headers["webhook-signature"] = "v1,bm90IGEgc2lnbmF0dXJl " + signature
    elif tamper and tamper.startswith("drop:"):
        del headers[tamper[len("drop:"):]]
    elif tamper and tamper.startswith("ts:"):
        headers["webhook-timestamp"] = tamper[len("ts:"):]
    return raw, headers


def send(case):
    raw, headers = delivery(case)
    request = urllib.request.Request(case["url"], data=raw, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text, retry_after = response.status, response.read(), response.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        status, text, retry_after = error.code, error.read(), error.headers.get("Retry-After")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = text.decode("utf-8", "replace")
    return {"name": case["name"], "status": status, "body": parsed, "retry_after": retry_after}


def main():
    cases = json.load(sys.stdin)
    results = []
    try:
        for case in cases:
            results.append(send(case))
    except (urllib.error.URLError, ConnectionError) as error:
        print(json.dumps({"error": str(error), "results": results}))
        return 2
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
