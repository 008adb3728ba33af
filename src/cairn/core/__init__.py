"""Domain models and the memory contracts. No I/O lives here."""

from cairn.core.episodes import Episode, NewEpisode
from cairn.core.scope import DEFAULT_RUNTIME, Scope

__all__ = ["DEFAULT_RUNTIME", "Episode", "NewEpisode", "Scope"]
