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
    SamplingMessage,
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


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the calling client's model (sampling/createMessage, relayed by aip serve)."""
    result = await ctx.request_context.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
    )
    text = getattr(result.content, "text", None) or str(result.content)
    return f"LLM response: {text}"


async def elicit(ctx: Context, message: str, schema: dict) -> str:
    result = await ctx.request_context.session.elicit_form(message, schema)
    return f"action={result.action}, content={result.content}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the calling client's user (elicitation/create, relayed by aip serve)."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return "User response: " + await elicit(ctx, message, schema)


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits with a default for each primitive type (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
    }
    return "Elicitation completed: " + await elicit(ctx, "Defaults", schema)


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits with the five enum shapes of SEP-1330."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    return "Elicitation completed: " + await elicit(ctx, "Enums", schema)


if __name__ == "__main__":
    server.run("stdio")
