# SPDX-License-Identifier: BSD-3-Clause
"""Find and run the Python code blocks of Markdown documents.

Usage::

    python tools/run_doc_blocks.py README.md [doc/choosing.md ...]

Every ```python block of a file runs in order in one namespace (a later block may use what an
earlier one defined), in a temporary working directory, with matplotlib drawing off screen. A
block that is only an illustration (e.g. it needs data that cannot be shipped) says so with the
line ``<!-- illustrative -->`` right above its opening fence and is not run. The exit status is
1 if a block of any file fails; the failing block is named by file and line.

``tests/test_docs.py`` imports :func:`python_blocks` and :func:`run_blocks` from here, and CI
(``.ci/run``) runs the README's blocks with this script right after the README's install
command, before any extra is installed.
"""

import argparse
import os
import re
import sys
import tempfile
import traceback
from pathlib import Path

MARKER = "<!-- illustrative -->"
# an opening fence: ```python, ```bash, ```{toctree} (a MyST directive), or a bare ```
_FENCE = re.compile(r"^```(\w*|\{[\w-]+\}.*)\s*$")


def python_blocks(path):
    """``(first line number, code, illustrative)`` of every ```python block of a file."""
    blocks, lines = [], Path(path).read_text(encoding="utf-8").splitlines()
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


def run_blocks(path):
    """Run the runnable blocks of one file in order, in one namespace, in the current
    directory; raise ``AssertionError`` naming the block that failed."""
    path = Path(path)
    namespace = {"__name__": f"doc:{path.name}"}
    for lineno, code, illustrative in python_blocks(path):
        if illustrative:
            continue
        try:
            exec(compile(code, f"{path.name}:{lineno}", "exec"), namespace)
        except Exception as exc:  # report which block failed
            raise AssertionError(f"{path.name}, block at line {lineno} failed: {exc!r}") from exc


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="Markdown files")
    args = parser.parse_args(argv)
    os.environ.setdefault("MPLBACKEND", "Agg")
    files = [f.resolve() for f in args.files]
    failed = 0
    cwd = os.getcwd()
    for path in files:
        n = sum(not b[2] for b in python_blocks(path))
        with tempfile.TemporaryDirectory() as tmp:
            os.chdir(tmp)
            try:
                run_blocks(path)
                print(f"run_doc_blocks: {path.name}: {n} block(s) ran")
            except AssertionError:
                failed += 1
                traceback.print_exc()
            finally:
                os.chdir(cwd)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
