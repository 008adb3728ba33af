"""Benchmarks run by ``cairn bench …`` (and the scripts in ``bench/``). They print tables."""
