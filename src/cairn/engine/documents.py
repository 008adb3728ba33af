"""DocumentSink: documents are cut into overlapping chunks, stored and indexed, once per key.

Chunks are exact substrings of the document cut at word boundaries: each holds at most
``chunk_tokens`` tokens (a single longer word is cut by tokens), and consecutive chunks share
about ``chunk_overlap`` tokens so a sentence on a boundary is found whole in one of them.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cairn.core.analysis import first_grapheme
from cairn.core.memory import Document, DocumentCommit
from cairn.core.scope import Scope
from cairn.core.tokens import Tokenizer
from cairn.engine.erasure_watch import announce, forget_locally
from cairn.errors import NotFound
from cairn.store import Store
from cairn.store.documents import NewChunk

_PIECE = re.compile(r"\S+\s*|\s+")
_WINDOW = 32  # characters per token, at most, when a long word is cut


class ChunkSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_tokens: int = Field(default=200, ge=16, le=8192)
    chunk_overlap: int = Field(default=40, ge=0)

    @model_validator(mode="after")
    def _overlap_smaller(self) -> ChunkSettings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than chunk_tokens "
                f"({self.chunk_tokens})"
            )
        return self


def _pieces(text: str, limit: int, tokenizer: Tokenizer) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of each word with its trailing space; a word longer than
    ``limit`` tokens is cut into parts that fit."""
    out: list[tuple[int, int, int]] = []
    for m in _PIECE.finditer(text):
        if not m.group().strip():
            continue  # leading whitespace
        start, rest = m.start(), m.group()
        while True:
            # A long word (unspaced Chinese or Japanese: a whole paragraph) is cut from a
            # window at its start, never counted whole again after each cut (that was
            # quadratic: 50 s for 840 KB). A token spans far fewer than WINDOW characters.
            window = rest[: limit * _WINDOW]
            count = tokenizer.count(window) if len(window) == len(rest) else limit + 1
            if count <= limit:
                break
            head = tokenizer.truncate(window, limit) or first_grapheme(rest)
            out.append((start, start + len(head), tokenizer.count(head)))
            start, rest = start + len(head), rest[len(head) :]
        if rest:
            out.append((start, start + len(rest), count))
    return out


def chunk_text(text: str, settings: ChunkSettings, tokenizer: Tokenizer) -> list[NewChunk]:
    """Cut ``text`` into chunks (see the module docstring). Blank text has no chunks."""
    size, overlap = settings.chunk_tokens, settings.chunk_overlap
    pieces = _pieces(text, size, tokenizer)
    chunks: list[NewChunk] = []
    i, n = 0, len(pieces)
    while i < n:
        j, total = i, 0
        while j < n and (j == i or total + pieces[j][2] <= size):
            total += pieces[j][2]
            j += 1
        # BPE merges across a word boundary can differ from the sum of the parts: recount.
        while True:
            content = text[pieces[i][0] : pieces[j - 1][1]].rstrip()
            count = tokenizer.count(content)
            if count <= size or j - 1 == i:
                break
            j -= 1
        start = pieces[i][0]
        chunks.append(NewChunk(content, start, start + len(content), count))
        if j >= n:
            break
        k, back = j, 0
        while k - 1 > i and back + pieces[k - 1][2] <= overlap:
            k -= 1
            back += pieces[k][2]
        i = k
    return chunks


def put_document(
    store: Store,
    tenant_id: str,
    document: Document,
    settings: ChunkSettings,
    tokenizer: Tokenizer,
) -> DocumentCommit:
    """Chunk and store ``document``; a repeated key returns the original, writing nothing."""
    chunks = chunk_text(document.content, settings, tokenizer)
    stored = store.documents.put(
        tenant_id,
        document.scope,
        dataset_id=document.dataset_id,
        document_id=document.document_id,
        idempotency_key=document.key,
        title=document.title,
        metadata_=dict(document.metadata),
        chunks=chunks,
    )
    return DocumentCommit(
        id=stored.id,
        dataset_id=stored.dataset_id,
        document_id=stored.document_id,
        idempotency_key=stored.idempotency_key,
        chunk_count=stored.chunk_count,
        created=stored.created,
    )


def delete_document(
    store: Store, tenant_id: str, scope: Scope, dataset_id: str, document_id: str
) -> tuple[int, int]:
    """Delete the scope's document ``document_id`` of ``dataset_id``, every stored version of
    it (one per idempotency key) with its chunks, so none of its text stays searchable or
    stored; ``(documents, chunks)`` removed. Putting it again afterwards stores it anew."""
    with store.transaction() as tx:
        docs, chunks = tx.documents.delete(tenant_id, scope, dataset_id, document_id)
        if chunks:
            tx.lifecycle.purge_index(tenant_id)
        if docs:
            # Every process drops its caches of the tenant, this one's token counts too
            # (its watch reads the log within about a second).
            announce(tx, tenant_id)
    if not docs:
        raise NotFound(
            f"no document {document_id!r} in dataset {dataset_id!r} of this scope",
            code="document_not_found",
        )
    try:
        forget_locally(store, None, tenant_id)
    finally:
        store.lifecycle.checkpoint()
    return docs, chunks
