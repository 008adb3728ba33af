"""What ladders take from their host (``Services`` is the one Cairn builds): the parts an
Assembly is built from, plus the template catalogue and the slates service. Read-only: a
ladder never sets anything on its host."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cairn.engine.context.assembly import AssemblyHost

if TYPE_CHECKING:
    from cairn.slates.service import Slates
    from cairn.templates import TemplateCatalogue


class LadderHost(AssemblyHost, Protocol):
    @property
    def templates(self) -> TemplateCatalogue: ...

    @property
    def slates(self) -> Slates: ...


__all__ = ["LadderHost"]
