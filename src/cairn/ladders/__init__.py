"""Ladders: declarative agent pipelines (slates, steps, hooks) served as OpenAI-compatible models."""
