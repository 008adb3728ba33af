"""Settings: one object, read from ``CAIRN_*`` environment variables, built once and passed down.

Every setting is documented in ``docs/configuration.md``; a test keeps the two in step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATA_DIR = Path(".cairn")


class Settings(BaseSettings):
    """Runtime configuration of a Cairn process (server, worker, CLI)."""

    model_config = SettingsConfigDict(env_prefix="CAIRN_", extra="ignore", frozen=True)

    data_dir: Path = Field(DEFAULT_DATA_DIR, description="Directory for the default SQLite file.")
    database_url: str = Field(
        "", description="SQLAlchemy URL; empty means sqlite in data_dir/cairn.db."
    )
    host: str = Field("127.0.0.1", description="Address the server binds.")
    port: int = Field(8100, ge=0, le=65535, description="Port the server binds.")
    api_key: str = Field("", description="An API key for the `default` tenant.")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names the server answers to once keys exist (comma-separated).",
    )
    rate_limit_per_minute: int = Field(
        0, ge=0, description="Requests per minute allowed to each API key; 0 means no limit."
    )
    rate_limits: Annotated[dict[str, int], NoDecode] = Field(
        default_factory=dict,
        description="Per-tenant overrides of rate_limit_per_minute: 'tenant=N,other=M'.",
    )
    session_ttl_seconds: int = Field(
        43_200, gt=0, description="Lifetime of an inspector sign-in session, in seconds."
    )
    max_body_bytes: int = Field(1_048_576, gt=0, description="Largest request body accepted.")
    log_json: bool = Field(False, description="Write request logs as JSON lines.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", description="Logging level."
    )

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_name(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    otel: bool = Field(
        False, description="OpenTelemetry traces (the otel extra; exporter from OTEL_* vars)."
    )
    db_pool_size: int = Field(8, gt=0, description="Connections kept by the database pool.")

    template_dirs: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Extra memory-template directories (separated by ':' or ',').",
    )
    ladders_dir: Path | None = Field(None, description="Directory of ladder YAML files.")
    ladders_poll_s: float = Field(
        0.25,
        ge=0,
        le=60,
        description="How often the server checks the ladders directory for changes (0: never).",
    )

    tokenizer: str = Field("cl100k_base", description="tiktoken encoding used to count tokens.")
    embedder: Literal["e5", "multilingual", "onnx", "use", "none", "local", "openai"] = Field(
        "e5",
        description=(
            "Embedder for the vector lane: e5 (multilingual-e5-small, the default; multilingual "
            "where it cannot run), multilingual, onnx, use, none, local or openai."
        ),
    )
    embedder_threads: int = Field(
        1, gt=0, le=64, description="Threads a local embedder uses for one call."
    )
    onnx_matmul: Literal["int8", "float32"] = Field(
        "int8",
        description=(
            "How the onnx embedder multiplies: int8 (integer kernels, the default: about twice "
            "as fast, less memory) or float32 (the shipped model as is, closest to the torch "
            "model)."
        ),
    )
    model_cache: Path | None = Field(
        None,
        description=(
            "Where the onnx embedder keeps the model it builds once (default "
            "$XDG_CACHE_HOME/cairn or ~/.cache/cairn)."
        ),
    )
    embed_batch: int = Field(
        64, gt=0, le=4096, description="Memories the background embedding pass embeds at once."
    )
    embed_yield: bool = Field(
        False,
        description="The background embedding pass steps aside for requests in flight.",
    )
    vector_cache_mb: int = Field(
        256,
        gt=0,
        description="Memory the vector lane's partition matrices may keep, in MB (10^6 bytes).",
    )
    embedding_model: str = Field("", description="Model name for the openai embedder.")
    compiler: Literal["heuristic", "llm"] = Field("heuristic", description="Memory compiler.")
    compile_on_ingest: bool = Field(False, description="Compile a subject after each ingest.")
    compile_turns: bool = Field(
        True, description="Compile committed turns in the background (long-term recall)."
    )
    job_lease_seconds: float = Field(
        30.0, gt=0, description="Lease of a claimed compile job; renewed while it runs."
    )
    worker_in_process: bool | None = Field(
        None, description="Run a compile worker inside the server (default: on for SQLite)."
    )
    retention_interval_s: float = Field(
        3600.0,
        ge=0,
        description="Seconds between the worker's retention sweeps (0: never sweep).",
    )

    llm_base_url: str = Field("", description="OpenAI-compatible base URL (e.g. .../v1).")
    llm_api_key: str = Field("", description="Key for the OpenAI-compatible endpoint.")
    llm_model: str = Field("", description="Default chat model name.")
    llm_timeout_s: float = Field(30.0, gt=0, description="Timeout of one LLM HTTP call.")

    @field_validator("rate_limits", mode="before")
    @classmethod
    def _split_limits(cls, value: object) -> object:
        if isinstance(value, str):
            pairs = [p.strip() for p in value.split(",") if p.strip()]
            parsed: dict[str, object] = {}
            for pair in pairs:
                tenant, sep, limit = pair.partition("=")
                if not sep or not tenant.strip():
                    raise ValueError(f"expected 'tenant=N', got {pair!r}")
                parsed[tenant.strip()] = limit.strip()
            return parsed
        return value

    @field_validator("rate_limits")
    @classmethod
    def _limits_not_negative(cls, value: dict[str, int]) -> dict[str, int]:
        bad = [t for t, n in value.items() if n < 0]
        if bad:
            raise ValueError(f"rate limits must be 0 or more (tenants {', '.join(bad)})")
        return value

    def rate_limit_for(self, tenant: str) -> int:
        """Requests per minute for each key of ``tenant``; 0 is unlimited."""
        return self.rate_limits.get(tenant, self.rate_limit_per_minute)

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return [h.strip() for h in value.split(",") if h.strip()]
        return value

    @field_validator("template_dirs", mode="before")
    @classmethod
    def _split_dirs(cls, value: object) -> object:
        if isinstance(value, str):
            return [p for p in value.replace(",", ":").split(":") if p.strip()]
        return value

    def resolved_template_dirs(self) -> list[Path]:
        """``template_dirs``, then ``server/templates/`` of the working directory when it
        exists (the seed's place for operator templates: "drop a new *.yaml file into
        server/templates/")."""
        dirs = list(self.template_dirs)
        local = Path("server") / "templates"
        if local.is_dir() and all(local.resolve() != d.resolve() for d in dirs):
            dirs.append(local)
        return dirs

    def resolved_database_url(self) -> str:
        """The database URL, defaulting to a SQLite file inside ``data_dir``."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'cairn.db'}"
