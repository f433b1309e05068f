# SPDX-License-Identifier: BSD-3-Clause
"""Saving and loading fitted estimators with a versioned file format.

A file holds three parts:

1. the magic line ``b"sparseclust-model\\n"``;
2. one line of JSON, the header: ``format_version`` (an integer, :data:`FORMAT_VERSION`),
   the ``sparseclust`` version that wrote it, the estimator's class and a few descriptive fields
   (the number of features and components);
3. the estimator, pickled.

:func:`load` reads and checks the header before it unpickles anything, so a file written by an
incompatible version of the package is refused with a message that says which version wrote it,
instead of failing somewhere inside ``pickle``. ``FORMAT_VERSION`` changes whenever the fitted
state of an estimator changes in a way an older or newer release cannot read.

Like every pickle, a file can run code when it is loaded: load only files you trust.
"""

import json
import pickle

from . import __version__

__all__ = ["FORMAT_VERSION", "load", "save"]

#: version of the saved-model format this release writes and reads
FORMAT_VERSION = 1
_MAGIC = b"sparseclust-model\n"


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
        File to write (overwritten).

    Returns
    -------
    header : dict
        The header written in front of the pickled estimator.
    """
    header = _header(estimator)
    with open(path, "wb") as fh:
        fh.write(_MAGIC)
        fh.write(json.dumps(header, sort_keys=True).encode("utf-8") + b"\n")
        pickle.dump(estimator, fh, protocol=pickle.HIGHEST_PROTOCOL)
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
        version = int(header["format_version"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ValueError(f"{path}: the header of the model file is damaged") from None
    header["format_version"] = version
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
        try:
            obj = pickle.load(fh)
        except (EOFError, pickle.UnpicklingError) as exc:
            raise ValueError(f"{path}: the model file is truncated or damaged ({exc})") from None
    if expected is not None and not isinstance(obj, expected):
        raise TypeError(f"{path} holds a {type(obj).__name__}, not the expected {expected}")
    return obj
