"""The LLM compiler against a fake OpenAI-compatible server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from cairn.config import Settings
from cairn.core.episodes import NewEpisode
from cairn.core.scope import Scope
from cairn.engine.compile import compile_scope
from cairn.engine.llm_compiler import LLMCompileError, LLMCompiler
from cairn.store import Store


class FakeModel:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer: str = ""
        self.status = 200


@pytest.fixture
def fake_server() -> Iterator[tuple[str, FakeModel]]:
    model = FakeModel()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            body = json.loads(self.rfile.read(length))
            model.requests.append(
                {"path": self.path, "body": body, "auth": self.headers.get("authorization")}
            )
            payload = json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": model.answer}}]}
            ).encode()
            self.send_response(model.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", model
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _ingest(store: Store, scope: Scope) -> None:
    store.episodes.append_many(
        "t1",
        [
            NewEpisode(
                scope=scope,
                source="chat",
                type="conversation.turn",
                payload={"messages": [{"role": "user", "content": text}]},
            )
            for text in ("I just joined Initech as a developer.", "To deploy, run make release.")
        ],
    )


def test_llm_compiler_through_a_fake_server(
    store: Store, fake_server: tuple[str, FakeModel]
) -> None:
    url, model = fake_server
    model.answer = json.dumps(
        {
            "memories": [
                {
                    "kind": "profile_fact",
                    "content": "The user works at Initech as a developer.",
                    "confidence": 0.9,
                    "slot": "user:employer",
                    "sources": [0],
                },
                {"kind": "procedure", "content": "Deploy by running make release.", "sources": [1]},
                {"kind": "procedure", "content": "No sources: dropped.", "sources": []},
                {"kind": "bogus", "content": "Unknown kind: dropped.", "sources": [0]},
            ]
        }
    )
    settings = Settings(compiler="llm", llm_base_url=url, llm_model="fake-1", llm_api_key="k")
    compiler = LLMCompiler.from_settings(settings)
    scope = Scope.for_subject("u")
    _ingest(store, scope)
    result = compile_scope(store, "t1", scope, compiler=compiler)
    by_kind: dict[str, list[str]] = {}
    for m in result.memories:
        by_kind.setdefault(m.kind, []).append(m.content)
    assert by_kind["profile_fact"] == ["The user works at Initech as a developer."]
    assert by_kind["procedure"] == ["Deploy by running make release."]
    assert len(by_kind["turn"]) == 2  # the exact units still come from the rules
    fact = next(m for m in result.memories if m.kind == "profile_fact")
    assert fact.confidence == 0.9 and fact.metadata["compiler"] == "llm"
    assert fact.metadata["slot"] == "user:employer" and len(fact.source_episode_ids) == 1
    sent = model.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer k"
    assert sent["body"]["model"] == "fake-1"
    assert "I just joined Initech" in sent["body"]["messages"][1]["content"]


def test_bad_model_answers_fail_clearly_and_compile_nothing(
    store: Store, fake_server: tuple[str, FakeModel]
) -> None:
    url, model = fake_server
    compiler = LLMCompiler.from_settings(Settings(llm_base_url=url, llm_model="m"))
    scope = Scope.for_subject("u")
    _ingest(store, scope)
    model.answer = "not json"
    with pytest.raises(LLMCompileError):
        compile_scope(store, "t1", scope, compiler=compiler)
    model.status, model.answer = 500, "{}"
    with pytest.raises(LLMCompileError):
        compile_scope(store, "t1", scope, compiler=compiler)
    assert store.memories.count("t1", scope) == 0
    with store.snapshot() as tx:
        assert tx.compiling.count_uncompiled("t1", scope) == 2
