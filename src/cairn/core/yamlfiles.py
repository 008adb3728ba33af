"""The one YAML reader of every configuration file: ladders (and the slates they declare),
memory templates and hook settings files.

- **YAML 1.2 scalars**: only ``true``/``false`` are booleans. YAML 1.1 (PyYAML's default) reads
  ``on``, ``off``, ``yes`` and ``no`` as booleans, so the seed's ``on: append`` would become
  ``True: append`` and a schema's ``enum: [yes, no]`` would become ``[true, false]``.
- **Safe**: a ``SafeLoader``, so no tag constructs an arbitrary Python object.
- **Strict keys**: a key repeated in one mapping is an error (PyYAML keeps the last one), and
  so is a key that is not a scalar.
- **Size-limited**: ``read_yaml_text`` refuses a file over its byte limit before reading it.

Callers word their own errors (``file: problem``); ``yaml_problem`` gives the line and column.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from cairn.errors import ConfigError

# The default limit of a configuration file; a ladder with its scripts and slates is far less.
MAX_YAML_BYTES = 1_048_576

YAMLError = yaml.YAMLError


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 booleans and duplicate keys refused."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


def _construct_mapping(loader: Yaml12Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool | None):
            raise yaml.constructor.ConstructorError(
                None, None, f"unsupported mapping key {key!r}", key_node.start_mark
            )
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


Yaml12Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(text: str) -> Any:
    """Parse one YAML document; raises ``yaml.YAMLError`` (see ``yaml_problem``)."""
    return yaml.load(text, Loader=Yaml12Loader)  # a SafeLoader: no Python objects


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``line L, column C: problem`` when the parser knows where, else the message."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    return " ".join(str(exc).split())


def read_yaml_text(path: Path, max_bytes: int = MAX_YAML_BYTES) -> str:
    """The UTF-8 text of a configuration file of at most ``max_bytes``.

    A larger file is a ``ConfigError`` (``config_too_large``) and is not read; ``OSError`` and
    ``UnicodeDecodeError`` reach the caller, which names the file its own way."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ConfigError(
            f"{path}: {size} bytes, over the limit of {max_bytes}", code="config_too_large"
        )
    return path.read_bytes().decode("utf-8")
