"""Slate errors, each a ``CairnError`` with a stable code (mapped to HTTP by the API).

NotFound (404)      SlateNotFound ``slate_not_found``, FolderNotFound ``folder_not_found``,
                    FileNotFound ``file_not_found``
Conflict (409)      SlateLimitExceeded ``slate_limit_exceeded`` (a ``reject`` folder is full),
                    WriteAlreadyApplied ``slate_write_already_applied`` (a retried run's
                    write that its earlier attempt applied; the runtime traces it)
InvalidInput (422)  SlateEntryTooLarge ``slate_entry_too_large`` (bigger than the folder),
                    InvalidSlateWrite ``slate_invalid_write`` and the more specific codes
                    ``slate_merge_key_missing``, ``slate_file_not_json``,
                    ``slate_user_required``, ``invalid_schema``
"""

from __future__ import annotations

from typing import Any

from cairn.errors import Conflict, InvalidInput, NotFound


class SlateNotFound(NotFound):
    code = "slate_not_found"


class FolderNotFound(NotFound):
    code = "folder_not_found"


class FileNotFound(NotFound):
    code = "file_not_found"


class SlateLimitExceeded(Conflict):
    code = "slate_limit_exceeded"


class WriteAlreadyApplied(Conflict):
    code = "slate_write_already_applied"


class SlateEntryTooLarge(InvalidInput):
    code = "slate_entry_too_large"


class InvalidSlateWrite(InvalidInput):
    code = "slate_invalid_write"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message, code=code, details=details)
