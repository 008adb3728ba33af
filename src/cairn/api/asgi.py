"""ASGI entry point for process managers: ``uvicorn cairn.api.asgi:app`` (settings from env)."""

from cairn.api.app import create_app

app = create_app()
