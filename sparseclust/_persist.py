# SPDX-License-Identifier: BSD-3-Clause
"""Saving and loading fitted estimators with a versioned file format.

A file holds three parts:

1. the magic line ``b"sparseclust-model\\n"``;
2. one line of JSON, the header: ``format_version`` (an integer, :data:`FORMAT_VERSION`),
   the ``sparseclust`` version that wrote it, the estimator's class, a few descriptive fields
   (the number of features and components) and the length and SHA-256 digest of part 3
   (``payload_bytes``, ``payload_sha256``);
3. the estimator, pickled.

:func:`load` reads and checks the header before it unpickles anything, so a file written by an
incompatible version of the package is refused with a message that says which version wrote it,
instead of failing somewhere inside ``pickle``; it then checks the payload's length and digest,
so a truncated or altered file is refused before it is unpickled (files written before the
digest was recorded are read without that check). ``FORMAT_VERSION`` changes whenever the
fitted state of an estimator changes in a way an older or newer release cannot read.

:func:`save` writes a temporary file next to ``path`` and renames it over ``path`` only once
it is complete, so a failed save (e.g. an attribute that cannot be pickled) leaves an existing
file as it was.

Like every pickle, a file can run code when it is loaded: load only files you trust.
"""

import hashlib
import json
import os
import pickle
import secrets
import shutil
import tempfile
import time

from . import __version__

__all__ = ["FORMAT_VERSION", "load", "save"]

#: version of the saved-model format this release writes and reads
FORMAT_VERSION = 1
_MAGIC = b"sparseclust-model\n"
_CHUNK = 1 << 20


class _HashingWriter:
    """File-like sink for ``pickle.dump`` that counts and hashes what passes through."""

    def __init__(self, fh):
        self.fh = fh
        self.sha = hashlib.sha256()
        self.n_bytes = 0

    def write(self, data):
        self.sha.update(data)
        self.n_bytes += memoryview(data).nbytes
        return self.fh.write(data)


def _replace(src, dst, attempts=10):
    """os.replace; on Windows a file another process holds open (an indexer, a virus
    scanner) refuses it for a moment, so it is retried there."""
    for i in range(attempts):
        try:
            os.replace(src, dst)
            return
        except PermissionError:
            if os.name != "nt" or i == attempts - 1:
                raise
            time.sleep(0.05 * (i + 1))


def _digest_rest(fh):
    """Length and SHA-256 digest of ``fh`` from its position to its end (read in chunks)."""
    sha, n = hashlib.sha256(), 0
    while chunk := fh.read(_CHUNK):
        sha.update(chunk)
        n += len(chunk)
    return n, sha.hexdigest()


def _header(estimator):
    cls = type(estimator)
    header = {
        "format_version": FORMAT_VERSION,
        "sparseclust_version": __version__,
        "class": f"{cls.__module__}.{cls.__qualname__}",
    }
    for attr in ("n_features_in_", "n_components_", "n_components"):
        value = getattr(estimator, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            header[attr] = value
    return header


def save(estimator, path):
    """Write a (fitted or unfitted) estimator to ``path``.

    Parameters
    ----------
    estimator : object
        Any sparseclust estimator (or a scikit-learn object holding one, e.g. a ``Pipeline``).
    path : str or path-like
        File to write (through a symbolic link, to the file it names). An existing file is
        replaced only once the new one is complete, keeping its permissions: if pickling
        fails, it is left as it was. The folder must be writable (the new file is written
        next to the old one).

    Returns
    -------
    header : dict
        The header written in front of the pickled estimator.
    """
    header = _header(estimator)
    # write through a symbolic link to the file it names, as open(path, "wb") would
    path = os.path.realpath(os.fsdecode(os.fspath(path)))
    mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else None
    if mode is not None and not os.access(path, os.W_OK):
        raise PermissionError(f"{path} is not writable")
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(8)}.tmp")
    # created as open() creates a file: mode 0o666 less the process's umask
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as out, tempfile.TemporaryFile(dir=folder) as payload:
            # the payload first (its digest goes into the header), then header + payload
            sink = _HashingWriter(payload)
            pickle.dump(estimator, sink, protocol=pickle.HIGHEST_PROTOCOL)
            header["payload_bytes"] = sink.n_bytes
            header["payload_sha256"] = sink.sha.hexdigest()
            out.write(_MAGIC)
            out.write(json.dumps(header, sort_keys=True).encode("utf-8") + b"\n")
            payload.seek(0)
            shutil.copyfileobj(payload, out, _CHUNK)
            if mode is not None:  # a replaced file keeps its permissions
                try:
                    os.chmod(tmp, mode)
                except OSError:
                    pass
        _replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return header


def read_header(path):
    """The header of a file written by :func:`save`, without loading the estimator.

    Raises
    ------
    ValueError
        If the file was not written by :func:`save`.
    """
    with open(path, "rb") as fh:
        return _read_header(fh, path)


def _read_header(fh, path):
    magic = fh.read(len(_MAGIC))
    if magic != _MAGIC:
        raise ValueError(
            f"{path} is not a sparseclust model file (written by sparseclust.save); a plain "
            "pickle is read with pickle.load."
        )
    line = fh.readline(1 << 20)
    try:
        header = json.loads(line.decode("utf-8"))
        version = header["format_version"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise TypeError
        for key, kind in (("payload_bytes", int), ("payload_sha256", str)):
            if key in header and not isinstance(header[key], kind):
                raise TypeError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValueError(f"{path}: the header of the model file is damaged") from None
    return header


def load(path, *, expected=None):
    """Read an estimator written by :func:`save`.

    Parameters
    ----------
    path : str or path-like
    expected : type or tuple of types, optional
        Raise ``TypeError`` unless the loaded object is an instance of it.

    Returns
    -------
    estimator : object

    Raises
    ------
    ValueError
        If the file is not a sparseclust model file, is damaged, or was written with a format
        version this release cannot read (the message names the sparseclust version that wrote
        it).
    """
    with open(path, "rb") as fh:
        header = _read_header(fh, path)
        if header["format_version"] != FORMAT_VERSION:
            raise ValueError(
                f"{path} was written by sparseclust {header.get('sparseclust_version', '?')} "
                f"in model format {header['format_version']}; this is sparseclust "
                f"{__version__}, which reads format {FORMAT_VERSION}. Load it with the "
                "release that wrote it, or refit the model."
            )
        verified = "payload_sha256" in header
        if verified:
            start = fh.tell()
            n_bytes, digest = _digest_rest(fh)
            if n_bytes != header.get("payload_bytes") or digest != header["payload_sha256"]:
                raise ValueError(
                    f"{path}: the model file is truncated or damaged (its payload has "
                    f"{n_bytes} bytes and does not match the digest in its header)")
            fh.seek(start)
        try:
            obj = pickle.load(fh)
        except (ImportError, MemoryError):
            raise  # a class the file needs is missing (its message says which), or memory
        except Exception as exc:
            if verified:  # the payload is the one saved: it is not damaged
                raise ValueError(
                    f"{path}: the model could not be unpickled ({type(exc).__name__}: {exc}); "
                    "it was written by sparseclust "
                    f"{header.get('sparseclust_version', '?')}, this is {__version__}"
                ) from exc
            raise ValueError(f"{path}: the model file is truncated or damaged "
                             f"({type(exc).__name__}: {exc})") from None
    if expected is not None and not isinstance(obj, expected):
        raise TypeError(f"{path} holds a {type(obj).__name__}, not the expected {expected}")
    return obj
