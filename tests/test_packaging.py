# SPDX-License-Identifier: BSD-3-Clause
"""Packaging facts that must not drift: one version, the licence metadata, the build flags."""

import re
from importlib import metadata
from pathlib import Path

import pytest

import sparseclust
from sparseclust._kernels import _topl
from sparseclust.utils import effective_n_threads, openmp_enabled

pytestmark = pytest.mark.kernels

ROOT = Path(__file__).resolve().parents[1]


def _project_table():
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("[project]")
    end = text.index("\n[", start + 1)
    return text[start:end], text


def test_version_is_defined_once():
    project, text = _project_table()
    # no static version in [project]: setuptools reads sparseclust.__version__
    assert re.search(r"^version\s*=", project, re.M) is None
    assert re.search(r'^dynamic\s*=\s*\["version", "optional-dependencies"\]', project, re.M)
    assert 'version = { attr = "sparseclust.__version__" }' in text
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", sparseclust.__version__)
    init = (ROOT / "sparseclust" / "__init__.py").read_text()
    assert len(re.findall(r"\d+\.\d+\.\d+", init)) == 1  # the one definition
    try:
        installed = metadata.version("sparseclust")
    except metadata.PackageNotFoundError:
        return  # running from a source tree that was never installed
    dist_files = metadata.distribution("sparseclust").files or []
    if any(str(f).startswith("sparseclust/__init__") for f in dist_files):
        # the metadata belongs to the package being tested (not to another checkout)
        assert installed == sparseclust.__version__


def test_licence_metadata():
    project, _ = _project_table()
    assert re.search(r'^license\s*=\s*"BSD-3-Clause AND CC-BY-4.0"', project, re.M)
    assert "license-files" in project and "{ text" not in project
    assert (ROOT / "LICENSE").read_text().startswith("BSD 3-Clause License")
    # no licence classifier beside the SPDX expression (PEP 639)
    assert "License ::" not in project


def test_extras_are_the_requirements_files():
    """Each extra is read from requirements/<name>.txt (so the test and doc dependencies can be
    installed without building the package again), and every such file is an extra."""
    _, text = _project_table()
    table = text[text.index("[tool.setuptools.dynamic.optional-dependencies]"):]
    listed = dict(re.findall(r'^(\w+) = \{ file = \["requirements/(\w+)\.txt"\] \}', table, re.M))
    files = {p.stem for p in (ROOT / "requirements").glob("*.txt")}
    assert listed and all(k == v for k, v in listed.items()), listed
    assert set(listed) == files
    try:
        requires = metadata.requires("sparseclust") or []
    except metadata.PackageNotFoundError:
        return
    # the installed metadata lists the test file's requirements under the extra
    test = [ln.split("#")[0].strip() for ln in (ROOT / "requirements" / "test.txt").open()]
    names = {re.split(r"[\[<>=;]", r)[0].strip().lower() for r in test if r}
    extra = {re.split(r"[\[<>=; ]", r)[0].lower() for r in requires if 'extra == "test"' in r}
    assert names <= extra, names - extra


def test_build_reports_its_configuration():
    assert isinstance(openmp_enabled(), bool)
    assert isinstance(_topl.VECTOR_EXTENSIONS, bool)
    if not openmp_enabled():
        assert effective_n_threads(None) == 1
    with pytest.raises(ValueError):
        effective_n_threads(0)
