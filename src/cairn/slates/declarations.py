"""Which slates each ladder declares, and the folder key a request's path resolves to.

Declarations come from ladder files (``load_slate_declarations``) or ``Slates.declare``; every
lookup of an undeclared slate, folder or file raises the matching 404 error.
"""

from __future__ import annotations

from pathlib import Path

from cairn.core.slates import FolderKey
from cairn.core.subject_id import SUBJECT_ID_RULE, canonical_id, subject_id_problem
from cairn.errors import InvalidInput
from cairn.slates.config import FolderSpec, SlateSpec, check_init_sizes, load_slate_declarations
from cairn.slates.errors import FileNotFound, FolderNotFound, SlateNotFound


class Declarations:
    """The declared slates of every ladder, by ladder and title."""

    def __init__(
        self,
        tokenizer: str,
        ladders_dir: Path | str | None = None,
        problems: list[str] | None = None,
    ) -> None:
        """``problems``: skip invalid ladder files, adding their errors to it (else raise)."""
        self.tokenizer = tokenizer
        self._declared: dict[str, dict[str, SlateSpec]] = {}
        declared = load_slate_declarations(ladders_dir, tokenizer=tokenizer, problems=problems)
        for ladder, specs in declared.items():
            self.declare(ladder, specs)

    def declare(self, ladder: str, specs: list[SlateSpec]) -> None:
        """Declare (or re-declare) the slates of ``ladder``; replaces its earlier declaration."""
        check_init_sizes(specs, f"ladder {ladder!r}", tokenizer=self.tokenizer)
        self._declared[ladder] = {s.title: s for s in specs}

    def undeclare(self, ladder: str) -> None:
        """Withdraw the slates of ``ladder`` (its file was removed); stored state stays."""
        self._declared.pop(ladder, None)

    def ladders(self) -> list[str]:
        """The ladders that declare at least one slate."""
        return sorted(name for name, declared in self._declared.items() if declared)

    def specs(self, ladder: str) -> list[SlateSpec]:
        return list(self._declared.get(ladder, {}).values())

    def spec(self, ladder: str, slate: str) -> SlateSpec:
        declared = self._declared.get(ladder)
        if declared is None:
            known = ", ".join(self.ladders()) or "none: is CAIRN_LADDERS_DIR set?"
            raise SlateNotFound(
                f"no ladder {ladder!r} is loaded (ladders with slates: {known})",
                details={"ladder": ladder, "slate": slate, "known_ladders": self.ladders()},
            )
        found = declared.get(slate)
        if found is None:
            raise SlateNotFound(
                f"ladder {ladder!r} declares no slate {slate!r}",
                details={"ladder": ladder, "slate": slate},
            )
        return found

    def folder_spec(self, ladder: str, slate: str, folder: str) -> tuple[SlateSpec, FolderSpec]:
        sspec = self.spec(ladder, slate)
        fspec = sspec.folder(folder)
        if fspec is None:
            raise FolderNotFound(
                f"slate {slate!r} has no folder {folder!r}",
                details={"slate": slate, "folder": folder},
            )
        return sspec, fspec

    def ensure_known(
        self, ladder: str, slate: str, folder: str | None = None, file: str | None = None
    ) -> None:
        """Raise the matching 404 error if the path is not declared."""
        if folder is None:
            self.spec(ladder, slate)
            return
        _, fspec = self.folder_spec(ladder, slate, folder)
        if file is not None and fspec.file(file) is None and not fspec.open:
            raise FileNotFound(f"folder {folder!r} has no file {file!r}")


def folder_key(
    tenant: str, ladder: str, sspec: SlateSpec, folder: str, user_id: str | None
) -> FolderKey:
    """Where a folder's state is kept: per ladder, or per user for ``partition: user``."""
    if sspec.partition == "user":
        if not user_id:
            raise InvalidInput(
                f"slate {sspec.title!r} is kept per user (partition: user): give a user id",
                code="slate_user_required",
            )
        check_slate_user(user_id)
        return FolderKey(tenant, ladder, canonical_id(user_id), sspec.title, folder)
    return FolderKey(tenant, ladder, "", sspec.title, folder)


def check_slate_user(user_id: str) -> None:
    """A per-user slate's user is a subject id: the user's state belongs to that subject and
    ``DELETE /v1/subjects/…`` erases it, which it could not for any other id."""
    problem = subject_id_problem(user_id)
    if problem is not None:
        raise InvalidInput(
            f"a user id is a subject id; it {problem}: {SUBJECT_ID_RULE}",
            code="slate_user_required",
        )


def check_run_user(user_id: str) -> None:
    """A ladder run's user (the OpenAI ``user``) is a subject id: the run is kept under it and
    erased with that subject (``DELETE /v1/subjects/…``)."""
    problem = subject_id_problem(user_id)
    if problem is not None:
        message = f"invalid request at 'user': a user is a subject id; it {problem}"
        detail = {
            "field": "user",
            "type": "value_error",
            "message": f"{problem}: {SUBJECT_ID_RULE}",
        }
        raise InvalidInput(message, details=[detail])


__all__ = ["Declarations", "check_run_user", "check_slate_user", "folder_key"]
