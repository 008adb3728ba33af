"""The optional LLM compiler: facts, procedures and summaries extracted by a chat model.

Never on the default path: chosen with ``CAIRN_COMPILER=llm``. It talks to any
OpenAI-compatible ``/chat/completions`` endpoint (``CAIRN_LLM_BASE_URL``, ``CAIRN_LLM_API_KEY``,
``CAIRN_LLM_MODEL``) through the small ``ChatCompleter`` interface, so tests and other providers
plug in without HTTP. The turn and note units still come from the heuristic compiler (recall
needs them, and they are exact); the model adds what rules cannot see.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from cairn.core.analysis import cut_text
from cairn.core.memories import SUMMARY_CHARS
from cairn.engine.compile.drafts import CompileInput, MemoryDraft
from cairn.engine.compile.heuristic import HeuristicCompiler, messages_of
from cairn.errors import CairnError, ConfigError

LLM_KINDS = ("profile_fact", "procedure", "episode_summary")
EPISODES_PER_CALL = 40

SYSTEM_PROMPT = """You turn conversation records into durable memories.
Answer with one JSON object and nothing else:
{"memories": [{"kind": "profile_fact" | "procedure" | "episode_summary",
               "content": "one self-contained sentence",
               "confidence": 0.0-1.0,
               "slot": "speaker:attribute for single-valued facts (e.g. ann:employer) or null",
               "sources": [indexes of the records it comes from]}]}
Only state what the records say. Use absolute dates."""


class LLMCompileError(CairnError):
    """The model server failed or answered something that is not the expected JSON."""

    code = "llm_compiler_error"
    status = 502


class ChatCompleter(Protocol):
    """Answers a chat (a list of ``{role, content}``) with the assistant's text."""

    def complete(self, messages: Sequence[dict[str, str]]) -> str: ...


class OpenAIChatCompleter:
    """``POST {base_url}/chat/completions`` of an OpenAI-compatible server."""

    def __init__(
        self, base_url: str, model: str, api_key: str = "", timeout_s: float = 30.0
    ) -> None:
        if not base_url or not model:
            raise ConfigError("CAIRN_COMPILER=llm needs CAIRN_LLM_BASE_URL and CAIRN_LLM_MODEL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        import httpx  # here: a server that calls no remote model never loads it (6 MB)

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        import httpx

        body = {
            "model": self.model,
            "messages": list(messages),
            "temperature": 0,
            "response_format": {"type": "json_object"},
        }
        try:
            resp = self._client.post(f"{self.base_url}/chat/completions", json=body)
            resp.raise_for_status()
            return str(resp.json()["choices"][0]["message"]["content"])
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise LLMCompileError(f"chat completion failed: {exc}") from exc

    def close(self) -> None:
        self._client.close()


def _records(batch: CompileInput) -> list[tuple[Any, str]]:
    """(episode, one line of text) for every message or text episode, in order."""
    out = []
    for ep in batch.episodes:
        msgs = messages_of(ep)
        if msgs:
            for m in msgs:
                out.append((ep, f"[{m.at.date().isoformat()}] {m.speaker}: {m.text}"))
        else:
            text = ep.payload.get("text") or ep.payload.get("content")
            if isinstance(text, str) and text.strip():
                out.append((ep, f"[{ep.occurred_at.date().isoformat()}] {text.strip()}"))
    return out


class LLMCompiler:
    """Heuristic units plus model-extracted memories."""

    name = "llm"
    version = 1

    def __init__(self, completer: ChatCompleter, model: str = "") -> None:
        self.completer = completer
        self.model = model
        self._heuristic = HeuristicCompiler()

    @classmethod
    def from_settings(cls, settings: Any) -> LLMCompiler:
        return cls(
            OpenAIChatCompleter(
                settings.llm_base_url,
                settings.llm_model,
                settings.llm_api_key,
                settings.llm_timeout_s,
            ),
            model=settings.llm_model,
        )

    def close(self) -> None:
        """Release the completer's connections (if it holds any)."""
        close = getattr(self.completer, "close", None)
        if close is not None:
            close()

    def compile(self, batch: CompileInput) -> list[MemoryDraft]:
        drafts = [
            d
            for d in self._heuristic.compile(batch)
            if d.kind not in ("profile_fact", "episode_summary")
        ]
        records = _records(batch)
        for start in range(0, len(records), EPISODES_PER_CALL):
            drafts.extend(self._extract(records[start : start + EPISODES_PER_CALL]))
        return drafts

    def _extract(self, records: list[tuple[Any, str]]) -> list[MemoryDraft]:
        if not records:
            return []
        listing = "\n".join(f"{i}. {line}" for i, (_, line) in enumerate(records))
        answer = self.completer.complete(
            [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": listing},
            ]
        )
        try:
            items = json.loads(answer)["memories"]
            if not isinstance(items, list):
                raise TypeError("memories is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            raise LLMCompileError(f"the model did not answer the expected JSON: {exc}") from exc
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            kind = item.get("kind")
            content = str(item.get("content") or "").strip()
            sources = [
                s for s in item.get("sources") or [] if isinstance(s, int) and 0 <= s < len(records)
            ]
            if kind not in LLM_KINDS or not content or not sources:
                continue  # provenance is never empty: a memory without sources is dropped
            eps = list({records[s][0].id: records[s][0] for s in sources}.values())
            try:
                confidence = float(item.get("confidence", 0.7))
            except (TypeError, ValueError):
                confidence = 0.7
            slot = item.get("slot") if isinstance(item.get("slot"), str) else None
            out.append(
                MemoryDraft(
                    kind=kind,
                    content=content,
                    source_episode_ids=tuple(e.id for e in eps),
                    valid_from=max(e.occurred_at for e in eps),
                    summary=cut_text(content, SUMMARY_CHARS),
                    confidence=max(0.0, min(1.0, confidence)),
                    session_id=eps[-1].session_id,
                    slot=slot.lower() if slot else None,
                    metadata={
                        "compiler": self.name,
                        "compiler_version": self.version,
                        "model": self.model,
                        "keywords": "",
                    },
                )
            )
        return out
