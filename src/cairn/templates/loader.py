"""Loading template files: the bundled set plus operator directories, checked loudly.

Every problem (invalid YAML, an unknown or mistyped key, a bad id, duplicate field names, a
placeholder naming no declared field, a brace that is not ``{{``/``}}``/``{name}``, an id used
by two files) raises ``ConfigError`` whose message names the file and the problem, so a server
with a bad catalogue refuses to start instead of serving half of it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from pydantic import ValidationError

from cairn.core.yamlfiles import YAMLError, load_yaml, yaml_problem
from cairn.errors import ConfigError
from cairn.templates.errors import TemplateNotFound
from cairn.templates.model import MemoryTemplate

BUNDLED_DIR = Path(__file__).parent / "bundled"
TEMPLATE_SUFFIXES = (".yaml", ".yml")


def _describe(exc: ValidationError) -> str:
    """Pydantic errors as ``path: problem`` lines (``fields.1.name: ...``)."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {msg}" if where else msg)
    return "; ".join(lines)


def load_template_file(path: Path) -> MemoryTemplate:
    """Read and validate one template file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"template file {path}: cannot be read: {exc}") from exc
    try:
        data = load_yaml(text)  # safe: no arbitrary objects are constructed
    except YAMLError as exc:
        raise ConfigError(f"template file {path}: invalid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"template file {path}: must be a YAML mapping, found {kind}")
    try:
        return MemoryTemplate.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"template file {path}: {_describe(exc)}") from exc


def template_files(directory: Path) -> list[Path]:
    """The ``*.yaml``/``*.yml`` files of a directory (not recursive, hidden files skipped),
    sorted by name so loading order, and thus error messages, are stable."""
    if not directory.exists():
        raise ConfigError(f"template directory {directory} does not exist")
    if not directory.is_dir():
        raise ConfigError(f"template directory {directory} is not a directory")
    return sorted(
        p
        for p in directory.iterdir()
        if p.suffix in TEMPLATE_SUFFIXES and not p.name.startswith(".") and p.is_file()
    )


@functools.cache
def _bundled() -> tuple[tuple[Path, MemoryTemplate], ...]:
    # Parsed once per process: every Services (and every test) shares the immutable result.
    return tuple((p, load_template_file(p)) for p in template_files(BUNDLED_DIR))


class TemplateCatalogue:
    """All templates a process serves, by id. Built once at start; read-only afterwards."""

    def __init__(self, entries: Iterable[tuple[Path, MemoryTemplate]] = ()) -> None:
        self._templates: dict[str, MemoryTemplate] = {}
        self._sources: dict[str, Path] = {}
        for path, template in entries:
            self.add(path, template)

    def add(self, path: Path, template: MemoryTemplate) -> None:
        """Register a template; an id already taken (bundled or not) is a ConfigError."""
        first = self._sources.get(template.id)
        if first is not None:
            advice = (
                "a bundled template cannot be replaced: copy it under a new id"
                if first.parent == BUNDLED_DIR
                else f"change it in {first} (bump its 'version'), or choose another id"
            )
            raise ConfigError(
                f"template file {path}: duplicate template id '{template.id}' "
                f"(already defined in {first}); {advice}"
            )
        self._templates[template.id] = template
        self._sources[template.id] = path

    def get(self, template_id: str) -> MemoryTemplate:
        """The template with this id; raises TemplateNotFound (404 template_not_found)."""
        template = self._templates.get(template_id)
        if template is None:
            raise TemplateNotFound(
                f"no memory template with id '{template_id}'",
                details={"template_id": template_id},
            )
        return template

    def source_of(self, template_id: str) -> Path:
        return self._sources[template_id]

    def templates(self) -> list[MemoryTemplate]:
        """Every template, ordered by id."""
        return [self._templates[k] for k in sorted(self._templates)]

    def __contains__(self, template_id: object) -> bool:
        return template_id in self._templates

    def __iter__(self) -> Iterator[MemoryTemplate]:
        return iter(self.templates())

    def __len__(self) -> int:
        return len(self._templates)


def load_catalogue(
    directories: Sequence[Path] = (), *, include_bundled: bool = True
) -> TemplateCatalogue:
    """The bundled set plus every template file in ``directories`` (in the order given)."""
    catalogue = TemplateCatalogue(_bundled() if include_bundled else ())
    for directory in directories:
        for path in template_files(Path(directory)):
            catalogue.add(path, load_template_file(path))
    return catalogue
