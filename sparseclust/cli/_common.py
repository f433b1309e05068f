# SPDX-License-Identifier: BSD-3-Clause
"""What the commands share: the user error, the input formats and output suffixes, status
messages, the progress bar and the writing of result files."""

import re
import sys
from pathlib import Path

import numpy as np

from ..utils._progress import Progress

_UCI_DOCWORD = re.compile(r"^docword\.(?P<name>.+)\.txt(\.gz)?$")
_LDAC_SUFFIXES = (".ldac", ".lda-c", ".dat")
_LINES_SUFFIXES = (".txt",)
_FORMATS = ("auto", "uci", "ldac", "lines", "folder")
_DOC_TOPIC_SUFFIXES = (".npy", ".csv", ".tsv", ".txt")
#: --model hdp without --n-topics: HDPTopicModel's default max_components (kept equal by a
#: test; the estimators are imported only when a command runs)
_HDP_TRUNCATION = 200


class CLIError(Exception):
    """A user error: reported on stderr, exit status 2."""


def _say(args, message):
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


def _warn(args, message):
    """Warnings are shown even with --quiet."""
    print(f"sparseclust: warning: {message}", file=sys.stderr, flush=True)


def _check_writable(*targets):
    """CLIError unless the folder of every given output file exists."""
    for target in targets:
        if target:
            parent = Path(target).resolve().parent
            if not parent.is_dir():
                raise CLIError(f"cannot write {target}: directory {parent} does not exist")


def _progress(args, name, total):
    """The progress display of a fit (a ``callback``), or None with ``--quiet``: a bar
    redrawn in place on a terminal, else one line per pass (see
    :class:`~sparseclust.utils._progress.Progress`)."""
    if args.quiet:
        return None
    return Progress(name, total, bar=True)


def _documents_scored(n_scored, n_heldout, which):
    """'12 documents' or '12 of the 30 held-out documents (those <which>)'."""
    if n_scored == n_heldout:
        return f"{n_scored} documents"
    return f"{n_scored} of the {n_heldout} held-out documents (those {which})"


def _save_doc_topics(path, theta):
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        np.save(path, theta)
        return
    delimiter = "," if suffix == ".csv" else "\t"
    header = delimiter.join(f"topic{k}" for k in range(theta.shape[1]))
    np.savetxt(path, theta, delimiter=delimiter, header=header, comments="", fmt="%.6g")


def _plain_trace(trace):
    if not trace:
        return None
    out = []
    for entry in trace:
        row = {}
        for key, value in dict(entry).items():
            if isinstance(value, (bool, int, float, str, np.integer, np.floating)):
                value = value.item() if isinstance(value, np.generic) else value
                if isinstance(value, float) and not np.isfinite(value):
                    value = None
                row[key] = value
        out.append(row)
    return out
