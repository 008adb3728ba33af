"""The MemoryTemplate schema: a YAML mapping validated strictly (unknown keys are errors)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from cairn.core.text import check_no_nul
from cairn.templates.scaffold import (
    FIELD_NAME_PATTERN,
    Piece,
    ScaffoldSyntaxError,
    parse_scaffold,
    placeholder_names,
    render_pieces,
)

TEMPLATE_ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"

# Strict: YAML's loose scalars (``version: "1"``, ``required: yes`` read as a string, a date
# as an id) are type errors rather than silently coerced values.
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class TemplateField(BaseModel):
    """One caller-supplied value. ``type`` is advisory: both types render as plain strings."""

    model_config = _STRICT

    name: str = Field(pattern=FIELD_NAME_PATTERN, max_length=128)
    type: Literal["string", "text"] = "string"
    required: bool = False
    description: str | None = None


class MemoryTemplate(BaseModel):
    """A declarative, versioned scaffold that turns values into one episode."""

    model_config = _STRICT

    id: str = Field(pattern=TEMPLATE_ID_PATTERN, max_length=128)
    version: int = Field(ge=1)
    title: str = Field(min_length=1)
    description: str | None = None
    episode_type: str = Field(min_length=1, max_length=128)
    fields: list[TemplateField] = Field(min_length=1)
    content_template: str = Field(min_length=1)

    _pieces: tuple[Piece, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _check_fields_and_scaffold(self) -> MemoryTemplate:
        for key in ("id", "episode_type", "content_template"):
            check_no_nul(getattr(self, key), key)  # written into episodes
        seen: set[str] = set()
        for f in self.fields:
            if f.name in seen:
                raise ValueError(f"duplicate field name '{f.name}'")
            seen.add(f.name)
        try:
            pieces = parse_scaffold(self.content_template)
        except ScaffoldSyntaxError as exc:
            raise ValueError(f"content_template: {exc}") from None
        unknown = [n for n in placeholder_names(pieces) if n not in seen]
        if unknown:
            names = ", ".join(f"{{{n}}}" for n in unknown)
            raise ValueError(
                f"content_template uses placeholder(s) {names} that name no declared field"
                f" (declared: {', '.join(sorted(seen))})"
            )
        self._pieces = pieces
        return self

    def field(self, name: str) -> TemplateField | None:
        return next((f for f in self.fields if f.name == name), None)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def required_fields(self) -> list[str]:
        return [f.name for f in self.fields if f.required]

    def names_problem(self, names: Iterable[str]) -> str | None:
        """What is wrong with giving values of these names (unknown fields first, then
        required ones left out), or None."""
        given = set(names)
        unknown = sorted(given - set(self.field_names))
        if unknown:
            return f"{', '.join(map(repr, unknown))} not a field of template {self.id!r}"
        missing = [name for name in self.required_fields if name not in given]
        if missing:
            return f"required field(s) {', '.join(map(repr, missing))} of {self.id!r} not given"
        return None

    def render(self, values: dict[str, str]) -> str:
        """The content for already-validated values (missing optional fields render as "")."""
        return render_pieces(self._pieces, values)

    def public(self) -> dict[str, Any]:
        """The full schema as the API and CLI show it."""
        return self.model_dump(mode="json")
