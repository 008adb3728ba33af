"""Template errors. Load-time problems are ``ConfigError`` (fatal at start, naming the file);
apply-time problems are 4xx errors with these stable codes."""

from __future__ import annotations

from cairn.errors import NotFound

TEMPLATE_NOT_FOUND = "template_not_found"
UNKNOWN_FIELD = "template_unknown_field"
MISSING_FIELD = "template_missing_field"
INVALID_VALUE = "template_invalid_value"


class TemplateNotFound(NotFound):
    """No template has this id (404)."""

    code = TEMPLATE_NOT_FOUND
