"""``cairn bench ab`` at toy size: two servers, each running its own source tree, answer
the same requests, and the table compares them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

import cairn
from cairn.bench import ab
from cairn.cli.main import app


@pytest.mark.slow
def test_two_source_trees_answer_the_same_requests(tmp_path: Path) -> None:
    # Version A: a copy of this source tree that names itself differently.
    tree = tmp_path / "src"
    shutil.copytree(Path(cairn.__file__).parent, tree / "cairn")
    init = tree / "cairn" / "__init__.py"
    init.write_text(init.read_text().replace(cairn.__version__, "0.0.0+a", 1))
    result = ab.run(str(tree), "", backend="sqlite", size=120, calls=12, keyed=True)
    assert result["versions"] == ["0.0.0+a", cairn.__version__]
    assert "sqlite, keyed, 120-episode subject" in ab.markdown(result)
    for kind in ab.KINDS:
        r = result[kind]
        assert r["a"]["p50"] > 0 and r["b"]["p50"] > 0
        assert 0.0 <= r["b_faster"] <= 1.0
    table = ab.markdown(result)
    assert "| context |" in table and "| search |" in table


def test_the_command_refuses_what_is_not_a_source_tree(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["bench", "ab", "--a", str(tmp_path)])
    assert out.exit_code == 2 and "source tree" in out.output
    out = CliRunner().invoke(app, ["bench", "ab", "--a", str(tmp_path), "--kind", "ingest"])
    assert out.exit_code == 2 and "--kind" in out.output
