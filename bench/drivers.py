"""Which PostgreSQL driver is fastest for Cairn's write and read patterns (through SQLAlchemy).

Usage: python bench/drivers.py   (needs psycopg2-binary installed beside psycopg for comparison)
"""

from __future__ import annotations

import statistics
import time
import uuid

from rich.console import Console
from rich.table import Table
from sqlalchemy import JSON, Column, Integer, MetaData, String, create_engine, select, text
from sqlalchemy import Table as SaTable
from sqlalchemy.dialects.postgresql import JSONB, insert

ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DRIVERS = {"psycopg 3": "postgresql+psycopg", "psycopg2": "postgresql+psycopg2"}


def measure(driver: str, dbname: str) -> dict[str, float]:
    engine = create_engine(f"{driver}://postgres@127.0.0.1:5432/{dbname}")
    md = MetaData()
    t = SaTable(
        "bench_rows",
        md,
        Column("seq", Integer, primary_key=True),
        Column("id", String(36), unique=True),
        Column("payload", JSON().with_variant(JSONB(), "postgresql")),
    )
    md.drop_all(engine)
    md.create_all(engine)
    rows = [
        {"id": str(uuid.uuid4()), "payload": {"text": f"message {i}", "n": i}}
        for i in range(10_000)
    ]
    batch_times, single_times, read_times = [], [], []
    with engine.connect() as conn:
        for b in range(0, 10_000, 100):
            t0 = time.perf_counter()
            conn.execute(
                insert(t).on_conflict_do_nothing().returning(t.c.seq), rows[b : b + 100]
            ).all()
            conn.commit()
            batch_times.append(time.perf_counter() - t0)
        for i in range(1000):
            t0 = time.perf_counter()
            conn.execute(insert(t).values(id=str(uuid.uuid4()), payload={"i": i}))
            conn.commit()
            single_times.append(time.perf_counter() - t0)
        for i in range(1000):
            t0 = time.perf_counter()
            conn.execute(select(t).where(t.c.seq > i * 10).limit(50)).all()
            conn.commit()
            read_times.append(time.perf_counter() - t0)
    md.drop_all(engine)
    engine.dispose()
    return {
        "batch_rows_s": 10_000 / sum(batch_times),
        "single_ms": statistics.median(single_times) * 1000,
        "read50_ms": statistics.median(read_times) * 1000,
    }


def main() -> None:
    admin = create_engine(ADMIN, isolation_level="AUTOCOMMIT")
    name = f"cairn_drivers_{uuid.uuid4().hex[:6]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        table = Table(title="PostgreSQL drivers through SQLAlchemy Core")
        for col in (
            "driver",
            "batch-100 insert rows/s",
            "single insert+commit p50 ms",
            "read 50 rows p50 ms",
        ):
            table.add_column(col, justify="right")
        for label, driver in DRIVERS.items():
            try:
                r = measure(driver, name)
            except ModuleNotFoundError:
                table.add_row(label, "not installed", "", "")
                continue
            table.add_row(
                label, f"{r['batch_rows_s']:,.0f}", f"{r['single_ms']:.3f}", f"{r['read50_ms']:.3f}"
            )
        Console().print(table)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
