"""The MCP tools. Each is a thin, documented call into ``AsyncCairn``.

Errors from the API come back to the MCP client as tool errors whose text carries the stable
code, the HTTP status and the request id, e.g.
``template_missing_field (422): ... [request 4c1d...]``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from cairn import __version__
from cairn.client import APIError, AsyncCairn, CairnClientError
from cairn.core.subject_id import SUBJECT_ID_RULE, SubjectIdStr
from cairn.mcp.lifecycle_tools import LIFECYCLE_TOOL_NAMES, lifecycle_tools

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

SubjectId = Annotated[
    SubjectIdStr,
    Field(
        description="Who or what the memory is about, e.g. 'user-42', 'user@example.com' or "
        f"'customer:globex' ({SUBJECT_ID_RULE})."
    ),
]
SessionId = Annotated[
    str | None,
    Field(
        description="Conversation id; episodes of the same session are recalled as recent turns."
    ),
]

INSTRUCTIONS = """\
Cairn is long-term memory. Record what happens with record_episode (or apply_template for a
structured note), compile_memories to distil durable memories, and call get_context before
answering to recall what is known about a subject. Slates are small working-memory files of a
ladder: read_slate / write_slate. To fix a wrong memory use correct_memory; forget_memory and
delete_subject remove data for good — only when the user asks.
"""

# A tool and what it tells the client about itself (read-only, destructive, ...).
Tool = tuple[Callable[..., Any], ToolAnnotations]

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def _tool_errors(fn: F) -> F:
    """Turn SDK errors into MCP tool errors that keep the code and request id, and answers
    into structured content (with the same JSON, compact, as text for older clients)."""

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = await fn(*args, **kwargs)
        except APIError as exc:
            rid = f" [request {exc.request_id}]" if exc.request_id else ""
            raise ToolError(f"{exc.code} ({exc.status}): {exc.message}{rid}") from exc
        except CairnClientError as exc:
            raise ToolError(f"cairn unreachable: {exc}") from exc
        except ValueError as exc:
            raise ToolError(f"invalid input: {exc}") from exc
        text = json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str)
        content = [TextContent(type="text", text=text)]
        return CallToolResult(content=content, structured_content=result)

    return wrapper  # type: ignore[return-value]


def _invalid_arguments(exc: ValidationError) -> str:
    """A validation error as the model should read it: each field and what is wrong, without
    pydantic's input echo and help-URL lines."""
    problems = []
    for e in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in e["loc"]) or "arguments"
        problems.append(f"{where}: {str(e['msg']).removeprefix('Value error, ')}")
    return "invalid arguments: " + "; ".join(problems)


class InvalidArguments(ToolError):
    """Arguments that fit the schema but not together (a tool's own check): worded as the
    schema's errors are, ``<tool>: invalid arguments: <problem>``."""


class CairnMCPServer(MCPServer[Any]):
    """The MCP server, with argument validation errors worded for the model."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        schema = self._tool_input_schema(name)
        if schema is not None and arguments:
            known = schema.get("properties", {})
            unknown = sorted(str(k) for k in arguments if k not in known)
            if unknown:
                # A misspelt argument would otherwise be dropped and the call do something else.
                raise ToolError(
                    f"{name}: invalid arguments: unknown {', '.join(unknown)}; "
                    f"arguments are {', '.join(known) or 'none'}"
                )
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(f"{name}: {_invalid_arguments(exc.__cause__)}") from None
            if isinstance(exc.__cause__, InvalidArguments):  # a tool's own check of them
                raise ToolError(f"{name}: invalid arguments: {exc.__cause__}") from None
            raise


def _memory(m: Any) -> dict[str, Any]:
    out = {
        "id": str(m.id),
        "kind": m.kind,
        "content": m.content,
        "confidence": m.confidence,
        "status": m.status,
        "source_episode_ids": [str(e) for e in m.source_episode_ids],
    }
    if m.score is not None:
        out["score"] = m.score
    return out


def _episode(e: Any) -> dict[str, Any]:
    return e.model_dump(
        mode="json",
        exclude={"metadata", "provenance"} if not e.metadata and not e.provenance else set(),
    )


def _episode_tools(client: AsyncCairn) -> list[Tool]:
    """The tool that records an episode."""

    @_tool_errors
    async def record_episode(
        subject_id: SubjectId,
        text: Annotated[
            str | None, Field(description="What happened, as plain text (stored as payload.text).")
        ] = None,
        payload: Annotated[
            dict[str, Any] | None,
            Field(description="Structured event data instead of (or besides) text."),
        ] = None,
        type: Annotated[
            str,
            Field(
                description="Event type, e.g. 'message', 'note', 'support.ticket'.",
                min_length=1,
                max_length=128,
            ),
        ] = "note",
        source: Annotated[
            str, Field(description="Where it came from.", min_length=1, max_length=256)
        ] = "mcp",
        session_id: SessionId = None,
        idempotency_key: Annotated[
            str | None, Field(description="Retries with the same key return the original episode.")
        ] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Extra labels.")] = None,
    ) -> dict[str, Any]:
        """Record an episode (an append-only event) about a subject: a message, an observation,
        a decision. Give `text`, or a structured `payload`, or both. Returns the stored episode
        with its id."""
        body = dict(payload or {})
        if text is not None and not text.strip() and not body:
            raise InvalidArguments("text: blank; give what happened, or a non-empty payload")
        if text is not None:
            body["text"] = text
        if not body:
            raise InvalidArguments("give text or a non-empty payload")
        ep = await client.episodes.create(
            subject_id,
            source=source,
            type=type,
            payload=body,
            metadata=metadata,
            session_id=session_id,
            idempotency_key=idempotency_key,
        )
        return _episode(ep)

    return [(record_episode, WRITE)]


def _template_tools(client: AsyncCairn) -> list[Tool]:
    """The memory-template tools: apply one, list them."""

    @_tool_errors
    async def apply_template(
        template_id: Annotated[
            str,
            Field(
                description="Template id, e.g. 'user-preference', "
                "'project-decision' (see list_templates)."
            ),
        ],
        subject_id: SubjectId,
        values: Annotated[
            dict[str, str],
            Field(
                description="Field name -> string value. Unknown fields and missing required "
                "fields are rejected."
            ),
        ],
        session_id: SessionId = None,
        idempotency_key: Annotated[
            str | None, Field(description="Retries with the same key return the original episode.")
        ] = None,
    ) -> dict[str, Any]:
        """Fill a memory template with values and record the resulting episode (a consistent,
        provenance-tagged note such as a preference, decision or incident summary)."""
        ep = await client.templates.apply(
            template_id, subject_id, values, session_id=session_id, idempotency_key=idempotency_key
        )
        return _episode(ep)

    @_tool_errors
    async def list_templates() -> dict[str, Any]:
        """List the memory templates (id, title, episode type, fields with which are
        required) that apply_template accepts."""
        templates = await client.templates.list()
        return {
            "templates": [
                {
                    "id": t.id,
                    "version": t.version,
                    "title": t.title,
                    "description": t.description,
                    "episode_type": t.episode_type,
                    "fields": [f.model_dump(mode="json") for f in t.fields],
                }
                for t in templates
            ]
        }

    return [(apply_template, WRITE), (list_templates, READ_ONLY)]


def _recall_tools(client: AsyncCairn) -> list[Tool]:
    """Compiling memories and recalling them: search, context."""

    @_tool_errors
    async def compile_memories(subject_id: SubjectId) -> dict[str, Any]:
        """Compile the subject's new episodes into durable memories (facts, preferences,
        notes) with provenance. Safe to repeat: already compiled episodes make no
        duplicates."""
        created: list[dict[str, Any]] = []
        while True:
            result = await client.memories.compile(subject_id)
            created.extend(_memory(m) for m in result.memories)
            if not result.has_more:
                break
        return {"subject_id": subject_id, "memories_created": len(created), "memories": created}

    @_tool_errors
    async def search_memories(
        subject_id: SubjectId,
        query: Annotated[
            str,
            Field(
                description="What to look for; leave it out to list the newest memories "
                "(of `kinds`, if given)."
            ),
        ] = "",
        kinds: Annotated[
            list[str] | None, Field(description="Only these memory kinds, e.g. ['profile_fact'].")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Most results.")] = 10,
    ) -> dict[str, Any]:
        """Search a subject's compiled memories; results are ranked, each with a score in
        [0, 1] and the ids of the episodes it came from. Without a query, the subject's
        memories (of `kinds`) newest first, with no score."""
        result = await client.memories.search(subject_id, query, kinds=kinds, limit=limit)
        return {"memories": [_memory(m) for m in result.memories]}

    @_tool_errors
    async def get_context(
        subject_id: SubjectId,
        task: Annotated[
            str,
            Field(
                description="What you are about to do or answer; used to rank what is recalled.",
                min_length=1,
            ),
        ],
        max_tokens: Annotated[
            int | None, Field(ge=1, le=200_000, description="Token budget of the returned context.")
        ] = None,
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Recall what Cairn knows about a subject for a task: ranked memories and recent
        turns of the session, packed under a token budget and rendered as text (`context`)."""
        bundle = await client.context(
            subject_id, task, max_tokens=max_tokens, session_id=session_id
        )
        return {
            "context": bundle.assembled_context,
            "token_estimate": bundle.token_estimate,
            "facts": [_memory(m) for m in bundle.facts + bundle.procedures],
            "episodes": [
                {"id": str(e.id), "type": e.type, "payload": e.payload, "session_id": e.session_id}
                for e in bundle.episodes
            ],
        }

    return [(compile_memories, WRITE), (search_memories, READ_ONLY), (get_context, READ_ONLY)]


def _browse_tools(client: AsyncCairn) -> list[Tool]:
    """A subject's timeline and the list of subjects."""

    @_tool_errors
    async def get_timeline(
        subject_id: SubjectId,
        limit: Annotated[int, Field(ge=1, le=1000, description="Items of each list.")] = 50,
        offset: Annotated[int, Field(ge=0, description="Skip this many.")] = 0,
    ) -> dict[str, Any]:
        """A subject's episodes and memories in time order."""
        t = await client.timeline(subject_id, limit=limit, offset=offset)
        return {
            "subject_id": t.subject_id,
            "episodes": [_episode(e) for e in t.episodes],
            "memories": [_memory(m) for m in t.memories],
            "episodes_has_more": t.episodes_has_more,
            "memories_has_more": t.memories_has_more,
        }

    @_tool_errors
    async def list_subjects(
        prefix: Annotated[str | None, Field(description="Only ids starting with this.")] = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> dict[str, Any]:
        """List the subjects that have memory, with their episode and memory counts."""
        result = await client.subjects.list(limit=limit, offset=offset, prefix=prefix)
        return result.model_dump(mode="json")

    return [(get_timeline, READ_ONLY), (list_subjects, READ_ONLY)]


def _slate_tools(client: AsyncCairn) -> list[Tool]:
    """Working memory: list, read and write slates."""

    @_tool_errors
    async def list_slates(
        ladder: Annotated[str | None, Field(description="Only this ladder's slates.")] = None,
    ) -> dict[str, Any]:
        """List the working-memory slates (per ladder) with their token usage and limits."""
        return (await client.slates.list(ladder=ladder)).model_dump(mode="json")

    @_tool_errors
    async def read_slate(
        ladder: Annotated[str, Field(description="The ladder that declares the slate.")],
        slate: Annotated[str, Field(description="The slate's title, e.g. 'Memory'.")],
        folder: Annotated[
            str | None,
            Field(description="A folder; omit for the slate's tree of folders and files."),
        ] = None,
        file: Annotated[
            str | None, Field(description="A file of the folder; omit for the folder's index.")
        ] = None,
        user_id: Annotated[str | None, Field(description="User of a per-user slate.")] = None,
    ) -> dict[str, Any]:
        """Read working memory: a slate file's content, a folder's index (files and sizes),
        or the slate's tree when no folder is given."""
        if folder is None:
            if file is not None:
                raise ValueError(f"file {file!r} needs its folder: give folder too")
            return await client.slates.tree(ladder, slate, user_id=user_id)
        if file is None:
            index = await client.slates.index(ladder, slate, folder, user_id=user_id)
            return {"folder": folder, "index": index}
        content = await client.slates.read(ladder, slate, folder, file, user_id=user_id)
        return {"folder": folder, "file": file, "content": content}

    @_tool_errors
    async def write_slate(
        ladder: Annotated[str, Field(description="The ladder that declares the slate.")],
        slate: Annotated[str, Field(description="The slate's title, e.g. 'Memory'.")],
        folder: Annotated[str, Field(description="The folder, e.g. 'facts'.")],
        file: Annotated[str, Field(description="The file, e.g. 'core.md'.")],
        content: Annotated[
            str,
            Field(
                description="Text to write; for mergeByKey the JSON text of an object or "
                "array, merged into the file's array by `key`."
            ),
        ],
        on: Annotated[
            Literal["append", "overwrite", "mergeByKey"],
            Field(description="append (default), overwrite, or mergeByKey for JSON arrays."),
        ] = "append",
        key: Annotated[str | None, Field(description="The key field for mergeByKey.")] = None,
        user_id: Annotated[str | None, Field(description="User of a per-user slate.")] = None,
    ) -> dict[str, Any]:
        """Write to working memory. The folder's token limit always holds: older entries are
        evicted (FIFO/LRU) or the write is rejected, as the slate declares. Returns the new
        usage and any evictions."""
        result = await client.slates.write(
            ladder, slate, folder, file, content, on=on, key=key, user_id=user_id
        )
        return result.model_dump(mode="json", exclude_none=True)

    return [(list_slates, READ_ONLY), (read_slate, READ_ONLY), (write_slate, WRITE)]


def build_server(client: AsyncCairn, *, name: str = "cairn") -> MCPServer[Any]:
    """An MCP server whose tools act through ``client`` (and so as its tenant)."""
    server: MCPServer[Any] = CairnMCPServer(
        name, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    tools: list[Tool] = [
        *_episode_tools(client),
        *_template_tools(client),
        *_recall_tools(client),
        *_browse_tools(client),
        *_slate_tools(client),
        *lifecycle_tools(client, _tool_errors),
    ]
    for fn, hints in tools:
        server.add_tool(fn, annotations=hints, structured_output=True)
    return server


TOOL_NAMES = (
    "record_episode",
    "apply_template",
    "list_templates",
    "compile_memories",
    "search_memories",
    "get_context",
    "get_timeline",
    "list_subjects",
    "list_slates",
    "read_slate",
    "write_slate",
    *LIFECYCLE_TOOL_NAMES,
)
