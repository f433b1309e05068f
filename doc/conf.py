# SPDX-License-Identifier: BSD-3-Clause
"""Sphinx configuration of the sparseclust documentation.

Build: ``sphinx-build -W -b html doc <out>`` (warnings are errors). The API reference
(``api.rst``) is written at build time from the package's ``__all__`` lists, so a new public
name is documented without editing this directory.
"""

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
os.environ.setdefault("MPLBACKEND", "Agg")
try:  # the installed package (CI), or the source tree built in place (PYTHONPATH)
    import sparseclust
except ImportError:
    sys.path.insert(0, str(ROOT))
    import sparseclust

project = "sparseclust"
author = "the sparseclust developers"
copyright = "the sparseclust developers, BSD-3-Clause"  # noqa: A001
release = version = sparseclust.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.md"]

# Markdown pages (the user guide): links between .md files become document links, and
# "$...$" / "$$...$$" are formulas (dollarmath, rendered by MathJax).
myst_heading_anchors = 3
myst_enable_extensions = ["dollarmath"]
suppress_warnings = ["myst.header"]

# API reference
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"sparseclust {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "header_links_before_dropdown": 4,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_static_path = []

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "reference_url": {"sparseclust": None},
    # thumbnails of the examples that use an object, shown on its API page (minigallery)
    "doc_module": ("sparseclust",),
    "backreferences_dir": "generated/backreferences",
    "within_subsection_order": "FileNameSortKey",
    # matplotlib's state, and a time cap per example (SPARSECLUST_EXAMPLE_TIMEOUT, see
    # doc/_gallery_timeout.py); doc/ is on sys.path (below)
    "reset_modules": ("matplotlib", "_gallery_timeout.reset"),
    "reset_modules_order": "both",
}


# --------------------------------------------------------------------------------------
# API reference from __all__ (doc/_apigen.py)

sys.path.insert(0, str(HERE))
import _apigen  # noqa: E402

(HERE / "api.rst").write_text(_apigen.api_page(), encoding="utf-8")


# --------------------------------------------------------------------------------------
# Plain-text docstrings as reStructuredText
#
# The docstrings are numpydoc, but their prose writes attribute names and formulas as plain
# text ("components_", "|Delta N_dk|"), which reStructuredText would read as link targets and
# substitutions. After numpydoc has turned the sections into reST, such characters outside
# literals, roles and directive bodies are escaped.

import re  # noqa: E402

_INLINE = re.compile(r"(``.+?``|:[\w:+-]+:`[^`]*`|`[^`]*`_{0,2})")
_TRAILING_UNDERSCORE = re.compile(r"(?<=[\w)\]])_(?=[\s,.;:)\]'\"/]|$)")
_LONE_STAR = re.compile(r"(?<![\*\w\\])\*(?=[\s,)\]]|$)")


def _escape_plain(text):
    parts = _INLINE.split(text)
    for i in range(0, len(parts), 2):  # the even parts lie outside literals and roles
        p = parts[i].replace("|", r"\|")
        p = _TRAILING_UNDERSCORE.sub(r"\\_", p)
        parts[i] = _LONE_STAR.sub(r"\\*", p)
    return "".join(parts)


def _indent(line):
    return len(line) - len(line.lstrip())


def escape_docstring(app, what, name, obj, options, lines):
    block_indent = None  # indentation of the directive or literal block being skipped
    for i, line in enumerate(lines):
        stripped = line.strip()
        if block_indent is not None:
            if not stripped or _indent(line) > block_indent:
                continue
            block_indent = None
        if stripped.startswith(".. ") or stripped.endswith("::"):
            block_indent = _indent(line)
            if stripped.startswith(".. "):
                continue
            head = line[: len(line) - 2]
            lines[i] = _escape_plain(head) + "::"
            continue
        if stripped.startswith(":") and re.match(r"^\s*:[\w ]+:", line):
            continue  # a field list entry written by numpydoc
        lines[i] = _escape_plain(line)


def setup(app):
    app.connect("autodoc-process-docstring", escape_docstring, priority=900)
