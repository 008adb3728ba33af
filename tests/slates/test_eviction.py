"""Each policy's exact eviction order, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from cairn.slates.errors import (
    FileNotFound,
    FolderNotFound,
    SlateEntryTooLarge,
    SlateLimitExceeded,
    SlateNotFound,
)
from cairn.slates.service import Slates
from tests.slates.conftest import count, folder_slate, fresh_ladder

T = "tenant"
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


def test_words_are_single_tokens() -> None:
    # The exact orders below rely on it: k one-token entries joined by "\n" are 2k-1 tokens.
    assert all(count(w) == 1 for w in WORDS)
    assert count("\n".join(WORDS[:4])) == 7


def usage(slates: Slates, ladder: str) -> int:
    return int(slates.tree(T, ladder, "S")["tokens"])


def test_fifo_evicts_oldest_written_first_across_files(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 10, ["a", "b"]))

    def put(file: str, word: str) -> list[str]:
        result = slates.write(T, ladder, "S", "f", file, word, run_id="run-1")
        assert result.usage <= 10 and result.usage == usage(slates, ladder)
        return [e.preview for e in result.evictions]

    assert [
        put(f, w)
        for f, w in [
            ("a", "one"),
            ("b", "two"),
            ("a", "three"),
            ("b", "four"),
            ("a", "five"),
            ("b", "six"),
        ]
    ] == [[]] * 6
    assert usage(slates, ladder) == 10
    assert put("a", "seven") == ["one"]
    assert put("b", "eight") == ["two"]
    assert put("b", "nine") == ["three"]  # the oldest entry is in the other file
    assert slates.read_file(T, ladder, "S", "f", "a") == "five\nseven"
    assert slates.read_file(T, ladder, "S", "f", "b") == "four\nsix\neight\nnine"
    listed = slates.evictions(T, ladder, "S")
    assert [(e.file, e.preview, e.tokens, e.policy, e.run_id) for e in listed] == [
        ("a", "three", 1, "FIFO", "run-1"),
        ("b", "two", 1, "FIFO", "run-1"),
        ("a", "one", 1, "FIFO", "run-1"),
    ]


def test_lru_evicts_from_least_recently_used_file_after_reads(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("LRU", 10, ["a", "b", "c"]))
    for file, word in [("a", "one"), ("b", "two"), ("c", "three")]:
        slates.write(T, ladder, "S", "f", file, word)
    assert slates.read_file(T, ladder, "S", "f", "a") == "one"  # a is now the most recent
    slates.read_file(T, ladder, "S", "f", "b", peek=True)  # a peek does not count
    slates.read(T, ladder, "S", "f", "b", peek=True)
    slates.inspect(T, ladder, "S")  # nor does the inspector
    for word in ("four", "five", "six"):
        assert slates.write(T, ladder, "S", "f", "c", word).evictions == []
    result = slates.write(T, ladder, "S", "f", "c", "seven")
    assert [(e.file, e.preview) for e in result.evictions] == [("b", "two")]
    result = slates.write(T, ladder, "S", "f", "c", "eight")
    # b is empty; a (read before c's writes) is next; then c's own oldest entry.
    assert [(e.file, e.preview) for e in result.evictions] == [("a", "one"), ("c", "three")]
    assert result.usage == 9 == usage(slates, ladder)
    assert slates.read_file(T, ladder, "S", "f", "c", peek=True) == "four\nfive\nsix\nseven\neight"


def test_lru_read_protects_a_file(slates: Slates) -> None:
    def history(read_a: bool) -> list[str]:
        ladder = fresh_ladder(slates, folder_slate("LRU", 5, ["a", "b", "c"]))
        slates.write(T, ladder, "S", "f", "a", "one")
        slates.write(T, ladder, "S", "f", "b", "two")
        if read_a:
            slates.read(T, ladder, "S", "f", "a")  # without peek: a use
        result = slates.write(T, ladder, "S", "f", "c", "three four five six")
        return [e.preview for e in result.evictions]

    assert history(read_a=False) == ["one"]
    assert history(read_a=True) == ["two"]


def test_reject_refuses_and_changes_nothing(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("reject", 5, ["a", "b"]))
    for file, word in [("a", "one"), ("b", "two"), ("a", "three")]:
        slates.write(T, ladder, "S", "f", file, word, tags=[word])
    before = slates.inspect(T, ladder, "S")
    with pytest.raises(SlateLimitExceeded) as info:
        slates.write(T, ladder, "S", "f", "b", "four", tags=["new"])
    assert info.value.status == 409 and info.value.code == "slate_limit_exceeded"
    with pytest.raises(SlateLimitExceeded):
        slates.write(T, ladder, "S", "f", "a", "x y z w v", on="overwrite")
    assert slates.inspect(T, ladder, "S") == before
    assert slates.evictions(T, ladder, "S") == []
    # An overwrite that makes the folder smaller is fine.
    assert slates.write(T, ladder, "S", "f", "a", "ten", on="overwrite").usage == 2


@pytest.mark.parametrize("policy", ["FIFO", "LRU", "reject"])
def test_entry_larger_than_the_folder_is_refused(slates: Slates, policy: str) -> None:
    ladder = fresh_ladder(slates, folder_slate(policy, 3, ["a"]))
    slates.write(T, ladder, "S", "f", "a", "one")
    with pytest.raises(SlateEntryTooLarge) as info:
        slates.write(T, ladder, "S", "f", "a", "one two three four")
    assert info.value.code == "slate_entry_too_large" and info.value.status == 422
    assert slates.read_file(T, ladder, "S", "f", "a") == "one"


def test_written_entry_is_never_evicted_and_a_full_fit_evicts_everything_else(
    slates: Slates,
) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 3, ["a", "b"]))
    slates.write(T, ladder, "S", "f", "a", "one")
    slates.write(T, ladder, "S", "f", "b", "two")
    result = slates.write(T, ladder, "S", "f", "a", "x y z")
    assert [e.preview for e in result.evictions] == ["one", "two"]
    assert slates.read_file(T, ladder, "S", "f", "a") == "x y z" and result.usage == 3


def test_init_content_is_the_first_entry_and_reset_restores_it(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 6, ["a", "b"], init={"a": "seed"}))
    assert slates.read_file(T, ladder, "S", "f", "a") == "seed"
    slates.write(T, ladder, "S", "f", "b", "one two")
    result = slates.write(T, ladder, "S", "f", "b", "three four five")
    assert [e.preview for e in result.evictions] == ["seed"]
    slates.reset(T, ladder, "S", "f")
    assert slates.read_file(T, ladder, "S", "f", "a") == "seed"
    assert slates.read_file(T, ladder, "S", "f", "b") == ""


def test_overwrite_and_delete(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 20, ["a"]))
    slates.write(T, ladder, "S", "f", "a", "one")
    result = slates.write(T, ladder, "S", "f", "a", "two three", on="overwrite")
    assert (result.entries_replaced, result.evictions) == (1, [])
    assert slates.read_file(T, ladder, "S", "f", "a") == "two three"
    deleted = slates.delete_file(T, ladder, "S", "f", "a")
    assert deleted["entries_deleted"] == 1 and deleted["usage"]["tokens"] == 0
    assert slates.read(T, ladder, "S", "f", "a", fallback="No prior facts available.") == (
        "No prior facts available."
    )
    assert slates.read(T, ladder, "S", "f", "a") == ""


def test_manual_evict(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("reject", 20, ["a"]))
    for w in ("one", "two", "three"):
        slates.write(T, ladder, "S", "f", "a", w)
    evicted = slates.evict(T, ladder, "S", "f", until_tokens=3)
    assert [e.preview for e in evicted] == ["one"]
    assert slates.read_file(T, ladder, "S", "f", "a") == "two\nthree"


def test_unknown_paths_have_distinct_codes(slates: Slates) -> None:
    with pytest.raises(SlateNotFound):
        slates.read(T, "memory-ladder", "Nope", "facts", "core.md")
    with pytest.raises(FolderNotFound):
        slates.write(T, "memory-ladder", "Memory", "nope", "core.md", "x")
    with pytest.raises(FileNotFound):
        slates.write(T, "memory-ladder", "Memory", "facts", "other.md", "x")
    assert slates.read(T, "memory-ladder", "Memory", "facts", "other.md", fallback="fb") == "fb"


def test_partitions_never_cross(slates: Slates) -> None:
    spec = folder_slate("FIFO", 50, ["a"], partition="user")
    ladder = fresh_ladder(slates, spec)
    slates.write(T, ladder, "S", "f", "a", "for alice", user_id="alice")
    slates.write(T, ladder, "S", "f", "a", "for bob", user_id="bob")
    slates.write("other", ladder, "S", "f", "a", "other tenant", user_id="alice")
    assert slates.read(T, ladder, "S", "f", "a", user_id="alice") == "for alice"
    assert slates.read(T, ladder, "S", "f", "a", user_id="bob") == "for bob"
    assert slates.read("other", ladder, "S", "f", "a", user_id="alice") == "other tenant"
    with pytest.raises(Exception) as info:
        slates.read(T, ladder, "S", "f", "a")
    assert getattr(info.value, "code", "") == "slate_user_required"
    assert slates.read(T, ladder, "S", "f", "a", fallback="anonymous") == "anonymous"
    # The same slate title under another ladder is another slate.
    other_ladder = fresh_ladder(slates, spec)
    assert slates.read(T, other_ladder, "S", "f", "a", user_id="alice") == ""
    users = {i["user_id"] for i in slates.instances(T, ladder)}
    assert users == {"alice", "bob"}


def test_deleting_a_file_or_resetting_drops_the_evictions_that_quote_it(slates: Slates) -> None:
    ladder = fresh_ladder(slates, folder_slate("FIFO", 4, ["a", "b"]))
    for file, word in [("a", "one"), ("a", "two"), ("b", "three"), ("b", "four")]:
        slates.write(T, ladder, "S", "f", file, word)
    slates.write(T, ladder, "S", "f", "a", "five six")  # evicts "one" (a) and "two" (a)
    slates.write(T, ladder, "S", "f", "b", "seven")  # evicts "three" (b)
    listed = [(e.file, e.preview) for e in slates.evictions(T, ladder, "S")]
    assert {f for f, _ in listed} == {"a", "b"} and ("a", "one") in listed
    slates.delete_file(T, ladder, "S", "f", "a")
    left = [(e.file, e.preview) for e in slates.evictions(T, ladder, "S")]
    assert left == [(f, p) for f, p in listed if f == "b"]
    slates.reset(T, ladder, "S", "f")
    assert slates.evictions(T, ladder, "S") == []
