"""The ``cairn`` command."""
