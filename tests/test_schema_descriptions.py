"""Every field a client reads or sends is described, in the OpenAPI document and in the MCP tool schemas, both
generated from the one set of models (as the reference MCP memory server and mem0 describe every input)."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import Client

from pcm.endpoint.openapi import openapi_document
from pcm.mcp_server import build_server


def _undescribed(where: str, schema: dict[str, Any]) -> list[str]:
    missing = [f"{where}.{name}" for name, prop in (schema.get("properties") or {}).items()
               if "description" not in prop]
    for name, sub in (schema.get("$defs") or {}).items():
        missing += _undescribed(f"{where}.$defs.{name}", sub)
    return missing


def test_every_openapi_field_has_a_description() -> None:
    schemas = openapi_document("test")["components"]["schemas"]
    missing = [m for name, schema in schemas.items() for m in _undescribed(name, schema)]
    assert not missing, missing


def test_every_mcp_tool_field_has_a_description() -> None:
    async def tools() -> list[Any]:
        async with Client(build_server(object())) as client:  # type: ignore[arg-type]  # listing needs no memory
            return list((await client.list_tools()).tools)

    missing: list[str] = []
    for tool in asyncio.run(tools()):
        missing += _undescribed(f"{tool.name} input", tool.input_schema)
        output = dict(tool.output_schema or {})
        if set(output.get("properties") or {}) == {"result"}:  # the SDK's wrapper around a list: its items are ours
            output = {**output, "properties": {}}
        missing += _undescribed(f"{tool.name} output", output)
    assert not missing, missing
