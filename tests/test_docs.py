# SPDX-License-Identifier: BSD-3-Clause
"""Every Python code block of README.md and doc/*.md runs as written.

The blocks of one file run in order in one namespace (a later block may use what an earlier
one defined), in a temporary working directory, with matplotlib drawing off screen. A block
that is only an illustration (e.g. it needs data that cannot be shipped) must say so with the
line ``<!-- illustrative -->`` right above its opening fence; it is then not run. The README's
shell quick-start commands are run by CI (``.ci/run``), not here.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "doc").glob("*.md"))]
MARKER = "<!-- illustrative -->"
# an opening fence: ```python, ```bash, ```{toctree} (a MyST directive), or a bare ```
_FENCE = re.compile(r"^```(\w*|\{[\w-]+\}.*)\s*$")


def python_blocks(path):
    """``(first line number, code, illustrative)`` of every ```python block of a file."""
    blocks, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        lang, start = m.group(1), i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        if lang == "python":
            prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
            blocks.append((start + 1, "\n".join(lines[start:j]), prev == MARKER))
        i = j + 1
    return blocks


def test_every_document_has_its_blocks_found():
    # the extraction itself: a file's blocks are found, and markers only precede blocks
    found = {p.name: python_blocks(p) for p in DOCS}
    assert found["README.md"], "README.md has no python block"
    for path in DOCS:
        lines = path.read_text(encoding="utf-8").splitlines()
        n_markers = sum(ln.strip() == MARKER for ln in lines)
        assert n_markers == sum(b[2] for b in found[path.name]), path.name


@pytest.mark.parametrize("path", DOCS, ids=[p.name for p in DOCS])
def test_python_blocks_run(path, tmp_path, monkeypatch):
    blocks = [b for b in python_blocks(path) if not b[2]]
    if not blocks:
        return  # a page without runnable Python (e.g. only shell commands)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace = {"__name__": f"doc:{path.name}"}
    for lineno, code, _ in blocks:
        try:
            exec(compile(code, f"{path.name}:{lineno}", "exec"), namespace)
        except Exception as exc:  # report which block failed
            raise AssertionError(f"{path.name}, block at line {lineno} failed: {exc!r}") from exc


def _load_apigen():
    import importlib.util

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
