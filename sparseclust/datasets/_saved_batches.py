# SPDX-License-Identifier: BSD-3-Clause
"""Minibatches saved to a directory, and read back: what :meth:`CorpusStream.save` and
:meth:`PatchStream.save` share.

A saved stream is a directory of one file per minibatch, ``batch-<i>.<ext>`` (``i``
zero-padded to six digits), beside a JSON manifest naming its format and version. It is
written into a fresh temporary directory beside the target and renamed to the target when
complete, so a save that fails or is interrupted leaves nothing there.
"""

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

__all__ = ["batch_name", "check_files", "new_directory", "read_manifest", "reading",
           "write_directory"]


def batch_name(i, ext):
    """The file of minibatch ``i``: ``batch-000000.<ext>``, ..."""
    return f"batch-{i:06d}.{ext}"


@contextmanager
def reading(stream):
    """An iterator over ``stream``'s minibatches, closed on exit (which stops a read-ahead
    thread at once when the save fails)."""
    it = iter(stream)
    try:
        yield it
    finally:
        if hasattr(it, "close"):
            it.close()


def new_directory(directory, writer):
    """``directory`` as an absolute path, checked to be writable as a new saved stream: it
    must not be a symbolic link, a file or a directory that holds files (FileExistsError
    naming ``writer``, e.g. ``'CorpusStream.save'``)."""
    target = Path(os.path.abspath(os.fspath(directory)))
    if target.is_symlink():
        raise FileExistsError(f"{target}: is a symbolic link; {writer} writes a new directory")
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise FileExistsError(f"{target}: exists and is not an empty directory; {writer} "
                              "writes a new directory")
    return target


def write_directory(target, fill, manifest_name):
    """Create ``target`` (from :func:`new_directory`) holding what ``fill(tmp)`` writes into a
    temporary directory, plus the manifest ``fill`` returns (a dict), as ``manifest_name``.

    The temporary directory is renamed to ``target`` when complete (an empty ``target`` is
    replaced); on any error, including a ``target`` created meanwhile (FileExistsError),
    it is removed and nothing is left at ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # a fresh temporary directory per save: two saves never share one
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial",
                                dir=target.parent))
    try:
        manifest = fill(tmp)
        (tmp / manifest_name).write_text(json.dumps(manifest))
        if os.name == "nt" and target.is_dir() and not any(target.iterdir()):
            target.rmdir()  # os.rename does not replace a directory there
        try:
            # replaces an empty directory, fails on any other
            os.rename(tmp, target)
        except OSError as exc:
            raise FileExistsError(f"{target}: was created by another save or process "
                                  f"meanwhile ({exc.strerror}); nothing was written "
                                  "there") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_manifest(directory, manifest_name, fmt, version, keys, what, writer):
    """The manifest of a saved stream in ``directory``, checked: its ``format`` is ``fmt``
    and its ``version`` ``version``, and it holds ``keys``. Returns ``(folder, name,
    manifest)``. The errors (ValueError) name ``what`` (e.g. ``'corpus'``) and ``writer``."""
    folder = Path(os.fspath(directory))
    name = str(folder)
    try:
        manifest = json.loads((folder / manifest_name).read_text())
    except FileNotFoundError:
        raise ValueError(f"{name}: no saved {what} here (no {manifest_name}); write one "
                         f"with {writer}") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{name}: cannot read {manifest_name} ({exc})") from None
    if (not isinstance(manifest, dict) or manifest.get("format") != fmt
            or manifest.get("version") != version):
        raise ValueError(f"{name}/{manifest_name}: not a {what} saved by this version of "
                         f"{writer}")
    missing = [k for k in keys if k not in manifest]
    if missing:
        raise ValueError(f"{name}/{manifest_name}: incomplete manifest (missing "
                         f"{missing[0]!r})")
    return folder, name, manifest


def check_files(folder, name, n, ext):
    """The ``n`` minibatch files of a saved stream, all present (else ValueError)."""
    files = [folder / batch_name(i, ext) for i in range(n)]
    absent = [f.name for f in files if not f.is_file()]
    if absent:
        raise ValueError(f"{name}: {len(absent)} of {len(files)} minibatch files are "
                         f"missing (first: {absent[0]})")
    return files
