# The README names these targets. `make run` and `make test` set everything up themselves.
.PHONY: setup run test lint bench

setup:
	./scripts/setup.sh

run:
	./scripts/run.sh

test:
	./scripts/test.sh

lint:
	.venv/bin/ruff check src tests
	.venv/bin/ruff format --check src tests
	.venv/bin/mypy
	.venv/bin/lint-imports

bench:
	.venv/bin/python bench/ingest.py
