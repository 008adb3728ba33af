"""Cairn: a memory runtime for AI agents.

Record what happens (episodes, turns, documents), compile it into durable memories with
provenance, and get ranked, token-bounded context back for the next model call.
"""

__version__ = "0.1.0"
