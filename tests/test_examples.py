# SPDX-License-Identifier: BSD-3-Clause
"""The gallery examples (examples/plot_*.py) compile, carry a sphinx-gallery title, and the
quickest of them runs as a plain script. All of them run when the documentation is built
(``sphinx-build -W -b html doc <out>``, part of CI)."""

import ast
import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def test_examples_exist():
    assert len(EXAMPLES) >= 7


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_compiles_with_a_title(path):
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    doc = ast.get_docstring(tree, clean=False)
    assert doc, f"{path.name} has no module docstring"
    lines = [ln for ln in doc.strip().splitlines()]
    # sphinx-gallery: a title underlined with '=' of at least its length, then a description
    assert len(lines) > 3 and set(lines[1]) == {"="} and len(lines[1]) >= len(lines[0]), path
    compile(source, str(path), "exec")
    assert "plt.show()" in source, f"{path.name} draws no figure"


def test_quickest_example_runs_as_a_script(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = next(p for p in EXAMPLES if p.name == "plot_pipeline_classifier.py")
    plt.close("all")
    ns = runpy.run_path(str(path), run_name="__main__")
    assert plt.get_fignums(), "the example drew no figure"
    plt.close("all")
    # the pipeline beats chance by far on the digits
    assert ns["pipe"].score(ns["X_test"], ns["y_test"]) > 0.7
