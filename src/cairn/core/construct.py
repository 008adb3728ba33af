"""Models built from values known to be valid, without validation and faster than pydantic's
``model_construct``.

``model_construct`` walks every field (aliases, defaults) in Python before it sets the same four
attributes ``construct`` sets: 5.4 µs of CPU for an episode against 3.2, and a 100-episode
batch builds 200 of them (the request's ``NewEpisode``s and the stored ``Episode``s), as a
compile step and a context request build memories by the hundred. ``construct`` takes every
field's value, so there is nothing to walk.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)
_set = object.__setattr__
# Each model's field names, read once: pydantic's ``model_fields`` is a property that builds
# its answer on every access (a fifth of ``construct``'s time, which a context request calls
# some 300 times). Models are not redefined while a process runs.
_FIELDS: dict[type[BaseModel], frozenset[str]] = {}


def construct(cls: type[M], values: dict[str, Any]) -> M:
    """A ``cls`` holding ``values``: a value for every field, each already valid (this process
    validated it, or stored it). The dict becomes the model's own; do not reuse it."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _FIELDS[cls] = frozenset(cls.model_fields)
    if values.keys() != fields:
        missing = sorted(set(cls.model_fields) - set(values))
        extra = sorted(set(values) - set(cls.model_fields))
        raise TypeError(f"{cls.__name__}: missing fields {missing}, unknown fields {extra}")
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(values))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


__all__ = ["construct"]
