"""What a slate write must satisfy before it touches the store (each a stable 4xx code)."""

from __future__ import annotations

from typing import Any

from cairn.slates.errors import InvalidSlateWrite

WRITE_MODES = ("append", "overwrite", "mergeByKey")


def check_write(
    content: Any,
    *,
    on: str,
    key: str | None,
    tags: list[str] | None,
    run_id: str | None,
    effect: str | None,
) -> None:
    """Raise ``InvalidSlateWrite`` for a write no store could take (NUL in text, over-long
    names, a missing merge key, nothing to write)."""
    if on not in WRITE_MODES:
        raise InvalidSlateWrite(f"unknown write mode {on!r}: use {', '.join(WRITE_MODES)}")
    if on == "mergeByKey" and not key:
        raise InvalidSlateWrite("on: mergeByKey needs 'key'", code="slate_merge_key_missing")
    if content is None or content == "":
        raise InvalidSlateWrite("nothing to write: content is empty", code="slate_empty_write")
    if isinstance(content, str) and "\x00" in content:
        # Neither backend stores NUL in text; refuse it instead of failing in the driver.
        raise InvalidSlateWrite("content must not contain a NUL character")
    for tag in tags or []:
        if not isinstance(tag, str) or not tag or len(tag) > 128 or "\x00" in tag:
            raise InvalidSlateWrite(
                "tags must be non-empty strings of at most 128 characters, without NUL"
            )
    if run_id is not None and (len(run_id) > 256 or "\x00" in run_id):
        raise InvalidSlateWrite("run_id has at most 256 characters, without NUL")
    if key is not None and "\x00" in key:
        raise InvalidSlateWrite("key must not contain a NUL character")
    if effect is not None and (run_id is None or len(effect) > 512 or "\x00" in effect):
        raise InvalidSlateWrite("effect needs a run_id and has at most 512 characters")


__all__ = ["WRITE_MODES", "check_write"]
