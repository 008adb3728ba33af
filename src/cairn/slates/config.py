"""The ``slates:`` block of a ladder file, and the step-level slate blocks, as pydantic models.

Every model forbids unknown keys. ``parse_slates`` and ``load_slate_declarations`` turn
validation failures into one ``ConfigError`` whose message names the file and the path of the
offending key (``slates[0].folders[1].tokenLimit``).

The ladder runtime reuses these models for the step keys ``slateRead`` (``SlateReadSource``),
``slateWrite`` (``SlateWriteSpec``) and gated writes (``GateSpec``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)

from cairn.core.subject_id import unprintable_problem
from cairn.core.tokens import get_tokenizer
from cairn.core.yamlfiles import YAMLError, load_yaml, read_yaml_text, yaml_problem
from cairn.errors import ConfigError
from cairn.slates.patterns import check_patterns, schema_objects

EvictionPolicy = Literal["FIFO", "LRU", "reject"]
WriteMode = Literal["append", "overwrite", "mergeByKey"]
Metatag = Literal["tags", "index", "tree"]
Partition = Literal["ladder", "user"]

# Names become URL path segments; these two would shadow routes of the HTTP API.
RESERVED_FOLDER_NAMES = frozenset({"evictions"})
RESERVED_FILE_NAMES = frozenset({"reset"})
_NAME_RE = re.compile(r"^[^/\\\x00-\x1f]{1,128}$")


def check_name(value: str, what: str) -> str:
    """A slate, folder or file name: 1-128 printable characters of any script (as subject
    ids: ``unprintable_problem``), no slash or backslash, no surrounding spaces, not ``.``
    or ``..``."""
    problem = unprintable_problem(value, spaces=True)
    if (
        problem is not None
        or not _NAME_RE.match(value)
        or value.strip() in ("", ".", "..")
        or value != value.strip()
    ):
        raise ValueError(
            f"invalid {what} name {value!r}: 1-128 printable characters, no '/', '\\', control "
            "or bidirectional control characters or surrounding spaces, and not '.' or '..'"
            + (f" ({problem})" if problem else "")
        )
    return value


def check_file_name(value: str) -> str:
    """A file name (``check_name``) that is not reserved: ``reset`` names the folder's reset
    route (``POST …/{folder}/reset``), so a file of that name could never be written."""
    if value in RESERVED_FILE_NAMES:
        raise ValueError(f"file name {value!r} is reserved (it names the folder's reset route)")
    return check_name(value, "file")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class FileSpec(_Strict):
    """A declared file: its name and initial content (``blank`` is empty)."""

    name: str
    init: str = "blank"

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_file_name(value)

    @property
    def initial_content(self) -> str:
        return "" if self.init == "blank" else self.init


class FolderSpec(_Strict):
    """A folder: a token limit shared by its files and the policy applied when it is full."""

    name: str
    token_limit: int = Field(alias="tokenLimit", gt=0, strict=True)
    eviction_policy: EvictionPolicy = Field("FIFO", alias="evictionPolicy")
    files: list[FileSpec] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if value in RESERVED_FOLDER_NAMES:
            raise ValueError(f"folder name {value!r} is reserved")
        return check_name(value, "folder")

    @field_validator("files")
    @classmethod
    def _unique_files(cls, value: list[FileSpec]) -> list[FileSpec]:
        _no_duplicates([f.name for f in value], "file")
        return value

    @property
    def open(self) -> bool:
        """A folder that declares no files accepts any file name (created by its first write)."""
        return not self.files

    def file(self, name: str) -> FileSpec | None:
        return next((f for f in self.files if f.name == name), None)


class SlateSpec(_Strict):
    """A slate: a titled set of folders, kept per ladder (default) or per user."""

    title: str
    partition: Partition = "ladder"
    folders: list[FolderSpec] = Field(min_length=1)

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        return check_name(value, "slate")

    @field_validator("folders")
    @classmethod
    def _unique_folders(cls, value: list[FolderSpec]) -> list[FolderSpec]:
        _no_duplicates([f.name for f in value], "folder")
        return value

    def folder(self, name: str) -> FolderSpec | None:
        return next((f for f in self.folders if f.name == name), None)


class SlatesBlock(_Strict):
    """The top-level ``slates:`` list of a ladder file."""

    slates: list[SlateSpec] = Field(default_factory=list)

    @field_validator("slates")
    @classmethod
    def _unique_titles(cls, value: list[SlateSpec]) -> list[SlateSpec]:
        _no_duplicates([s.title for s in value], "slate")
        return value


def _no_duplicates(names: list[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"duplicate {what} name {name!r}")
        seen.add(name)


# --- step-level blocks (used by the ladder runtime) -------------------------------------------


class SlateTarget(_Strict):
    """Where a write goes: ``{slate, folder, file}``."""

    slate: str
    folder: str
    file: str


class SlateReadSource(_Strict):
    """``from:`` of a ``slateRead`` field: a file's content or a metatag (``tree`` is the
    slate's: it needs no folder)."""

    slate: str
    folder: str | None = None
    file: str | None = None
    metatag: Metatag | None = None
    depth: int | None = Field(None, ge=0, strict=True)

    @model_validator(mode="after")
    def _file_or_metatag(self) -> SlateReadSource:
        if self.file is None and self.metatag not in ("index", "tree"):
            raise ValueError("without 'file', 'metatag' must be 'index' or 'tree'")
        if self.folder is None and (self.file is not None or self.metatag != "tree"):
            raise ValueError("'folder' is required (only the slate's 'tree' metatag has none)")
        return self


def check_schema(schema: Any) -> dict[str, Any] | bool:
    """A JSON Schema (Draft 2020-12) or a ValueError saying what is wrong with it. A reference
    (``$ref``, ``$dynamicRef``) may only point inside the schema (``#…``): validating never
    fetches a URL or reads a file (``cairn.slates.extract`` refuses to as well)."""
    if not isinstance(schema, (dict, bool)):
        raise ValueError("match must be a JSON Schema object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"match is not a valid JSON Schema: {exc.message}") from None
    except RecursionError:
        raise ValueError("match is nested too deeply") from None
    problem = check_patterns(schema)
    if problem is not None:
        raise ValueError(f"match: {problem}")
    outside = next(_outside_refs(schema), None)
    if outside is not None:
        raise ValueError(
            f"match may only refer inside itself ('#/$defs/…'), not to {outside[:200]!r}"
        )
    return schema


def _outside_refs(schema: Any) -> Iterator[str]:
    """References of a schema that do not start with ``#``."""
    for node in schema_objects(schema):
        for key in ("$ref", "$dynamicRef"):
            value = node.get(key)
            if isinstance(value, str) and not value.startswith("#"):
                yield value


class SlateWriteSpec(_Strict):
    """A step's ``slateWrite:``: extract JSON from the output, validate, pick ``field``, write."""

    to: SlateTarget
    field: str | None = None
    on: WriteMode = "append"
    key: str | None = None
    match: dict[str, Any] | StrictBool | None = None
    tags: list[str] = Field(default_factory=list)

    @field_validator("match")
    @classmethod
    def _schema(cls, value: Any) -> Any:
        return None if value is None else check_schema(value)

    @model_validator(mode="after")
    def _key_for_merge(self) -> SlateWriteSpec:
        if self.on == "mergeByKey" and not self.key:
            raise ValueError("on: mergeByKey needs 'key' (the field that identifies an item)")
        return self


class GateWrite(_Strict):
    """``write:`` of a gate branch: the step output is written verbatim to ``to``."""

    to: SlateTarget
    on: WriteMode = "append"
    key: str | None = None
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _flat_target(cls, data: Any) -> Any:
        # Accept {slate, folder, file, on} as well as {to: {slate, folder, file}, on}.
        if isinstance(data, dict) and "to" not in data and "slate" in data:
            data = dict(data)
            data["to"] = {k: data.pop(k) for k in ("slate", "folder", "file") if k in data}
        return data

    @model_validator(mode="after")
    def _key_for_merge(self) -> GateWrite:
        if self.on == "mergeByKey" and not self.key:
            raise ValueError("on: mergeByKey needs 'key'")
        return self


class GateBranch(_Strict):
    write: GateWrite


class Condition(_Strict):
    """A test of the step output; every key present must hold (they combine with AND)."""

    contains: str | None = None
    regex: str | None = None
    equals: str | None = None
    min_length: int | None = Field(None, alias="minLength", ge=0, strict=True)
    max_length: int | None = Field(None, alias="maxLength", ge=0, strict=True)
    all: list[Condition] | None = None
    any: list[Condition] | None = None
    not_: Condition | None = Field(None, alias="not")

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex: {exc}") from None
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> Condition:
        if not self.model_fields_set - {"then_", "else_"}:
            raise ValueError(
                "a condition needs one of contains, regex, equals, minLength, maxLength, "
                "all, any, not"
            )
        return self


class GateSpec(Condition):
    """A step's ``if:`` block: a condition with a ``then`` write and an optional ``else`` write.

    Without any condition key (the seed's ``if: { then: { write: … } }``) the gate always
    passes: the output is written on every run."""

    then_: GateBranch = Field(alias="then")
    else_: GateBranch | None = Field(None, alias="else")

    @model_validator(mode="after")
    def _not_empty(self) -> GateSpec:  # overrides Condition's: no condition is allowed here
        if self.else_ is not None and self.always:
            raise ValueError("an 'if' without a condition always passes, so 'else' never runs")
        return self

    @property
    def always(self) -> bool:
        """True when no condition key is set: the gate always passes."""
        return not (self.model_fields_set - {"then_", "else_"})


def parse_slates(data: Any, source: str, *, tokenizer: str = "cl100k_base") -> list[SlateSpec]:
    """Validate a ``slates:`` value (a list); errors name ``source`` and the key path."""
    try:
        slates = SlatesBlock.model_validate({"slates": data}).slates
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None
    check_init_sizes(slates, source, tokenizer=tokenizer)
    return slates


def check_init_sizes(
    slates: list[SlateSpec], source: str, *, tokenizer: str = "cl100k_base"
) -> None:
    """An ``init`` that does not fit its folder's limit is a configuration error."""
    count = get_tokenizer(tokenizer).count
    for i, slate in enumerate(slates):
        for j, folder in enumerate(slate.folders):
            total = 0
            for k, file in enumerate(folder.files):
                total += count(file.initial_content)
                if total > folder.token_limit:
                    raise ConfigError(
                        f"{source}: slates[{i}].folders[{j}].files[{k}].init: the initial "
                        f"content brings folder {folder.name!r} to {total} tokens, over its "
                        f"tokenLimit of {folder.token_limit}"
                    )


def format_validation_error(exc: ValidationError, source: str) -> str:
    """``file: path: message`` for each problem, e.g. ``a.yaml: slates[0].folders[0].x: ...``."""
    lines = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            if isinstance(part, int):
                path += f"[{part}]"
            else:
                path += ("." if path else "") + str(part)
        message = err["msg"].removeprefix("Value error, ")
        lines.append(f"{source}: {path or '(top)'}: {message}")
    return "; ".join(lines)


def ladder_name(path: Path, document: Any) -> str:
    """A ladder's name: its top-level ``name`` if it has one, else the file stem."""
    if isinstance(document, dict) and isinstance(document.get("name"), str) and document["name"]:
        return str(document["name"])
    return path.stem


def load_slate_declarations(
    ladders_dir: Path | str | None,
    *,
    tokenizer: str = "cl100k_base",
    problems: list[str] | None = None,
) -> dict[str, list[SlateSpec]]:
    """Parse the ``slates:`` block of every ``*.yaml``/``*.yml`` in ``ladders_dir``.

    Other top-level keys (steps, agents, resources, models …) are left to the ladder loader;
    files without a ``slates`` key are skipped. Returns ``{ladder name: [SlateSpec, …]}``;
    raises ``ConfigError`` naming file and path — or, given a ``problems`` list, skips an
    invalid file and adds its error there (as the server skips it: valid ladders serve).
    """
    if ladders_dir is None:
        return {}
    root = Path(ladders_dir)
    if not root.is_dir():
        raise ConfigError(f"ladders directory {str(root)!r} does not exist")
    result: dict[str, list[SlateSpec]] = {}
    origin: dict[str, Path] = {}
    for path in sorted([*root.glob("*.yaml"), *root.glob("*.yml")]):
        try:
            found = _file_declarations(path, origin, tokenizer)
        except ConfigError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
            continue
        if found is not None:
            origin[found[0]] = path
            result[found[0]] = found[1]
    return result


def _file_declarations(
    path: Path, origin: dict[str, Path], tokenizer: str
) -> tuple[str, list[SlateSpec]] | None:
    """One file's ``(ladder name, slates)``, None when it declares none; ``ConfigError``."""
    try:
        document = load_yaml(read_yaml_text(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read YAML: {exc}") from None
    except YAMLError as exc:
        raise ConfigError(f"{path}: cannot read YAML: {yaml_problem(exc)}") from None
    if not isinstance(document, dict) or "slates" not in document:
        # Declares no slates. It may not even be a ladder (a hook's settings file can sit
        # beside the ladders); the ladder loader reports what is wrong with real ladders.
        return None
    name = ladder_name(path, document)
    if name in origin:
        raise ConfigError(f"{path}: ladder name {name!r} is already used by {origin[name]}")
    specs = parse_slates(document.get("slates") or [], str(path), tokenizer=tokenizer)
    check_init_sizes(specs, str(path), tokenizer=tokenizer)
    return name, specs
