"""Drives `aip serve`'s MCP endpoint with the official MCP Python SDK (pinned `mcp==2.3.0`).

Usage: mcp_probe.py URL TOKEN MODE [TRANSPORT]
  MODE: auto | legacy; TRANSPORT: streamable (default, URL .../mcp) | sse (URL .../mcp/legacy/sse)

Connects (auto mode first probes `server/discover` and falls back to `initialize`), lists tools,
calls a tool, an approval-gated tool and a keyed tool twice, cancels a long call from the client
side, and tries a wrong token. Prints one JSON object with what it saw; the Rust test asserts on it.
Exit 0 when the probe ran to the end, 2 on an unexpected failure.
"""

import asyncio
import json
import sys

import anyio
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TRANSPORT = "streamable"


def client(url: str, token: str, mode: str, http):
    if TRANSPORT == "sse":
        return Client(sse_client(url, headers={"Authorization": f"Bearer {token}"}), mode="legacy", raise_exceptions=True)
    return Client(streamable_http_client(url, http_client=http), mode=mode, raise_exceptions=True)


def texts(result):
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


def meta_of(result):
    meta = result.meta or {}
    return meta.get("dev.aip/aip", {})


async def probe(url: str, token: str, mode: str) -> dict:
    out: dict = {"mode": mode, "transport": TRANSPORT}
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with client(url, token, mode, http) as c:
            out["protocol_version"] = c.protocol_version
            out["server_name"] = c.server_info.name if c.server_info else None
            tools = await c.list_tools()
            out["tools"] = [t.name for t in tools.tools]
            echo = next(t for t in tools.tools if t.name == "demo_echo")
            out["echo_title"] = echo.title
            echo_result = await c.call_tool("demo_echo", {"hello": "sdk"})
            out["echo"] = {
                "is_error": echo_result.is_error,
                "structured": echo_result.structured_content,
                "action_id": meta_of(echo_result).get("action_id"),
            }
            # A facade tool: the native status of the echo action.
            status = await c.call_tool("aip_action_status", {"action_id": meta_of(echo_result).get("action_id")})
            out["facade"] = {"is_error": status.is_error, "text": status.content[0].text if status.content else None}
            transfer = await c.call_tool("demo_transfer", {"amount_minor": 250, "to": "acct-sdk"})
            out["transfer"] = {
                "is_error": transfer.is_error,
                "structured": transfer.structured_content,
                "facts": meta_of(transfer),
                "texts": texts(transfer),
            }
            keyed = []
            for _ in range(2):
                r = await c.call_tool(
                    "demo_book",
                    {"name": "Sdk", "party_size": 3, "time": "20:00"},
                    meta={"dev.aip/idempotency_key": f"sdk-{mode}-{TRANSPORT}-key"},
                )
                keyed.append({"is_error": r.is_error, "action_id": meta_of(r).get("action_id"), "structured": r.structured_content})
            out["keyed"] = keyed
            # Progress: a streaming capability's chunks arrive as notifications/progress.
            seen_progress = []

            async def on_progress(progress, total, message):
                seen_progress.append(progress)

            counted = await c.call_tool("demo_count", {"n": 5, "interval_ms": 5}, progress_callback=on_progress)
            out["progress"] = {"is_error": counted.is_error, "steps": seen_progress, "meta": meta_of(counted)}
            # Cancel from the client: the SDK sends notifications/cancelled for the request.
            with anyio.move_on_after(1.0):
                await c.call_tool("demo_sleep", {"ms": 30000})
            out["cancel_sent"] = True
            await asyncio.sleep(0.5)
    bad_http = create_mcp_http_client(headers={"Authorization": "Bearer wrong-token"})
    try:
        async with bad_http:
            async with client(url, "wrong-token", mode, bad_http) as c:
                await c.list_tools()
        out["wrong_token"] = "connected"
    except BaseException as exc:  # noqa: BLE001 - any failure to connect is the expected outcome
        out["wrong_token"] = type(exc).__name__
    return out


def main() -> int:
    global TRANSPORT
    url, token, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    TRANSPORT = sys.argv[4] if len(sys.argv) > 4 else "streamable"
    try:
        result = anyio.run(probe, url, token, mode)
    except BaseException as exc:  # noqa: BLE001
        import traceback

        print(json.dumps({"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}))
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
