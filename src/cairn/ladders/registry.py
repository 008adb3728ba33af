"""The ladder registry: every ladder file of ``CAIRN_LADDERS_DIR``, validated and ready to run.

Each file is one ladder, named by its ``name:`` or its file name. A file with ``agents:`` also
serves each agent as ``LADDER:AGENT``; the bare ladder name runs its first agent. An invalid
file is a ``ConfigError`` naming the file and the path inside it, raised at start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cairn.config import Settings
from cairn.errors import CairnError, ConfigError, NotFound
from cairn.ladders.config import (
    LadderFile,
    ScriptedFile,
    StepSpec,
    format_validation_error,
    ladder_files,
    ladder_name,
    parse_ladder_file,
    read_yaml,
)
from cairn.ladders.providers import (
    DEFAULT_PROVIDER,
    ChatProvider,
    ModelRoute,
    OpenAIChatProvider,
    ProviderRouter,
    ScriptedProvider,
    ScriptedRule,
)

MAX_SCRIPT_BYTES = 1_048_576


class LadderNotFound(NotFound):
    code = "ladder_not_found"


@dataclass
class Ladder:
    """One runnable model id: a ladder file, and the agent whose hooks wrap its steps."""

    name: str  # the model id: LADDER or LADDER:AGENT
    ladder: str  # the ladder (file) name: slates belong to it
    path: Path
    spec: LadderFile
    router: ProviderRouter
    steps: list[StepSpec]
    agent: str | None = None
    binding: Any = None  # an agents.AgentBinding: the agent's hooks, per tenant
    secrets: list[str] = field(default_factory=list)  # provider keys, redacted from traces


def build_providers(
    path: Path, spec: LadderFile, settings: Settings, *, transport: Any = None
) -> tuple[dict[str, ChatProvider], list[str]]:
    """The default provider (when configured) and the ladder's own; also their secrets."""
    providers: dict[str, ChatProvider] = {}
    secrets: list[str] = []
    if settings.llm_base_url:
        providers[DEFAULT_PROVIDER] = OpenAIChatProvider(
            DEFAULT_PROVIDER,
            settings.llm_base_url,
            settings.llm_api_key,
            timeout_s=settings.llm_timeout_s,
            transport=transport,
        )
        if settings.llm_api_key:
            secrets.append(settings.llm_api_key)
    for pname, p in spec.providers.items():
        if p.kind == "openai":
            key = os.environ.get(p.apiKeyEnv, "") if p.apiKeyEnv else ""
            if key:
                secrets.append(key)
            providers[pname] = OpenAIChatProvider(
                pname,
                p.baseUrl or "",
                key,
                timeout_s=p.timeout or settings.llm_timeout_s,
                retries=p.retries,
                transport=transport,
            )
        else:
            rules = [ScriptedRule(r.reply, r.contains, r.regex) for r in p.rules]
            default = p.default
            if p.file:
                script = load_script(path, p.file, f"providers.{pname}.file")
                rules.extend(ScriptedRule(r.reply, r.contains, r.regex) for r in script.rules)
                default = default if default is not None else script.default
            providers[pname] = ScriptedProvider(pname, rules, default)
    return providers, secrets


def load_script(ladder_path: Path, ref: str, where: str) -> ScriptedFile:
    """A scripted provider's reply file, confined to the ladder file's directory."""
    base = ladder_path.parent.resolve()
    target = (base / ref).resolve()
    if not target.is_relative_to(base):
        raise ConfigError(f"{ladder_path}: {where}: {ref!r} is outside the ladder's directory")
    if not target.is_file():
        raise ConfigError(f"{ladder_path}: {where}: file {ref!r} does not exist")
    if target.stat().st_size > MAX_SCRIPT_BYTES:
        raise ConfigError(
            f"{ladder_path}: {where}: {ref!r} is larger than {MAX_SCRIPT_BYTES} bytes"
        )
    data = read_yaml(target)
    if isinstance(data, list):
        data = {"rules": data}
    try:
        return ScriptedFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(target, exc)) from exc


def compile_ladder(path: Path, settings: Settings, *, transport: Any = None) -> list[Ladder]:
    """Validate a ladder file and build its runnable model ids (first the bare name)."""
    spec = parse_ladder_file(path)
    name = ladder_name(path, spec)
    providers, secrets = build_providers(path, spec, settings, transport=transport)
    routes = {k: ModelRoute(v.provider, v.model) for k, v in spec.routes().items()}
    router = ProviderRouter(providers, routes, default_model=spec.model or settings.llm_model)
    if not spec.agents:
        # No steps at all: one step without fields, a plain pass-through of the conversation.
        steps = list(spec.steps) or [StepSpec.model_validate({"id": "reply"})]
        return [Ladder(name, name, path, spec, router, steps, secrets=secrets)]
    from cairn.ladders.agents import build_agents

    out: list[Ladder] = []
    for agent, (steps, binding, _) in build_agents(path, spec).items():
        out.append(
            Ladder(f"{name}:{agent}", name, path, spec, router, steps, agent, binding, secrets)
        )
    # The bare name runs the first agent.
    first = out[0]
    out.insert(
        0, Ladder(name, name, path, spec, router, first.steps, first.agent, first.binding, secrets)
    )
    return out


def check_binding(path: Path, binding: Any, services: Any) -> None:
    """Build an agent's resources and hooks once, turning any failure into a ConfigError."""
    from cairn.core.tenants import DEFAULT_TENANT

    try:
        binding.hooks_for(services, DEFAULT_TENANT)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", code=exc.code) from exc
    except (CairnError, ValidationError) as exc:
        raise ConfigError(f"{path}: agents.{binding.agent}: {exc}", code="invalid_ladder") from exc


def check_templates(path: Path, ladder: Ladder, services: Any) -> None:
    """Every ``recordTemplate`` names a template of the catalogue."""
    catalogue = getattr(services, "templates", None)
    if catalogue is None:
        return
    for i, step in enumerate(ladder.steps):
        spec = step.recordTemplate
        if spec is not None and spec.template not in catalogue:
            raise ConfigError(
                f"{path}: steps[{i}].recordTemplate.template: no memory template {spec.template!r}",
                code="invalid_ladder",
            )


def referenced_files(paths: list[Path]) -> set[Path]:
    """Files the ladder files name as a resource's ``settings.file`` or a scripted provider's
    ``file``: they may sit beside the ladders (the seed's ``./memory.yaml``) but are not ladders."""
    out: set[Path] = set()
    for path in paths:
        try:
            data = read_yaml(path)
        except ConfigError:
            continue  # reported when the file itself is compiled
        if not isinstance(data, dict):
            continue
        blocks = [*(data.get("resources") or {}).values(), *(data.get("providers") or {}).values()]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            settings = block.get("settings")
            ref = settings.get("file") if isinstance(settings, dict) else block.get("file")
            if isinstance(ref, str):
                out.add((path.parent / ref).resolve())
    return out


class LadderRegistry:
    """The ladders of one directory, by model id."""

    def __init__(self, ladders: list[Ladder] | None = None, directory: Path | None = None) -> None:
        self.directory = directory
        self._by_name: dict[str, Ladder] = {}
        for ladder in ladders or []:
            self.add(ladder)

    def add(self, ladder: Ladder) -> None:
        other = self._by_name.get(ladder.name)
        if other is not None and other.path != ladder.path:
            raise ConfigError(
                f"{ladder.path}: ladder name {ladder.name!r} is already used by {other.path}"
            )
        self._by_name[ladder.name] = ladder

    @classmethod
    def load(cls, settings: Settings, *, services: Any = None, **kwargs: Any) -> LadderRegistry:
        """Every ``*.yaml``/``*.yml`` of ``settings.ladders_dir`` (none when unset).

        With ``services``, each agent's memory resources are also built once (for the default
        tenant), so a settings file the impl rejects stops the start, naming the file."""
        directory = settings.ladders_dir
        if directory is None:
            return cls()
        if not directory.is_dir():
            raise ConfigError(f"ladders directory {str(directory)!r} does not exist")
        registry = cls(directory=directory)
        paths = ladder_files(directory)
        referenced = referenced_files(paths)
        for path in paths:
            if path.resolve() in referenced:
                continue  # a settings or replies file of a ladder, not a ladder
            for ladder in compile_ladder(path, settings, **kwargs):
                if services is not None and ladder.binding is not None:
                    check_binding(path, ladder.binding, services)
                if services is not None:
                    check_templates(path, ladder, services)
                registry.add(ladder)
        return registry

    def get(self, name: str) -> Ladder:
        ladder = self._by_name.get(name)
        if ladder is None:
            raise LadderNotFound(
                f"no ladder named {name!r}", details={"ladder": name, "known": self.names()}
            )
        return ladder

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def all(self) -> list[Ladder]:
        return [self._by_name[n] for n in self.names()]


__all__ = ["Ladder", "LadderNotFound", "LadderRegistry", "compile_ladder", "load_script"]
