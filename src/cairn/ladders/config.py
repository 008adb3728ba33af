"""The ladder file: YAML validated by pydantic models that forbid unknown keys.

A ladder file holds any of:

- ``slates:`` — working memory (the slates package's declaration models),
- ``steps:`` — model calls with typed fields, ``slateWrite`` blocks and gated writes,
- ``resources:`` / ``agents:`` — the seed-001 form: a ``memory.Assembly`` resource, and agents
  whose ``prepare:`` and ``commit:`` hooks run around the steps,
- ``providers:`` / ``models:`` / ``model:`` — where the steps' model calls go.

Every error names the file and the path inside it (``steps[0].fields[1].from``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cairn.core.scope import Scope
from cairn.core.subject_id import subject_id_problem
from cairn.core.yamlfiles import (
    MAX_YAML_BYTES,
    YAMLError,
    load_yaml,
    read_yaml_text,
    yaml_problem,
)
from cairn.errors import ConfigError
from cairn.ladders.memory_stack import (
    AgentSpec,
    MemoryStackConfig,
    ResourceSpec,
)
from cairn.slates.config import (
    GateSpec,
    SlateReadSource,
    SlateSpec,
    SlateWriteSpec,
    parse_slates,
)

MAX_LADDER_BYTES = MAX_YAML_BYTES
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
STEP_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$")
TEXT_SOURCE_RE = re.compile(
    r"^(input\.context|input\.messages|board\.[A-Za-z0-9_\-.]+|steps\.[A-Za-z_][A-Za-z0-9_\-]*(\.output)?)$"
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class TextField(Strict):
    """Text from the request (``input.context``: the last user message; ``input.messages``: the
    whole conversation as a transcript), a board variable (``board.NAME``) or an earlier step's
    output (``steps.ID``)."""

    name: str = Field(min_length=1, max_length=128)
    type: Literal["text"]
    source: str = Field(alias="from")
    fallback: str | None = None

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        return check_text_source(value)


def check_text_source(value: str) -> str:
    if not TEXT_SOURCE_RE.match(value):
        raise ValueError(
            f"unknown text source {value!r}: use input.context, input.messages, "
            "board.NAME or steps.ID"
        )
    return value


class SlateReadField(Strict):
    """A slate file's text (or a metatag's JSON); ``fallback`` when empty or unreadable."""

    name: str = Field(min_length=1, max_length=128)
    type: Literal["slateRead"]
    source: SlateReadSource = Field(alias="from")
    fallback: str | None = None


FieldSpec = Annotated[TextField | SlateReadField, Field(discriminator="type")]


class TemplateValue(Strict):
    """A template value taken from a text source (as a text field's ``from``), optionally one
    member (``field``) of the JSON found in it."""

    source: str = Field(alias="from")
    field: str | None = None

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        return check_text_source(value)


class TemplateRecordSpec(Strict):
    """``recordTemplate:`` — after the step, apply a memory template (seed 000) and record its
    episode, once per run (the idempotency key is ``RUN_ID:STEP_ID``)."""

    template: str = Field(min_length=1)
    subject_id: str | None = None
    scope: Scope | None = None
    session_id: str | None = Field(None, min_length=1, max_length=256)
    values: dict[str, str | TemplateValue] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_target(self) -> TemplateRecordSpec:
        if (self.subject_id is None) == (self.scope is None):
            raise ValueError("recordTemplate needs exactly one of subject_id or scope")
        problem = subject_id_problem(self.subject_id) if self.subject_id is not None else None
        if problem:
            raise ValueError(f"subject_id {self.subject_id!r} {problem}")
        return self

    def target(self) -> Scope:
        return self.scope if self.scope is not None else Scope.for_subject(self.subject_id or "")


class StepSpec(Strict):
    """One model call. Its output is ``steps.ID`` for later steps; the last one is the reply."""

    id: str
    model: str | None = None
    systemPrompt: str = ""
    fields: list[FieldSpec] = Field(default_factory=list)
    slateWrite: SlateWriteSpec | None = None
    gate: GateSpec | None = Field(None, alias="if")
    recordTemplate: TemplateRecordSpec | None = None
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    maxTokens: int | None = Field(None, gt=0, strict=True)
    # Remove the JSON slateWrite matched from the reply the caller sees (the write sees it all).
    stripMatch: bool = Field(False, strict=True)
    # What a refused write (full reject folder, entry too large, ...) does to the call.
    onRejected: Literal["continue", "fail"] = "continue"

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not STEP_ID_RE.match(value):
            raise ValueError(f"step id {value!r} must match {STEP_ID_RE.pattern}")
        return value

    @model_validator(mode="after")
    def _unique_fields(self) -> StepSpec:
        seen: set[str] = set()
        for f in self.fields:
            if f.name in seen:
                raise ValueError(f"field name {f.name!r} appears twice in step {self.id!r}")
            seen.add(f.name)
        if self.stripMatch and self.slateWrite is None:
            raise ValueError(
                f"step {self.id!r}: stripMatch removes what slateWrite matched; add a slateWrite"
            )
        return self

    def slate_writes(self) -> list[SlateWriteSpec]:
        return [] if self.slateWrite is None else [self.slateWrite]


class ScriptedRuleSpec(Strict):
    reply: str
    contains: str | None = None
    regex: str | None = None

    @field_validator("regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"invalid regex {value!r}: {exc}") from exc
        return value


class ScriptedFile(Strict):
    rules: list[ScriptedRuleSpec] = Field(default_factory=list)
    default: str | None = None


class ProviderSpec(Strict):
    """``kind: openai`` (an OpenAI-compatible server) or ``kind: scripted`` (fixed replies)."""

    kind: Literal["openai", "scripted"]
    # openai
    baseUrl: str | None = None
    apiKeyEnv: str | None = None
    timeout: float | None = Field(None, gt=0, le=600, strict=True)
    retries: int = Field(2, ge=0, le=10, strict=True)
    # scripted
    rules: list[ScriptedRuleSpec] = Field(default_factory=list)
    file: str | None = None
    default: str | None = None

    @model_validator(mode="after")
    def _kind_keys(self) -> ProviderSpec:
        if self.kind == "openai":
            if not self.baseUrl:
                raise ValueError("an openai provider needs baseUrl")
            if self.rules or self.file or self.default is not None:
                raise ValueError("rules, file and default belong to scripted providers")
        else:
            if self.baseUrl or self.apiKeyEnv:
                raise ValueError("baseUrl and apiKeyEnv belong to openai providers")
            if not self.rules and not self.file and self.default is None:
                raise ValueError("a scripted provider needs rules, a file or a default")
        return self


class ModelRouteSpec(Strict):
    provider: str
    model: str | None = None


class LadderAgentSpec(AgentSpec):
    """A seed-001 agent (``prepare:`` / ``commit:`` hooks), optionally with its own ``steps:``
    (else the ladder's top-level steps, else the implicit ``reply`` step)."""

    steps: list[StepSpec] = Field(default_factory=list)
    systemPrompt: str = ""


class LadderFile(Strict):
    """The whole ladder file."""

    name: str | None = None
    description: str = ""
    model: str | None = None
    slates: list[SlateSpec] = Field(default_factory=list)
    providers: dict[str, ProviderSpec] = Field(default_factory=dict)
    models: dict[str, ModelRouteSpec | str] = Field(default_factory=dict)
    steps: list[StepSpec] = Field(default_factory=list)
    resources: dict[str, ResourceSpec] = Field(default_factory=dict)
    agents: dict[str, LadderAgentSpec] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_RE.match(value):
            raise ValueError(f"ladder name {value!r} must match {NAME_RE.pattern}")
        return value

    @model_validator(mode="after")
    def _references(self) -> LadderFile:
        check_steps(self.steps, self, "steps")
        for agent_name, agent in self.agents.items():
            check_steps(agent.steps, self, f"agents.{agent_name}.steps")
        # The hooks' own cross-checks (every deps.memory names a declared resource).
        try:
            MemoryStackConfig(
                resources=self.resources,
                agents={
                    k: AgentSpec(prepare=a.prepare, commit=a.commit) for k, a in self.agents.items()
                },
            )
        except ValidationError as exc:
            raise ValueError(str(exc.errors()[0]["msg"]).removeprefix("Value error, ")) from None
        for route_name, route in self.routes().items():
            if route.provider != "default" and route.provider not in self.providers:
                raise ValueError(
                    f"models.{route_name}: provider {route.provider!r} is not declared in "
                    f"providers (declared: {', '.join(sorted(self.providers)) or 'none'}; "
                    "'default' is the CAIRN_LLM_* server)"
                )
        return self

    def routes(self) -> dict[str, ModelRouteSpec]:
        return {
            k: ModelRouteSpec(provider=v) if isinstance(v, str) else v
            for k, v in self.models.items()
        }


def check_steps(steps: list[StepSpec], ladder: LadderFile, where: str) -> None:
    """Cross-references: unique ids, ``steps.ID`` only to earlier steps, slates declared."""
    seen: set[str] = set()
    slates = {s.title: s for s in ladder.slates}
    for i, step in enumerate(steps):
        if step.id in seen:
            raise ValueError(f"{where}[{i}].id: step id {step.id!r} is used twice")
        for j, f in enumerate(step.fields):
            if isinstance(f, TextField) and f.source.startswith("steps."):
                ref = f.source.split(".")[1]
                if ref not in seen:
                    raise ValueError(
                        f"{where}[{i}].fields[{j}].from: {f.source!r} must name an earlier step"
                    )
            if isinstance(f, SlateReadField):
                check_slate_ref(slates, f.source, f"{where}[{i}].fields[{j}].from")
        for w in step.slate_writes():
            check_slate_ref(slates, w.to, f"{where}[{i}].slateWrite.to")
        for name, v in step.recordTemplate.values.items() if step.recordTemplate else []:
            if isinstance(v, TemplateValue) and v.source.startswith("steps."):
                ref = v.source.split(".")[1]
                if ref not in seen and ref != step.id:
                    raise ValueError(
                        f"{where}[{i}].recordTemplate.values.{name}.from: {v.source!r} must "
                        "name this step or an earlier one"
                    )
        if step.gate is not None:
            check_slate_ref(slates, step.gate.then_.write.to, f"{where}[{i}].if.then.write.to")
            if step.gate.else_ is not None:
                check_slate_ref(slates, step.gate.else_.write.to, f"{where}[{i}].if.else.write.to")
        seen.add(step.id)


def check_slate_ref(slates: dict[str, SlateSpec], ref: Any, where: str) -> None:
    slate = slates.get(ref.slate)
    if slate is None:
        raise ValueError(
            f"{where}: slate {ref.slate!r} is not declared in slates "
            f"(declared: {', '.join(sorted(slates)) or 'none'})"
        )
    if ref.folder is None:
        return  # (the slate's tree)
    folder = slate.folder(ref.folder)
    if folder is None:
        raise ValueError(f"{where}: slate {ref.slate!r} has no folder {ref.folder!r}")
    file = getattr(ref, "file", None)
    if file is not None and not folder.open and folder.file(file) is None:
        raise ValueError(f"{where}: folder {ref.folder!r} declares no file {file!r}")


# --------------------------------------------------------------------------- loading


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


_UNION_SEGMENT = re.compile(r"^(text|slateRead|str|ModelRouteSpec|function-.*|list\[.*)$")


def format_validation_error(path: Path | str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        # Drop the union-member segments pydantic adds ('text', 'slateRead', 'str', ...).
        loc = tuple(p for p in err["loc"] if not _UNION_SEGMENT.match(str(p)))
        msg = err["msg"].removeprefix("Value error, ")
        # (A check of the whole file names its own place: ``steps[0]…``.)
        lines.append(f"{_loc(loc)}: {msg}" if loc else msg)
    return f"{path}: " + "; ".join(lines)


def read_yaml(path: Path) -> Any:
    """Parse a YAML file with the one configuration reader (YAML 1.2, size-limited); errors
    name the file and the line."""
    try:
        text = read_yaml_text(path, MAX_LADDER_BYTES)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the ladder file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    try:
        return load_yaml(text) or {}
    except YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {yaml_problem(exc)}") from exc


def parse_ladder_file(path: Path, data: Any = None) -> LadderFile:
    """Validate one ladder file (structure and cross-references): its parsed ``data`` when
    the caller has read it already (``read_yaml``), else the file is read here."""
    if data is None:
        data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a ladder file must be a mapping at the top level")
    # The slates package validates its block first, so its messages are the same everywhere.
    parse_slates(data.get("slates") or [], str(path))
    try:
        return LadderFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(path, exc), code="invalid_ladder") from exc


def ladder_name(path: Path, spec: LadderFile) -> str:
    """The explicit ``name``, else the file name without its extension."""
    name = spec.name or path.stem
    if not NAME_RE.match(name):
        raise ConfigError(
            f"{path}: the ladder name {name!r} (from the file name) must match {NAME_RE.pattern}; "
            "rename the file or set 'name:'",
            code="invalid_ladder",
        )
    return name


def ladder_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


__all__ = [
    "FieldSpec",
    "LadderAgentSpec",
    "LadderFile",
    "ModelRouteSpec",
    "ProviderSpec",
    "ScriptedFile",
    "ScriptedRuleSpec",
    "SlateReadField",
    "StepSpec",
    "TextField",
    "ladder_files",
    "ladder_name",
    "parse_ladder_file",
    "read_yaml",
]
