"""The notebooks in notebooks/ run end to end in their fast mode (``JAXPRIV_QUICK=1``), as CI runs them.

Each notebook's code cells are executed in order, in one namespace, in this process (so they share the
test session's warm JIT cache; no Jupyter kernel is needed), with matplotlib's non-interactive backend
and a temporary working directory. Notebooks are stored without outputs (no generated content in git).
"""

from __future__ import annotations

import json
import pathlib

import matplotlib
import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _cells(path: pathlib.Path, kind: str) -> list[dict]:
    return [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == kind]


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 3, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    for cell in _cells(path, "code"):
        assert cell.get("outputs") == [] and cell.get("execution_count") is None, path.name


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_quick_mode(path, tmp_path, monkeypatch):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv("JAXPRIV_QUICK", "1")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__notebook__"}
    try:
        for number, cell in enumerate(_cells(path, "code"), start=1):
            source = "".join(cell["source"])
            assert not any(line.lstrip().startswith(("%", "!")) for line in source.splitlines()), (
                f"{path.name} cell {number}: IPython magics/shell escapes do not run outside Jupyter")
            code = compile(source, f"{path.name}[cell {number}]", "exec")
            exec(code, namespace)  # noqa: S102 — running the notebook is the point of the test
    finally:
        plt.close("all")
    assert namespace["QUICK"] is True
