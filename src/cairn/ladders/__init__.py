"""Ladders: declarative agent pipelines (slates, steps, hooks) served as OpenAI-compatible models.

Modules: ``config`` (the ladder file), ``registry`` (the ladders of a directory), ``board``,
``steps`` (fields and the message layout), ``providers`` (OpenAI-compatible and scripted),
``runtime`` (a run, idempotent per run id, with its trace), ``hooks`` and ``agents`` (the
seed-001 memory hooks). See docs/ladders.md.
"""
