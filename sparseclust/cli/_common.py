# SPDX-License-Identifier: BSD-3-Clause
"""What the commands share: the user error, the input formats and output suffixes, status
messages, the progress bar and the writing of result files."""

import re
import sys
from pathlib import Path

import numpy as np

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


class _Progress:
    """A text progress bar on a stream, fed by the engine's per-pass callback.

    On a terminal the bar is redrawn in place; otherwise one plain line per pass.
    """

    def __init__(self, total, stream=None, enabled=True, width=28):
        self.total = max(1, int(total))
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.width = width
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self._drawn = False
        self._calls = 0

    def __call__(self, info):
        if not self.enabled:
            return False
        self._calls += 1
        # the pass (or sweep) number when the estimator gives one, else this call's
        done = int(info.get("pass") or info.get("sweep") or self._calls)
        total = int(info.get("n_passes", self.total)) or self.total
        # StochasticEMLDA reports its log joint likelihood instead of an ELBO (its online
        # steps none at all: then no objective is shown)
        label = "ELBO" if "elbo" in info else "log joint"
        elbo = info.get("elbo", info.get("log_joint"))
        elapsed = info.get("elapsed", 0.0)
        if self.tty:
            filled = int(round(self.width * min(done, total) / total))
            bar = "#" * filled + "-" * (self.width - filled)
            objective = f"{label} {elbo: .5e}  " if elbo is not None else ""
            self.stream.write(
                f"\r  fit [{bar}] {done:>{len(str(total))}}/{total} passes  "
                f"{objective}{elapsed:6.1f}s"
            )
            self._drawn = True
        else:
            objective = f"{label} {elbo: .6e}  " if elbo is not None else ""
            self.stream.write(f"  pass {done}/{total}  {objective}{elapsed:.2f}s\n")
        self.stream.flush()
        return False

    def close(self):
        if self.enabled and self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


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
