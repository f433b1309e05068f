# SPDX-License-Identifier: BSD-3-Clause
"""Input checks shared by every estimator, run before scikit-learn's own validation: text
where numbers are expected, and a ``set_output`` container whose library is not installed
(which scikit-learn only reports when the output is wrapped, after the whole fit)."""

import importlib

import numpy as np
import scipy.sparse as sp

_TEXT_COUNTS = (
    "{whom} expects a document-word count matrix, got text; turn the documents into counts "
    "first, e.g. with sklearn.feature_extraction.text.CountVectorizer "
    "(sparseclust.datasets.load_text_lines and load_text_folder read text files into counts, "
    "and so does the command line, python -m sparseclust topics)."
)

_TEXT_VECTORS = (
    "{whom} expects numeric feature vectors of shape (n_samples, n_features), got text; turn "
    "the text into numbers first, e.g. sklearn.feature_extraction.text.TfidfVectorizer "
    "followed by sklearn.decomposition.TruncatedSVD, or use a topic model "
    "(sparseclust.SparseLDA) on word counts."
)


def _has_str(values):
    return any(isinstance(v, (str, bytes)) for v in values)


def is_text(X):
    """True when X holds strings or bytes: a str, a (nested) list or tuple whose first
    element is one, a string array, an object array with a string among its elements, or a
    pandas Series / DataFrame with one in a non-numeric column. Anything else (numbers,
    sparse matrices, objects that are not strings) is left to scikit-learn's validation,
    whose errors (e.g. the TypeError of ``check_dtype_object``) stay as they are."""
    if isinstance(X, (str, bytes)):
        return True
    if X is None or sp.issparse(X):
        return False
    if isinstance(X, (list, tuple)):
        x = X
        while isinstance(x, (list, tuple)) and len(x):
            x = x[0]
        return isinstance(x, (str, bytes))
    if isinstance(X, np.ndarray):
        if X.dtype.kind in "US":
            return True
        return X.dtype.kind == "O" and _has_str(X.ravel())
    if hasattr(X, "select_dtypes"):  # pandas DataFrame: its non-numeric columns only
        other = X.select_dtypes(exclude=["number", "bool"])
        return other.shape[1] > 0 and _has_str(other.to_numpy(dtype=object).ravel())
    if getattr(X, "ndim", None) == 1 and hasattr(X, "to_numpy"):  # pandas Series
        if getattr(X.dtype, "kind", "O") in "biufc":
            return False
        return _has_str(X.to_numpy(dtype=object))
    return False


def reject_text(X, whom, *, counts=True):
    """Raise ValueError when X is text (see :func:`is_text`), saying to vectorize it first:
    into word counts for the topic models (``counts=True``), into numeric vectors for the
    mixture."""
    if is_text(X):
        raise ValueError((_TEXT_COUNTS if counts else _TEXT_VECTORS).format(whom=whom))


def check_output_support(estimator, whom):
    """Raise ImportError before a fit when the estimator's transform output (``set_output``
    or the global ``transform_output``) is a container whose library is not installed;
    scikit-learn raises only when it wraps the output of ``transform``, after the fit."""
    from sklearn import get_config

    config = getattr(estimator, "_sklearn_output_config", {}).get("transform")
    if config is None:
        config = get_config().get("transform_output", "default")
    if config not in ("pandas", "polars"):
        return
    try:
        importlib.import_module(config)
    except ImportError:
        raise ImportError(
            f"{whom}: the transform output is set to {config!r} (set_output or "
            f"sklearn.set_config), but {config} is not installed; install it, or call "
            "set_output(transform='default') to get numpy arrays."
        ) from None
