"""An upstream MCP server for `aip serve`'s `[[mcp_upstreams]]` tests, written with the official MCP
Python SDK (pinned `mcp==2.3.0`, its `MCPServer`, formerly FastMCP).

Usage: mcp_upstream_server.py stdio
       mcp_upstream_server.py http PORT

Tools: `add` (a read with structured output), `record` (a mutation that appends its note to the
file named by $UPSTREAM_LOG, so a test can count executions), `fail` (answers isError), `slow`
(sleeps `seconds`), `publish` / `unpublish` (add or drop a text resource while running, so a test
can watch the resource list change), and `hidden` (not in the test's allowlist). Resources:
`memo://greeting` (text) and `memo://settings` (JSON).
"""

import asyncio
import os
import sys
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources.types import TextResource

server = MCPServer("aip-test-upstream")


class Sum(TypedDict):
    sum: int


class Recorded(TypedDict):
    recorded: str


class Slept(TypedDict):
    slept: float


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return {"sum": a + b}


@server.tool()
def record(note: str) -> Recorded:
    """Append a note to the log (a side effect)."""
    path = os.environ.get("UPSTREAM_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(note + "\n")
    return {"recorded": note}


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> Slept:
    """Sleeps, then answers."""
    await asyncio.sleep(seconds)
    return {"slept": seconds}


@server.tool()
def publish(uri: str, text: str) -> Recorded:
    """Offer a text resource from now on."""
    server.add_resource(TextResource(uri=uri, name=uri, text=text, mime_type="text/plain"))
    return {"recorded": uri}


@server.tool()
def unpublish(uri: str) -> Recorded:
    """Stop offering a resource (the SDK has no public removal; this fixture reaches in)."""
    server._resource_manager._resources.pop(uri, None)
    return {"recorded": uri}


@server.tool()
def hidden() -> str:
    """Not offered through aip."""
    return "hidden"


@server.resource("memo://greeting", title="Greeting", description="A fixed greeting.", mime_type="text/plain")
def greeting() -> str:
    return "hello from the upstream"


@server.resource("memo://settings", name="settings", mime_type="application/json")
def settings() -> str:
    return '{"mode": "test"}'


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
