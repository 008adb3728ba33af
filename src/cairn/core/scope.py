"""Scope: the hard partition of memory inside a tenant (runtime + user + agent)."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

from cairn.core.subject_id import SUBJECT_ID_RULE, canonical_id, subject_id_problem
from cairn.core.text import check_no_nul

DEFAULT_RUNTIME = "default"
# The scope columns' width on both backends.
MAX_ID_LENGTH = 256


class Scope(BaseModel):
    """``runtime_id`` is required; an empty ``user_id`` is the global user and an empty
    ``agent_id`` the global-agent partition, which never widens a read to other agents. Ids
    are trimmed and kept in NFC (``cairn.core.subject_id.canonical_id``); new data is written
    only under a user that is a subject id (``check_new_user``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    runtime_id: str
    user_id: str = ""
    agent_id: str = ""

    @field_validator("runtime_id", "user_id", "agent_id", mode="before")
    @classmethod
    def _clean(cls, value: object) -> object:
        if value is None:
            return ""
        if isinstance(value, str):
            value = canonical_id(check_no_nul(value).strip())
            if len(value) > MAX_ID_LENGTH:
                raise ValueError(f"at most {MAX_ID_LENGTH} characters")
            return value
        return value

    @field_validator("runtime_id")
    @classmethod
    def _runtime_required(cls, value: str) -> str:
        if not value:
            raise ValueError("runtime_id is required (empty after trimming)")
        return value

    @classmethod
    def for_subject(cls, subject_id: str) -> Scope:
        """The REST ``subject_id`` shorthand: ``("default", subject_id, "")``."""
        return _subject_scope(subject_id)

    @property
    def subject_id(self) -> str | None:
        """The subject id this scope is the shorthand of, if it is one."""
        if self.runtime_id == DEFAULT_RUNTIME and not self.agent_id and self.user_id:
            return self.user_id
        return None


@lru_cache(maxsize=8192)
def _subject_scope(subject_id: str) -> Scope:
    # A bounded memo of a pure function: scopes are immutable, so one validated instance per
    # subject can be shared by every caller of the process.
    return Scope(runtime_id=DEFAULT_RUNTIME, user_id=subject_id, agent_id="")


def forget_scope_memo() -> None:
    """Empty the memo of subjects' scopes (after an erasure: it is keyed by subject ids)."""
    _subject_scope.cache_clear()


def check_new_user(scope: Scope) -> Scope:
    """``scope`` unchanged if its user (if any) is a subject id; a ``ValueError`` naming the
    rule otherwise. Checked where new data is written under a scope (turns, documents,
    items): the subject routes, the inspector and erasure reach a user by its subject id.
    Reads take any stored user, so data written before the rule stays reachable."""
    if scope.user_id:
        problem = subject_id_problem(scope.user_id)
        if problem is not None:
            raise ValueError(f"user_id: a user is a subject id; it {problem}: {SUBJECT_ID_RULE}")
    return scope


# A scope new data is written under: its user is a subject id.
NewScope = Annotated[Scope, AfterValidator(check_new_user)]
