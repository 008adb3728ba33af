"""Memory templates: declarative, versioned YAML scaffolds that turn values into one episode.

The public surface: ``MemoryTemplate``/``TemplateField`` (the file format),
``load_catalogue``/``TemplateCatalogue`` (the bundled set plus operator directories, checked
at start), and ``apply_template`` (strict validation, single-pass rendering, one
``NewEpisode`` that the caller ingests with ``cairn.engine.ingest.record_episode``).
See ``docs/templates.md``.
"""

from cairn.templates.apply import TEMPLATE_SOURCE, apply_template, validate_values
from cairn.templates.errors import (
    INVALID_VALUE,
    MISSING_FIELD,
    TEMPLATE_NOT_FOUND,
    UNKNOWN_FIELD,
    TemplateNotFound,
)
from cairn.templates.loader import (
    BUNDLED_DIR,
    TemplateCatalogue,
    load_catalogue,
    load_template_file,
)
from cairn.templates.model import MemoryTemplate, TemplateField
from cairn.templates.scaffold import escape_literal, parse_scaffold

__all__ = [
    "BUNDLED_DIR",
    "INVALID_VALUE",
    "MISSING_FIELD",
    "TEMPLATE_NOT_FOUND",
    "TEMPLATE_SOURCE",
    "UNKNOWN_FIELD",
    "MemoryTemplate",
    "TemplateCatalogue",
    "TemplateField",
    "TemplateNotFound",
    "apply_template",
    "escape_literal",
    "load_catalogue",
    "load_template_file",
    "parse_scaffold",
    "validate_values",
]
