# SPDX-License-Identifier: BSD-3-Clause
"""Every Python code block of README.md and doc/*.md runs as written.

The blocks of one file run in order in one namespace (a later block may use what an earlier
one defined), in a temporary working directory, with matplotlib drawing off screen. A block
that is only an illustration (e.g. it needs data that cannot be shipped) must say so with the
line ``<!-- illustrative -->`` right above its opening fence; it is then not run. The blocks
are found and run by ``tools/run_doc_blocks.py``, which CI (``.ci/run``) also runs on the
README right after the README's install command; the README's shell quick-start commands are
run by CI, not here.
"""

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "doc").glob("*.md"))]


def _load_tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_blocks = _load_tool("run_doc_blocks")
MARKER = _blocks.MARKER
python_blocks = _blocks.python_blocks


def test_every_document_has_its_blocks_found():
    # the extraction itself: a file's blocks are found, and markers only precede blocks
    found = {p.name: python_blocks(p) for p in DOCS}
    assert found["README.md"], "README.md has no python block"
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        n_markers = sum(ln.strip() == MARKER for ln in lines)
        assert n_markers == sum(b[2] for b in found[path.name]), path.name


#: import names of distributions whose import name is not their name with "-" -> "_"
_IMPORT_NAMES = {"scikit-learn": "sklearn", "pillow": "PIL", "pyyaml": "yaml"}


def _default_dependency_imports():
    """Import names of the package's default dependencies ([project] dependencies of
    pyproject.toml), plus the package itself."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = text[text.index("[project]"):]
    deps = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", project, re.M | re.S).group(1)
    specs = re.findall(r'^\s*"([^"]+)"', deps, re.M)
    names = {re.split(r"[\s\[<>=!~;]", s, maxsplit=1)[0].lower() for s in specs}
    assert {"numpy", "scipy", "scikit-learn"} <= names, names
    return {_IMPORT_NAMES.get(n, n.replace("-", "_")) for n in names} | {"sparseclust"}


def _imported_packages(code):
    """Top-level package of every import statement of a block."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_readme_blocks_import_only_default_dependencies():
    # the README's runnable blocks must run after its install command alone (`pip install .`
    # installs the default dependencies only; CI runs them there, before any extra): every
    # package they import is the standard library, a default dependency or sparseclust
    allowed = _default_dependency_imports() | set(sys.stdlib_module_names)
    blocks = [b for b in python_blocks(ROOT / "README.md") if not b[2]]
    assert blocks
    for lineno, code, _ in blocks:
        extra = _imported_packages(code) - allowed
        assert not extra, f"README.md, block at line {lineno} imports {sorted(extra)}"


def test_import_check_sees_every_import():
    code = "import a.b\nfrom c.d import e\nif x:\n    import f as g\nfrom . import h\n"
    assert _imported_packages(code) == {"a", "c", "f"}
    assert "sklearn" in _default_dependency_imports()


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_python_blocks_run(path, tmp_path, monkeypatch):
    if not any(not b[2] for b in python_blocks(path)):
        return  # a page without runnable Python (e.g. only shell commands)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    _blocks.run_blocks(path)


def _load_apigen():
    spec = importlib.util.spec_from_file_location("_apigen", ROOT / "doc" / "_apigen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_lists_every_public_name():
    # the API page of the site is generated from __all__: every public name of every public
    # module has an entry (a re-exported object once, under the first module listing it)
    import importlib

    import sparseclust

    apigen = _load_apigen()
    page = apigen.api_page()
    entries = {ln.strip() for ln in page.splitlines()}
    modules = apigen.public_modules()
    assert {"sparseclust", "sparseclust.topics", "sparseclust.interop"} <= set(modules)
    documented = {}
    for modname in modules:
        module = importlib.import_module(modname)
        for name in apigen.public_names(module):
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            if not callable(obj):
                assert f".. autodata:: {name}" in entries, (modname, name)
            elif name in entries:
                documented[id(obj)] = name
            else:  # documented under a parent module that re-exports it
                assert id(obj) in documented, (modname, name)
    for name in sparseclust.__all__:
        if not name.startswith("__"):
            assert name in entries
