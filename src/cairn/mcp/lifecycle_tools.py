"""The MCP tools that change or remove what is remembered: ``correct_memory``,
``forget_memory``, ``delete_subject``. Their annotations tell a client they are destructive
(``delete_subject`` irreversibly so), so it can ask the user first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.types import ToolAnnotations
from pydantic import AfterValidator, Field

from cairn.client import AsyncCairn
from cairn.core.subject_id import check_subject_id

# A correction supersedes (history stays readable), forgetting and deleting remove.
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

MemoryId = Annotated[str, Field(description="The memory's id (from search_memories).")]
SubjectToDelete = Annotated[
    str,
    Field(description="The subject to delete everything of."),
    AfterValidator(check_subject_id),
]


def lifecycle_tools(
    client: AsyncCairn, wrap: Callable[[Any], Any]
) -> list[tuple[Callable[..., Any], ToolAnnotations]]:
    """The tools with their annotations; ``wrap`` turns SDK errors into tool errors."""

    @wrap
    async def correct_memory(
        memory_id: MemoryId,
        content: Annotated[str, Field(description="The corrected statement.", min_length=1)],
        reason: Annotated[str | None, Field(description="Why it is corrected.")] = None,
    ) -> dict[str, Any]:
        """Correct a wrong memory. A new version replaces it (the old one stays as history,
        marked superseded) and is what search and context return from now on."""
        new = await client.memories.update(memory_id, content=content, editor="mcp", note=reason)
        return {
            "id": str(new.id),
            "content": new.content,
            "replaces": memory_id,
            "correction": new.metadata.get("correction"),
        }

    @wrap
    async def forget_memory(memory_id: MemoryId) -> dict[str, Any]:
        """Forget one memory for good: it leaves search and context, and compiling the same
        episodes again does not bring it back. Ask the user before calling."""
        result = await client.memories.delete(memory_id)
        return {"memory_id": str(result.memory_id), "forgotten": result.deleted}

    @wrap
    async def delete_subject(subject_id: SubjectToDelete) -> dict[str, Any]:
        """Delete EVERYTHING remembered about a subject: episodes, memories, documents, runs.
        Irreversible; only on the user's explicit request."""
        result = await client.subjects.delete(subject_id)
        return {
            "subject_id": result.subject_id,
            "episodes_deleted": result.episodes_deleted,
            "memories_deleted": result.memories_deleted,
        }

    return [
        (correct_memory, DESTRUCTIVE),
        (forget_memory, DESTRUCTIVE),
        (delete_subject, DESTRUCTIVE_IDEMPOTENT),
    ]


LIFECYCLE_TOOL_NAMES = ("correct_memory", "forget_memory", "delete_subject")
