"""Chat model providers: an OpenAI-compatible HTTP provider and the deterministic ``scripted`` one.

A step asks for a model by name; ``ProviderRouter`` maps that name to a provider and the
provider's own model name:

1. the ladder's ``models:`` mapping (``{name: {provider, model?}}``; the key ``"*"`` catches any
   name not listed), else
2. the default provider ``default`` — the OpenAI-compatible server configured by
   ``CAIRN_LLM_BASE_URL`` / ``CAIRN_LLM_API_KEY`` / ``CAIRN_LLM_MODEL``.

Errors: an unreachable or failing model server is ``ProviderError`` (502 ``provider_error``);
a model name nobody serves is ``ProviderNotConfigured`` (503 ``provider_not_configured``).
"""

from __future__ import annotations

import json
import re
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cairn.core.tokens import get_tokenizer
from cairn.errors import CairnError, Unavailable
from cairn.ladders.redact import redact

if TYPE_CHECKING:
    import httpx

DEFAULT_PROVIDER = "default"
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class ProviderError(CairnError):
    """The model server failed (after retries) or answered something unusable."""

    code = "provider_error"
    status = 502


class ProviderNotConfigured(Unavailable):
    code = "provider_not_configured"
    status = 503


@dataclass
class ChatReply:
    """A model's answer to one chat request."""

    content: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)  # temperature, max_tokens, ...


class ChatProvider(Protocol):
    name: str

    def complete(self, request: ChatRequest) -> ChatReply: ...

    def stream(self, request: ChatRequest) -> Iterator[str | ChatReply]:
        """Yield text deltas, then the full ``ChatReply`` last."""
        ...


def count_message_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Prompt tokens as cl100k counts them, plus OpenAI's small per-message overhead."""
    tok = get_tokenizer()
    return sum(tok.count(str(m.get("content") or "")) + 4 for m in messages) + 2


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAIChatProvider:
    """Chat completions over HTTP against any OpenAI-compatible server (OpenAI, vLLM, Ollama,
    llama.cpp). Retries connection errors, timeouts and 408/409/429/5xx with exponential
    backoff; never retries other 4xx answers."""

    def __init__(
        self,
        name: str,
        base_url: str,
        api_key: str = "",
        *,
        timeout_s: float = 30.0,
        retries: int = 2,
        backoff_s: float = 0.25,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.name = name
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.retries = retries
        self.backoff_s = backoff_s
        import httpx  # here: a server that calls no remote model never loads it (6 MB)

        hdrs = {"Content-Type": "application/json", **(headers or {})}
        # Never repeated in an error: the key and any header value long enough to be one.
        self._secrets = [api_key, *(v for v in (headers or {}).values() if len(v) >= 8)]
        if api_key:
            hdrs["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=hdrs,
            timeout=httpx.Timeout(timeout_s),
            transport=transport,
        )
        # A reload replaces every ladder's providers while runs may still use the old ones, so
        # nobody closes those by hand: the client's connection pool is closed once the provider
        # is garbage (a transport passed in belongs to the caller and is left open).
        if transport is None:
            weakref.finalize(self, self._client.close)

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    def close(self) -> None:
        self._client.close()

    def _body(self, request: ChatRequest, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            **request.options,
            "model": request.model,
            "messages": request.messages,
        }
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _send(self, body: dict[str, Any], stream: bool) -> httpx.Response:
        """POST with retries; the returned response is open (stream) or read."""
        import httpx

        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)))
            try:
                req = self._client.build_request("POST", "/chat/completions", json=body)
                resp = self._client.send(req, stream=stream)
            except httpx.TimeoutException:
                last = "timed out"
                continue
            except httpx.TransportError as exc:
                last = f"could not connect ({type(exc).__name__})"
                continue
            if resp.status_code < 400:
                return resp
            # The answer may echo what it was sent (``Incorrect API key provided: Bearer …``).
            text = redact(resp.read().decode("utf-8", "replace"), self._secrets)[:500]
            resp.close()
            last = f"HTTP {resp.status_code}: {text}"
            if resp.status_code not in RETRY_STATUSES:
                break
        raise ProviderError(
            f"model server {self.name!r} at {self.base_url} failed: {last}",
            details={"provider": self.name, "attempts": attempt + 1},
        )

    def complete(self, request: ChatRequest) -> ChatReply:
        resp = self._send(self._body(request, stream=False), stream=False)
        try:
            data = resp.json()
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ProviderError(
                f"model server {self.name!r} answered a body that is not a chat completion"
            ) from exc
        usage = data.get("usage") or {}
        return ChatReply(
            content=content,
            model=str(data.get("model") or request.model),
            prompt_tokens=int(usage.get("prompt_tokens") or count_message_tokens(request.messages)),
            completion_tokens=int(usage.get("completion_tokens") or get_tokenizer().count(content)),
            finish_reason=str(choice.get("finish_reason") or "stop"),
        )

    def stream(self, request: ChatRequest) -> Iterator[str | ChatReply]:
        import httpx

        resp = self._send(self._body(request, stream=True), stream=True)
        parts: list[str] = []
        usage: dict[str, Any] = {}
        model = request.model
        finish = "stop"
        try:
            for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                try:
                    chunk = json.loads(payload)
                except ValueError as exc:
                    raise ProviderError(f"model server {self.name!r} sent a bad stream") from exc
                model = chunk.get("model") or model
                if chunk.get("usage"):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content")
                    if delta:
                        parts.append(delta)
                        yield delta
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
        except httpx.HTTPError as exc:
            raise ProviderError(
                f"model server {self.name!r} broke the stream ({type(exc).__name__})"
            ) from exc
        finally:
            resp.close()
        content = "".join(parts)
        yield ChatReply(
            content=content,
            model=str(model),
            prompt_tokens=int(usage.get("prompt_tokens") or count_message_tokens(request.messages)),
            completion_tokens=int(usage.get("completion_tokens") or get_tokenizer().count(content)),
            finish_reason=str(finish),
        )


# --------------------------------------------------------------------------- scripted


@dataclass(frozen=True)
class ScriptedRule:
    """``reply`` when every given condition holds on the prompt (all messages' text)."""

    reply: str
    contains: str | None = None
    regex: str | None = None

    def matches(self, prompt: str) -> bool:
        if self.contains is not None and self.contains not in prompt:
            return False
        return not (self.regex is not None and re.search(self.regex, prompt) is None)


class ScriptedProvider:
    """Deterministic replies for tests, demos and offline use: the first rule whose conditions
    hold on the prompt answers; else ``default``; with neither, the call fails clearly.
    Streams its reply word by word so streaming clients see several chunks."""

    def __init__(self, name: str, rules: Sequence[ScriptedRule], default: str | None = None):
        self.name = name
        self.rules = list(rules)
        self.default = default

    def _reply_text(self, request: ChatRequest) -> str:
        prompt = "\n".join(str(m.get("content") or "") for m in request.messages)
        for rule in self.rules:
            if rule.matches(prompt):
                return rule.reply
        if self.default is not None:
            return self.default
        raise ProviderError(
            f"scripted provider {self.name!r} has no rule matching this prompt and no default",
            details={"provider": self.name},
        )

    def complete(self, request: ChatRequest) -> ChatReply:
        content = self._reply_text(request)
        return ChatReply(
            content=content,
            model=request.model or "scripted",
            prompt_tokens=count_message_tokens(request.messages),
            completion_tokens=get_tokenizer().count(content),
        )

    def stream(self, request: ChatRequest) -> Iterator[str | ChatReply]:
        reply = self.complete(request)
        yield from re.findall(r"\S+\s*|\s+", reply.content)
        yield reply


# --------------------------------------------------------------------------- routing


@dataclass(frozen=True)
class ModelRoute:
    provider: str
    model: str | None = None  # the provider's model name; None keeps the requested name


class ProviderRouter:
    """Resolves a requested model name to (provider, provider model name)."""

    def __init__(
        self,
        providers: Mapping[str, ChatProvider],
        routes: Mapping[str, ModelRoute],
        *,
        default_model: str = "",
    ) -> None:
        self.providers = dict(providers)
        self.routes = dict(routes)
        self.default_model = default_model

    def resolve(self, requested: str | None) -> tuple[ChatProvider, str]:
        name = requested or self.default_model
        route = self.routes.get(name) or self.routes.get("*")
        provider_name = route.provider if route else DEFAULT_PROVIDER
        provider = self.providers.get(provider_name)
        if provider is None:
            raise ProviderNotConfigured(
                f"no model provider serves model {name!r}: set CAIRN_LLM_BASE_URL for the "
                "default provider, or map the model in the ladder's 'models:'",
                details={"model": name, "provider": provider_name},
            )
        model = (route.model if route and route.model else name) or self.default_model
        return provider, model


__all__ = [
    "DEFAULT_PROVIDER",
    "ChatProvider",
    "ChatReply",
    "ChatRequest",
    "ModelRoute",
    "OpenAIChatProvider",
    "ProviderError",
    "ProviderNotConfigured",
    "ProviderRouter",
    "ScriptedProvider",
    "ScriptedRule",
    "count_message_tokens",
]
