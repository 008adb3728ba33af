"""Cairn as an MCP server: memory tools for any MCP client (``cairn mcp``).

``build_server(client)`` registers the tools on an ``MCPServer`` (the official ``mcp`` SDK);
each tool calls the Cairn API through the SDK client it is given, so the server is bound to
that client's API key (one tenant), whether the API runs in-process or behind a URL.
"""

from cairn.mcp.server import TOOL_NAMES, build_server

__all__ = ["TOOL_NAMES", "build_server"]
