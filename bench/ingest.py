"""Ingest benchmark (same as ``cairn bench ingest``): python bench/ingest.py [--help]."""

from cairn.cli.bench import app

if __name__ == "__main__":
    app(["ingest", *__import__("sys").argv[1:]])
