"""The seed-001 ``resources:`` and ``agents:`` blocks: parsed verbatim, then built into
assemblies and the hook objects of ``cairn.ladders.hooks``.

Settings files named by a resource are read only from inside the config's directory and only
up to ``MAX_SETTINGS_FILE_BYTES``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cairn.core.memory import Assembly
from cairn.core.text import NUL
from cairn.core.yamlfiles import YAMLError, load_yaml, read_yaml_text, yaml_problem
from cairn.engine.context.impls import get_assembly_impl
from cairn.errors import ConfigError
from cairn.ladders.hooks import (
    MAX_CONFIG_FILE_BYTES,
    MAX_SETTINGS_FILE_BYTES,
    ContextHookSettings,
    MemoryContextHook,
    MemoryTurnHook,
    TurnHookSettings,
    _Strict,
)

if TYPE_CHECKING:
    from cairn.engine.context.assembly import AssemblyHost


class HookDeps(_Strict):
    memory: str = Field(min_length=1)


class ContextHookSpec(_Strict):
    type: Literal["memory.context"]
    deps: HookDeps
    settings: ContextHookSettings


class TurnHookSpec(_Strict):
    type: Literal["memory.turn"]
    deps: HookDeps
    settings: TurnHookSettings


class ResourceSettings(BaseModel):
    """``file`` (a YAML mapping, relative to the config's directory) and/or inline keys; the
    impl validates the merged mapping."""

    model_config = ConfigDict(frozen=True, extra="allow")

    file: str | None = None

    def inline(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class ResourceSpec(_Strict):
    kind: Literal["memory.Assembly"]
    impl: str = Field(min_length=1)
    deps: dict[str, str] = Field(default_factory=dict)
    settings: ResourceSettings = Field(default_factory=ResourceSettings)


class AgentSpec(_Strict):
    prepare: list[ContextHookSpec] = Field(default_factory=list)
    commit: list[TurnHookSpec] = Field(default_factory=list)


class MemoryStackConfig(_Strict):
    """The seed-001 blocks: ``resources`` (``memory.Assembly``) and ``agents`` (their hooks)."""

    resources: dict[str, ResourceSpec] = Field(default_factory=dict)
    agents: dict[str, AgentSpec] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _deps_exist(self) -> MemoryStackConfig:
        for agent, spec in self.agents.items():
            deps: list[tuple[str, list[HookDeps]]] = [
                ("prepare", [h.deps for h in spec.prepare]),
                ("commit", [h.deps for h in spec.commit]),
            ]
            for phase, hook_deps in deps:
                for i, dep in enumerate(hook_deps):
                    if dep.memory not in self.resources:
                        known = ", ".join(sorted(self.resources)) or "none"
                        raise ValueError(
                            f"agents.{agent}.{phase}.{i}.deps.memory names resource "
                            f"{dep.memory!r}, which is not declared (resources: {known})"
                        )
        return self


def _config_error(exc: ValidationError, source: str) -> ConfigError:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return ConfigError(f"{source}: " + "; ".join(parts), code="invalid_config")


def parse_memory_config(data: Any, source: str = "<config>") -> MemoryStackConfig:
    """Validate already-loaded YAML; errors name ``source`` and each field path."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping at the top level", code="invalid_config")
    try:
        return MemoryStackConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise _config_error(exc, source) from exc


def _read_yaml(path: Path, max_bytes: int) -> Any:
    try:
        text = read_yaml_text(path, max_bytes)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})", code="invalid_config") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}", code="invalid_config") from exc
    try:
        return load_yaml(text)
    except YAMLError as exc:
        raise ConfigError(
            f"{path}: invalid YAML: {yaml_problem(exc)}", code="invalid_config"
        ) from exc


def load_memory_config(path: Path | str) -> MemoryStackConfig:
    """Read and validate a YAML file holding ``resources:`` and ``agents:``."""
    path = Path(path)
    return parse_memory_config(_read_yaml(path, MAX_CONFIG_FILE_BYTES), str(path))


def read_settings_file(
    config_dir: Path | str, file: str, *, max_bytes: int = MAX_SETTINGS_FILE_BYTES
) -> dict[str, Any]:
    """The YAML mapping in ``file``, which must resolve (symlinks followed) to a path inside
    ``config_dir`` and be at most ``max_bytes`` long. An empty file is an empty mapping."""
    if NUL in file:
        raise ConfigError(
            f"settings file {file!r} must not contain a NUL character", code="invalid_config"
        )
    base = Path(config_dir).resolve()
    target = (base / file).resolve()
    if not target.is_relative_to(base):
        raise ConfigError(
            f"settings file {file!r} is outside the config directory {base}",
            code="settings_file_outside",
        )
    if not target.is_file():
        raise ConfigError(
            f"settings file {file!r} does not exist in {base}", code="settings_file_missing"
        )
    data = _read_yaml(target, max_bytes)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{target}: expected a mapping of settings", code="invalid_config")
    return dict(data)


def build_assemblies(
    config: MemoryStackConfig,
    config_dir: Path | str,
    host: AssemblyHost,
    tenant_id: str = "default",
) -> dict[str, Assembly]:
    """One Assembly per resource, from its registered impl (called with ``host``, the
    tenant, the resource's ``deps`` and its settings)."""
    out: dict[str, Assembly] = {}
    for name, res in config.resources.items():
        factory = get_assembly_impl(res.impl)
        merged: dict[str, Any] = {}
        if res.settings.file:
            merged.update(read_settings_file(config_dir, res.settings.file))
        merged.update(res.settings.inline())
        try:
            out[name] = factory(host, tenant_id, dict(res.deps), merged)
        except ValidationError as exc:
            raise _config_error(exc, f"resources.{name}.settings") from exc
    return out


@dataclass
class AgentHooks:
    prepare: list[MemoryContextHook] = field(default_factory=list)
    commit: list[MemoryTurnHook] = field(default_factory=list)


def build_agent_hooks(
    config: MemoryStackConfig, assemblies: Mapping[str, Assembly]
) -> dict[str, AgentHooks]:
    """Hook objects per agent, each bound to the assembly its ``deps.memory`` names."""
    return {
        agent: AgentHooks(
            prepare=[
                MemoryContextHook(h.settings, assemblies[h.deps.memory]) for h in spec.prepare
            ],
            commit=[MemoryTurnHook(h.settings, assemblies[h.deps.memory]) for h in spec.commit],
        )
        for agent, spec in config.agents.items()
    }
