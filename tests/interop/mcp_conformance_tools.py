"""The tools of the official MCP conformance suite's tool scenarios, served by an upstream MCP
server written with the official Python SDK (pinned `mcp==2.3.0`): `aip serve` offers them as
governed capabilities (`[[mcp_upstreams]]`, each under its suite name through `mcp_name`), so the
suite calls them through AIP's admission and gets their content blocks back through the native
result's message parts.

Usage: mcp_conformance_tools.py   (stdio)
"""

import asyncio

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
)

server = MCPServer("aip-conformance-tools")

# A 1x1 red PNG and a minimal (empty) WAV file.
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="


@server.tool()
def test_simple_text() -> list:
    """Returns simple text."""
    return [TextContent(type="text", text="This is a simple text response for testing.")]


@server.tool()
def test_image_content() -> list:
    """Returns an image."""
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool()
def test_audio_content() -> list:
    """Returns audio."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@server.tool()
def test_embedded_resource() -> list:
    """Returns an embedded resource."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="test://embedded-resource",
                mime_type="text/plain",
                text="This is an embedded resource content.",
            ),
        )
    ]


@server.tool()
def test_multiple_content_types() -> list:
    """Returns text, an image and a resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri="test://mixed-content-resource",
                mime_type="application/json",
                text='{"test": "data", "value": 123}',
            ),
        ),
    ]


@server.tool()
def test_error_handling() -> str:
    """Always fails."""
    raise ValueError("This tool intentionally returns an error for testing")


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100."""
    await ctx.report_progress(0, 100)
    await asyncio.sleep(0.05)
    await ctx.report_progress(50, 100)
    await asyncio.sleep(0.05)
    await ctx.report_progress(100, 100)
    return "Tool with progress executed successfully"


if __name__ == "__main__":
    server.run("stdio")
