"""The engine: ingest, compile, retrieve, pack, render. Takes a store; imports no web framework."""
