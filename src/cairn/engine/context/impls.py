"""The registry of ``memory.Assembly`` implementations, by ``impl`` name (the ``impl:`` of a
ladder's ``memory.Assembly`` resource): registered by call, built in (Cairn's own, ``cairn``),
or found through the ``cairn.memory_impls`` entry-point group. See ``docs/context.md``."""

from __future__ import annotations

from importlib.metadata import entry_points

from cairn.core.memory import AssemblyFactory
from cairn.engine.context.assembly import build_assembly
from cairn.errors import ConfigError

ENTRY_POINT_GROUP = "cairn.memory_impls"
BUILTIN_IMPL = "cairn"
_BUILTINS: dict[str, AssemblyFactory] = {BUILTIN_IMPL: build_assembly}
# Which code implements an impl name, like entry points: registered by applications before
# they build their ``Services`` and read by every host of the process. It holds factories
# only (no instance, cache of data, connection or thread); what a factory builds belongs to
# the host that asked for it.
_registry: dict[str, AssemblyFactory] = {}


def register_assembly_impl(name: str, factory: AssemblyFactory, *, replace: bool = False) -> None:
    """Register an Assembly implementation under ``name`` (the ``impl:`` of a resource)."""
    if not name or not name.strip():
        raise ConfigError("an Assembly impl name must not be empty")
    if (name in _registry or name in _BUILTINS) and not replace:
        raise ConfigError(f"an Assembly impl named {name!r} is already registered")
    _registry[name] = factory


def get_assembly_impl(name: str) -> AssemblyFactory:
    """The factory registered as ``name``: by call, then built in, then by entry point."""
    if name in _registry:
        return _registry[name]
    if name in _BUILTINS:
        return _BUILTINS[name]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            factory: AssemblyFactory = ep.load()
            _registry[name] = factory
            return factory
    known = sorted(
        {*_registry, *_BUILTINS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))}
    )
    raise ConfigError(
        f"unknown memory.Assembly impl {name!r} (registered: {', '.join(known)})",
        code="unknown_impl",
    )


def assembly_impl_names() -> list[str]:
    return sorted(
        {*_registry, *_BUILTINS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))}
    )


def unregister_assembly_impl(name: str) -> None:
    _registry.pop(name, None)
