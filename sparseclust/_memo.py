# SPDX-License-Identifier: BSD-3-Clause
"""Where memoized training keeps each fixed batch's statistics between its visits.

Memoized training (Hughes & Sudderth 2013) replaces a batch's previous statistics by its new
ones in the whole-data total, S <- S - S_b^old + S_b^new, so it keeps every batch's latest
statistics: memory that grows with the number of batches. :class:`SpilledStats` keeps them
in files instead, one per batch, in a temporary directory that is removed when the fit
ends, so that only the batch being visited is in memory. A batch's statistics are written
once per visit and read once per visit (to be subtracted), by ``pickle``: what is read back
is what was written, bit for bit.
"""

import os
import pickle
import tempfile

__all__ = ["SpilledStats", "check_memo_dir"]


def check_memo_dir(memo_dir):
    """The absolute path of ``memo_dir`` (None stays None); a clear error when it is not an
    existing directory in which files can be created."""
    if memo_dir is None:
        return None
    path = os.path.abspath(os.fspath(memo_dir))
    if not os.path.isdir(path):
        raise ValueError(f"memo_dir={memo_dir!r} is not an existing directory.")
    if not os.access(path, os.W_OK | os.X_OK):
        raise ValueError(f"memo_dir={memo_dir!r}: cannot create files in this directory.")
    return path


class SpilledStats:
    """A list of per-batch statistics kept in files of a new temporary directory inside
    ``directory``: ``len``, ``store[b]``, ``store[b] = stats``, ``append`` and iteration, as
    the list it replaces. ``store[b]`` reads the file again at every access; an entry never
    set reads as None. :meth:`close` (also a context manager's exit) removes the directory."""

    def __init__(self, directory, n=0):
        self._tmp = tempfile.TemporaryDirectory(prefix="sparseclust-memo-", dir=directory)
        self._set = [False] * int(n)

    def _path(self, b):
        return os.path.join(self._tmp.name, f"batch-{b:06d}.pkl")

    def __len__(self):
        return len(self._set)

    def __getitem__(self, b):
        b = range(len(self._set))[b]  # an index error beyond the end, negative indices
        if not self._set[b]:
            return None
        with open(self._path(b), "rb") as fh:
            return pickle.load(fh)

    def __setitem__(self, b, stats):
        b = range(len(self._set))[b]
        with open(self._path(b), "wb") as fh:
            pickle.dump(stats, fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._set[b] = True

    def append(self, stats):
        self._set.append(False)
        self[len(self._set) - 1] = stats

    def __iter__(self):
        for b in range(len(self._set)):
            yield self[b]

    def close(self):
        self._tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
