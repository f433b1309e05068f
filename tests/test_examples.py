# SPDX-License-Identifier: BSD-3-Clause
"""The gallery examples (examples/plot_*.py) are all in the gallery doc/conf.py executes, and
every example the documentation names exists; they compile, carry a sphinx-gallery title, and
the quickest of them runs as a plain script. All of them run when the documentation is built
(``sphinx-build -W -b html doc <out>``, part of CI)."""

import ast
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))


def _gallery_conf():
    """doc/conf.py's ``sphinx_gallery_conf``, evaluated from its source with the paths it
    uses (HERE, ROOT), without running the rest of conf.py (imports, the API page)."""
    path = ROOT / "doc" / "conf.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    wanted = {"HERE", "ROOT", "sphinx_gallery_conf"}
    body = [node for node in tree.body if isinstance(node, ast.Assign)
            and {getattr(t, "id", None) for t in node.targets} & wanted]
    ns = {"Path": Path, "__file__": str(path)}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(path), "exec"), ns)
    return ns["sphinx_gallery_conf"]


def test_every_example_is_in_the_executed_gallery_and_every_reference_resolves():
    conf = _gallery_conf()
    examples_dir = Path(conf["examples_dirs"])
    assert examples_dir.resolve() == (ROOT / "examples").resolve()
    # sphinx-gallery needs the gallery's header, and lists every .py file of the folder;
    # it executes those whose path matches filename_pattern (re.search): all of them, so the
    # documentation build runs every example
    assert (examples_dir / "README.txt").is_file()
    scripts = sorted(examples_dir.glob("*.py"))
    assert scripts == EXAMPLES, "every example is a plot_*.py file"
    assert EXAMPLES
    for path in scripts:
        assert re.search(conf["filename_pattern"], str(path)), path.name
    # the documentation links the gallery's index (doc/index.md's toctree) ...
    gallery = conf["gallery_dirs"]
    assert f"{gallery}/index" in (ROOT / "doc" / "index.md").read_text(encoding="utf-8")
    # ... and every example named in the documentation, the README, the gallery's header and
    # the site check (examples/<name>.py, <gallery>/<name>.html, the sphinx-gallery label
    # sphx_glr_<gallery>_<name>.py) exists
    names = {p.stem for p in EXAMPLES}
    texts = [*sorted((ROOT / "doc").glob("*.md")), ROOT / "README.md",
             examples_dir / "README.txt", ROOT / ".ci" / "check_site.py"]
    g = re.escape(gallery)
    ref = re.compile(rf"(?:(?:examples|{g})/|sphx_glr_{g}_)(plot_\w+)\.(?:py|html)\b")
    cited = {}
    for text in texts:
        if text.is_file():
            for name in ref.findall(text.read_text(encoding="utf-8")):
                cited.setdefault(name, text.relative_to(ROOT))
    assert cited, "no example is named anywhere"
    missing = {name: str(where) for name, where in cited.items() if name not in names}
    assert not missing, missing


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
