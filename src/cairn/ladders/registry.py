"""The ladder registry: every ladder file of ``CAIRN_LADDERS_DIR``, validated and ready to run.

Each file is one ladder, named by its ``name:`` or its file name. A file with ``agents:`` also
serves each agent as ``LADDER:AGENT``; the bare ladder name runs its first agent. An invalid
file is reported with a message naming the file and the path inside it, and does not stop the
others; ``reload`` re-reads the directory while the server runs (``LadderWatcher`` calls it
when a file changes).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from cairn.config import Settings
from cairn.core.ids import utcnow
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

if TYPE_CHECKING:
    from cairn.ladders.agents import AgentBinding
    from cairn.ladders.host import LadderHost
    from cairn.templates import TemplateCatalogue

MAX_SCRIPT_BYTES = 1_048_576
log = logging.getLogger("cairn.ladders")


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


def compile_ladder(
    path: Path, settings: Settings, *, transport: Any = None, data: Any = None
) -> list[Ladder]:
    """Validate a ladder file and build its runnable model ids (first the bare name). ``data``
    is the file's parsed YAML when the caller has read it already (the registry reads each
    file once per reload)."""
    spec = parse_ladder_file(path, data)
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


def check_binding(path: Path, binding: AgentBinding, host: LadderHost) -> None:
    """Build an agent's resources and hooks once, turning any failure into a ConfigError."""
    from cairn.core.tenants import DEFAULT_TENANT

    try:
        binding.hooks_for(host, DEFAULT_TENANT)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc.message}", code=exc.code) from exc
    except (CairnError, ValidationError) as exc:
        raise ConfigError(f"{path}: agents.{binding.agent}: {exc}", code="invalid_ladder") from exc


def check_templates(path: Path, ladder: Ladder, catalogue: TemplateCatalogue) -> None:
    """Every ``recordTemplate`` names a template of the catalogue, and its ``values`` name
    only fields of that template and each required one (else every run would record nothing:
    ``template_unknown_field``, ``template_missing_field``)."""
    for i, step in enumerate(ladder.steps):
        spec = step.recordTemplate
        if spec is None:
            continue
        where = f"{path}: steps[{i}].recordTemplate"
        if spec.template not in catalogue:
            raise ConfigError(
                f"{where}.template: no memory template {spec.template!r}", code="invalid_ladder"
            )
        template = catalogue.get(spec.template)
        problem = template.names_problem(spec.values)
        if problem:
            fields = ", ".join(template.field_names)
            raise ConfigError(
                f"{where}.values: {problem} (its fields: {fields})", code="invalid_ladder"
            )


def read_documents(paths: list[Path]) -> dict[Path, Any]:
    """Each file's parsed YAML, or the ``ConfigError`` reading it raised (reported when the
    file is compiled): one read per file per reload."""
    out: dict[Path, Any] = {}
    for path in paths:
        try:
            out[path] = read_yaml(path)
        except ConfigError as exc:
            out[path] = exc
    return out


def referenced_files(documents: dict[Path, Any]) -> set[Path]:
    """Files the ladder files name as a resource's ``settings.file`` or a scripted provider's
    ``file``: they may sit beside the ladders (the seed's ``./memory.yaml``) but are not ladders."""
    out: set[Path] = set()
    for path, data in documents.items():
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


@dataclass
class LadderFileState:
    """One ladder file as the registry last saw it: the version it serves (the last one that
    compiled, empty if none ever did) and the error of the current file, if it is invalid."""

    path: Path
    name: str
    ladders: list[Ladder] = field(default_factory=list)
    error: str | None = None
    loaded_at: datetime | None = None
    checked_at: datetime | None = None

    @property
    def status(self) -> str:
        """``ok``; ``stale`` (invalid now, the previous version serves); ``invalid`` (never
        loaded)."""
        if self.error is None:
            return "ok"
        return "stale" if self.ladders else "invalid"

    def to_dict(self, directory: Path | None) -> dict[str, Any]:
        file = self.path.name if directory is None else str(self.path.relative_to(directory))
        return {
            "name": self.name,
            "file": file,
            "status": self.status,
            "error": self.error,
            "models": [ladder.name for ladder in self.ladders],
            "loaded_at": _iso(self.loaded_at),
            "checked_at": _iso(self.checked_at),
        }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _guess_name(path: Path, data: Any) -> str:
    """The name a ladder file claims (its ``name:``, else its stem), even when it is invalid."""
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name else path.stem


class LadderRegistry:
    """The ladders of one directory, by model id, reloadable while the server runs.

    ``reload`` re-reads the directory: every valid file serves its new version; an invalid
    file is reported (``states``, the log) and keeps serving its previous good version, if it
    had one; a deleted file's ladders go. The maps are swapped whole, so readers on other
    threads see either the old or the new set, never half of each."""

    def __init__(
        self,
        ladders: list[Ladder] | None = None,
        directory: Path | None = None,
        *,
        settings: Settings | None = None,
        services: LadderHost | None = None,
        compile_options: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.settings = settings
        self.services = services
        self.compile_options = compile_options or {}
        self._by_name: dict[str, Ladder] = {}
        self._files: dict[Path, LadderFileState] = {}
        self._declared: set[str] = set()
        self._lock = threading.Lock()
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
    def load(
        cls, settings: Settings, *, services: LadderHost | None = None, **kwargs: Any
    ) -> LadderRegistry:
        """Every ``*.yaml``/``*.yml`` of ``settings.ladders_dir`` (none when unset).

        Valid files serve; invalid ones are reported (``states()``, ``errors()``, the log)
        instead of stopping the start. With ``services``, each agent's memory resources are
        built once (default tenant) and each ``recordTemplate`` checked against the catalogue,
        so a settings file the impl rejects is reported as that file's error."""
        directory = settings.ladders_dir
        if directory is None:
            return cls()
        if not directory.is_dir():
            raise ConfigError(f"ladders directory {str(directory)!r} does not exist")
        registry = cls(
            directory=directory, settings=settings, services=services, compile_options=kwargs
        )
        registry.reload()
        return registry

    def _compile(self, path: Path, data: Any) -> list[Ladder]:
        assert self.settings is not None
        if isinstance(data, ConfigError):
            raise data
        ladders = compile_ladder(path, self.settings, data=data, **self.compile_options)
        if self.services is not None:
            for ladder in ladders:
                if ladder.binding is not None:
                    check_binding(path, ladder.binding, self.services)
                check_templates(path, ladder, self.services.templates)
            slates = self.services.slates
            if ladders:
                from cairn.slates.config import check_init_sizes

                # The server's tokenizer may count an init differently from the default.
                check_init_sizes(ladders[0].spec.slates, str(path), tokenizer=slates.tokenizer)
        return ladders

    def _message(self, exc: ConfigError) -> str:
        # Paths relative to the ladders directory: the message is shown to API callers.
        text = exc.message
        if self.directory is not None:
            text = text.replace(str(self.directory.resolve()) + "/", "")
            text = text.replace(str(self.directory) + "/", "")
        return text

    def reload(self) -> list[LadderFileState]:
        """Re-read the directory (see the class docstring); returns every file's state."""
        if self.directory is None:
            return []
        with self._lock:
            now = utcnow()
            try:
                paths = ladder_files(self.directory)
            except OSError as exc:
                log.error("cannot list the ladders directory %s: %s", self.directory, exc)
                return list(self._files.values())
            documents = read_documents(paths)
            referenced = referenced_files(documents)
            kept = [p for p in paths if p.resolve() not in referenced]
            states = {p: self._reload_file(p, documents[p], now) for p in kept}
            ordered = sorted(states, key=lambda p: self._rank(p, states[p].name))
            files: dict[Path, LadderFileState] = {}
            by_name: dict[str, Ladder] = {}
            for path in ordered:
                files[path] = state = states[path]
                clash = next((by_name[x.name] for x in state.ladders if x.name in by_name), None)
                if clash is not None:
                    message = (
                        f"{path.name}: ladder name {state.name!r} is already used by "
                        f"{clash.path.name}"
                    )
                    old = self._files.get(path)
                    if old is None or old.error != message:
                        log.warning("ladder file %s is invalid: %s", path.name, message)
                    # It never serves under this name: invalid, never loaded.
                    state.error, state.ladders, state.loaded_at = message, [], None
                    continue
                by_name.update({x.name: x for x in state.ladders})
            self._declare_slates(files)
            self._files = dict(sorted(files.items()))
            self._by_name = by_name
            return list(self._files.values())

    def _rank(self, path: Path, name: str) -> tuple[bool, bool, str]:
        """Who owns a name two files claim: the file serving that name keeps it; else the file
        named after it (``memory-ladder.yaml``), then the first by name, in every process."""
        old = self._files.get(path)
        serving = old is not None and any(x.name == name for x in old.ladders)
        return (not serving, name != path.stem, path.name)

    def close(self) -> None:
        """Close the serving ladders' model providers (their HTTP connection pools) and serve
        nothing more. Versions a reload replaced close theirs once no run holds them."""
        with self._lock:
            ladders, self._by_name, self._files = list(self._by_name.values()), {}, {}
        seen: set[int] = set()
        for ladder in ladders:
            for provider in ladder.router.providers.values():
                close = getattr(provider, "close", None)
                if close is not None and id(provider) not in seen:
                    seen.add(id(provider))
                    close()

    def _reload_file(self, path: Path, data: Any, now: datetime) -> LadderFileState:
        old = self._files.get(path)
        try:
            ladders = self._compile(path, data)
        except ConfigError as exc:
            message = self._message(exc)
            if old is None or old.error != message:
                log.warning("ladder file %s is invalid: %s", path.name, message)
            if old is not None and old.ladders:
                return LadderFileState(
                    path, old.name, old.ladders, message, old.loaded_at, checked_at=now
                )
            return LadderFileState(path, _guess_name(path, data), [], message, None, checked_at=now)
        if old is not None and old.error is not None:
            log.info("ladder file %s is valid again", path.name)
        return LadderFileState(path, ladders[0].ladder, ladders, None, now, checked_at=now)

    def _declare_slates(self, files: dict[Path, LadderFileState]) -> None:
        """Declare the serving versions' slates; withdraw those of ladders whose file went
        (only the ones this registry declared: others were declared by code)."""
        if self.services is None:
            return
        slates = self.services.slates
        serving = {
            s.ladders[0].ladder: s.ladders[0].spec.slates for s in files.values() if s.ladders
        }
        for name, specs in serving.items():
            slates.declare(name, specs)
        for name in self._declared - set(serving):
            slates.undeclare(name)
        self._declared = set(serving)

    def states(self) -> list[LadderFileState]:
        return list(self._files.values())

    def errors(self) -> list[dict[str, Any]]:
        """The invalid files: ``{name, file, status, error}``."""
        keys = ("name", "file", "status", "error")
        return [
            {k: v for k, v in s.to_dict(self.directory).items() if k in keys}
            for s in self._files.values()
            if s.error is not None
        ]

    def state(self, name: str) -> LadderFileState:
        """The file state of a ladder (by its name or one of its model ids): the file that
        serves it, else one that claims the name."""
        serving = [s for s in self._files.values() if any(x.name == name for x in s.ladders)]
        for s in serving or [s for s in self._files.values() if s.name == name]:
            return s
        raise LadderNotFound(
            f"no ladder named {name!r}", details={"ladder": name, "known": self.names()}
        )

    def error_of(self, name: str) -> str | None:
        """The current error of the file behind ladder ``name`` (None: valid, or unknown)."""
        try:
            return self.state(name).error
        except LadderNotFound:
            return None

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
        by_name = self._by_name
        return [by_name[n] for n in sorted(by_name)]


__all__ = [
    "Ladder",
    "LadderFileState",
    "LadderNotFound",
    "LadderRegistry",
    "compile_ladder",
    "load_script",
]
