# SPDX-License-Identifier: BSD-3-Clause
"""Bag-of-words corpora: UCI ``docword``/``vocab`` files, LDA-C files, folders of text files.

A corpus is returned as a document-term count matrix ``X`` of shape ``(n_documents,
n_words)`` in CSR format, ``X[d, v]`` being the number of times word ``v`` occurs in
document ``d`` -- the ``n_dv`` of the topic-model local step.

Parsing strategy. Files are read whole (gzip detected by its magic bytes) and scanned
once by a compiled pass over the bytes (:mod:`sparseclust._kernels._text_scan`). For UCI
entries the pass checks everything itself (the characters, three numbers a line, the
ranges of the IDs and counts) and returns the entries. For LDA-C it checks that only the
characters of the format occur and records, for each run of digits, its value, its line
and whether a ``:`` precedes it; the structure and value checks are array comparisons.
Only when a check fails is the file scanned again line by line, in Python, to report the
first offending line (1-based) in a :class:`ValueError` naming the file. The line-by-line
parser is complete on its own, so both paths accept the same language and return the same
matrix.
"""

import gzip
import os
import re
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.utils import Bunch, check_array

from .._kernels import _text_scan

__all__ = ["load_uci_bow", "save_uci_bow", "load_ldac", "load_text_folder"]

# An unsigned integer of at most 18 digits always fits in int64.
_MAX_DIGITS = 18
_UNSIGNED = re.compile(rb"[0-9]+")
_NEGATIVE = re.compile(rb"-[0-9]+")


# --------------------------------------------------------------------------------------
# Low-level helpers
# --------------------------------------------------------------------------------------


try:  # optional (the ``fastgzip`` extra): ISA-L's decompression, the same bytes, faster
    from isal import igzip as _fast_gzip
    from isal import isal_zlib as _fast_zlib
except ImportError:  # pragma: no cover - depends on the environment
    _fast_gzip = _fast_zlib = None


def _gzip():
    """The module that decompresses gzip files: ``isal.igzip`` when installed (about 2.5
    times faster than zlib, which is most of the cost of reading a compressed corpus), else
    the standard library's ``gzip``."""
    return gzip if _fast_gzip is None else _fast_gzip


def _gzip_errors():
    """What reading a broken gzip file raises, with either module."""
    return (OSError, EOFError, zlib.error) + (() if _fast_zlib is None else (_fast_zlib.error,))


def _gzip_error(name, exc):
    """The ValueError for a gzip archive that cannot be decompressed."""
    return ValueError(f"{name}: not a valid gzip file ({exc})")


def _read_source(source):
    """Return ``(bytes, display name)`` of a path or an ``importlib.resources`` file.

    Gzip-compressed content (magic bytes ``1f 8b``) is decompressed, whatever the name.
    """
    if isinstance(source, (str, os.PathLike)):
        source = Path(os.fspath(source))
    name = str(source)
    raw = source.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = _gzip().decompress(raw)
        except _gzip_errors() as exc:
            raise _gzip_error(name, exc) from None
    return raw, name


def _show(line, limit=60):
    """Printable excerpt of a raw line for error messages."""
    text = line.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _error(name, lineno, message):
    return ValueError(f"{name}, line {lineno}: {message}")


def _check_int(token, name, lineno, what, lo, hi=None):
    """Strictly parse one unsigned decimal integer ``token`` (bytes) within ``[lo, hi]``."""
    if _UNSIGNED.fullmatch(token) is None:
        if _NEGATIVE.fullmatch(token) is not None:
            raise _error(name, lineno, f"{what} must be >= {lo}, got {_show(token)}")
        raise _error(name, lineno, f"{what} is not an integer: {_show(token)!r}")
    if len(token) > _MAX_DIGITS:
        raise _error(name, lineno, f"{what} has more than {_MAX_DIGITS} digits: {_show(token)}")
    value = int(token)
    if value < lo or (hi is not None and value > hi):
        if hi is None:
            raise _error(name, lineno, f"{what} must be >= {lo}, got {value}")
        raise _error(name, lineno, f"{what} {value} out of range {lo}..{hi}")
    return value


def _check_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind not in "fiu":
        raise ValueError(f"dtype must be a numeric (float or integer) dtype, got {dtype}")
    return dtype


def _tokenize(body, allow_colon):
    """One compiled scan of a text made of unsigned integers, whitespace and (optionally)
    ``:`` (:func:`sparseclust._kernels._text_scan.scan`).

    Returns ``(values, line, after_colon)``: the integers (int64), the 0-based line of
    ``body`` each one is on, and whether a ``:`` directly precedes it. Returns ``None``
    when another character occurs, a number is too long, or a ``:`` is not between two
    digits; the caller then falls back to the line-by-line parser.
    """
    return _text_scan.scan(np.frombuffer(body, dtype=np.uint8), bool(allow_colon),
                           _MAX_DIGITS)


def _counts_matrix(rows, cols, counts, shape, dtype, name):
    """CSR matrix summing duplicated ``(row, col)`` entries, cast to ``dtype``.

    Entries already in CSR order (rows non-decreasing, columns increasing within a row, as
    corpus files list them) are laid out directly; others are sorted and summed."""
    counts = counts.astype(np.int64, copy=False)
    n = rows.size
    layout = None
    if n and max(shape[0], shape[1], n) < np.iinfo(np.int32).max:
        layout = _text_scan.csr_layout(np.ascontiguousarray(rows, dtype=np.int64),
                                       np.ascontiguousarray(cols, dtype=np.int64), shape[0])
    if layout is not None:
        X = sp.csr_matrix((counts, layout[1], layout[0]), shape=shape)
        X.has_canonical_format = True
    else:
        X = sp.csr_matrix((counts, (rows, cols)), shape=shape, dtype=np.int64)
        X.sum_duplicates()
    if dtype.kind in "iu" and X.nnz and X.data.max() > np.iinfo(dtype).max:
        raise ValueError(f"{name}: a count of {X.data.max()} does not fit in dtype {dtype}")
    # a new matrix of all three arrays, made last: a stream's reader thread that kept the
    # row pointers it made first left about 100 MB of freed minibatches in its malloc arena
    # once a 26.5M-token corpus read through it was freed (glibc)
    return X.astype(dtype)


def _read_vocab(source):
    """Words of a vocabulary file (one per line), with 1-based line numbers in errors.

    Surrounding whitespace is stripped; trailing empty lines are ignored; an empty line
    before the last word and a repeated word are errors.
    """
    raw, name = _read_source(source)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = raw[: exc.start].count(b"\n") + 1
        raise _error(name, lineno, f"not valid UTF-8 ({exc.reason})") from None
    words = [w.strip() for w in text.split("\n")]
    while words and not words[-1]:
        words.pop()
    seen = {}
    for i, word in enumerate(words):
        if not word:
            raise _error(name, i + 1, "empty word in the vocabulary")
        if word in seen:
            raise _error(name, i + 1, f"word {word!r} already on line {seen[word] + 1}")
        seen[word] = i
    return np.array(words, dtype=object), name


# --------------------------------------------------------------------------------------
# UCI bag of words
# --------------------------------------------------------------------------------------

_UCI_HEADER = (
    "number of documents D",
    "vocabulary size W",
    "number of non-zeros NNZ",
)


def _parse_uci_header(raw, name):
    parts = raw.split(b"\n", 3)
    header = []
    for i, what in enumerate(_UCI_HEADER):
        if i >= len(parts):
            raise _error(name, i + 1, f"bad header: expected the {what}, got end of file")
        token = parts[i].strip()
        if _UNSIGNED.fullmatch(token) is None or len(token) > _MAX_DIGITS:
            raise _error(
                name,
                i + 1,
                f"bad header: expected the {what} as a single non-negative integer, "
                f"got {_show(parts[i])!r}",
            )
        header.append(int(token))
    body = parts[3] if len(parts) > 3 else b""
    return header, body


def _parse_uci_fast(body, D, W, nnz):
    """Compiled parse of the UCI entries (:func:`sparseclust._kernels._text_scan.scan_uci`);
    ``None`` if anything is off."""
    out = _text_scan.scan_uci(np.frombuffer(body, dtype=np.uint8), D, W, -1, False, nnz,
                              _MAX_DIGITS)
    if out is None or out[0].size != nnz:
        return None
    return out[:3]


def _parse_uci_slow(body, name, D, W, nnz, first_line=4, check_total=True, declared=None):
    """Line-by-line parse of the UCI entries; raises on the first offending line.

    ``check_total=False`` (a block of a streamed file) accepts fewer than ``nnz`` entries;
    ``declared`` is the header's NNZ for the messages (default ``nnz``: the whole file).
    """
    if declared is None:
        declared = nnz
    docs, words, counts = [], [], []
    last = first_line - 1
    for k, line in enumerate(body.split(b"\n")):
        lineno = first_line + k
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise _error(
                name, lineno, f"expected 3 integers 'docID wordID count', got {_show(line)!r}"
            )
        d = _check_int(fields[0], name, lineno, "docID", 1, D)
        w = _check_int(fields[1], name, lineno, "wordID", 1, W)
        c = _check_int(fields[2], name, lineno, "count", 1)
        if len(docs) == nnz:
            raise _error(
                name, lineno,
                f"more entries than the NNZ={declared} declared in the header (line 3)",
            )
        docs.append(d - 1)
        words.append(w - 1)
        counts.append(c)
        last = lineno
    if check_total and len(docs) != nnz:
        raise _error(
            name,
            last + 1,
            f"file ends after {len(docs)} entries, but the header (line 3) declares NNZ={nnz}",
        )
    return (
        np.array(docs, dtype=np.int64),
        np.array(words, dtype=np.int64),
        np.array(counts, dtype=np.int64),
    )


def _load_uci(docword, vocab=None, dtype=np.float64, fast=True):
    """Shared implementation of :func:`load_uci_bow` and :func:`~sparseclust.datasets.load_kos`.

    ``docword`` and ``vocab`` are paths or ``importlib.resources`` files; ``fast=False``
    forces the line-by-line parser (used by the tests to check both agree).
    """
    dtype = _check_dtype(dtype)
    raw, name = _read_source(docword)
    (D, W, nnz), body = _parse_uci_header(raw, name)
    entries = _parse_uci_fast(body, D, W, nnz) if fast else None
    if entries is None:
        entries = _parse_uci_slow(body, name, D, W, nnz)
    docs, words, counts = entries
    X = _counts_matrix(docs, words, counts, (D, W), dtype, name)
    feature_names = None
    if vocab is not None:
        feature_names, vocab_name = _read_vocab(vocab)
        if feature_names.size > W:
            raise _error(
                vocab_name,
                W + 1,
                f"the vocabulary has more words than the W={W} declared in {name} (line 2)",
            )
        if feature_names.size < W:
            raise _error(
                vocab_name,
                feature_names.size + 1,
                f"the vocabulary ends after {feature_names.size} words, but {name} "
                f"(line 2) declares W={W}",
            )
    n_tokens = int(counts.sum())
    descr = (
        f"UCI bag-of-words corpus read from {name}: {D} documents, {W} words, "
        f"{nnz} (document, word) entries, {n_tokens} tokens."
    )
    return Bunch(data=X, feature_names=feature_names, DESCR=descr)


def load_uci_bow(docword_path, vocab_path=None, dtype=np.float64):
    """Load a corpus in the UCI "Bag of Words" format.

    ``docword`` files (optionally gzip-compressed, detected from the content) hold three
    header lines ``D``, ``W``, ``NNZ`` (numbers of documents, of vocabulary words and of
    entries that follow), then ``NNZ`` lines ``docID wordID count`` with 1-based ids and
    a positive count. Blank lines are ignored. A ``(docID, wordID)`` pair listed more
    than once is summed: the matrix entry is the total count. ``vocab`` files hold one
    word per line, word ``v`` (1-based) on line ``v``.

    Parameters
    ----------
    docword_path : str or path-like
        The ``docword.*.txt`` or ``docword.*.txt.gz`` file.
    vocab_path : str or path-like, default=None
        The ``vocab.*.txt`` file; it must list exactly ``W`` distinct words.
    dtype : numeric dtype, default=np.float64
        Dtype of the count matrix.

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: CSR matrix of shape ``(D, W)`` whose entry ``(d, v)`` is the count
        :math:`n_{dv}` of word ``v`` in document ``d`` (0-based here);
        ``feature_names``: object array of the ``W`` words, or ``None`` without
        ``vocab_path``; ``DESCR``: a short description.

    Raises
    ------
    ValueError
        On malformed input, with the file name and the 1-based line number: bad header,
        wrong number of fields, non-integer fields, ids out of range, counts below 1,
        number of entries different from ``NNZ``, vocabulary length different from ``W``.
    """
    return _load_uci(docword_path, vocab_path, dtype=dtype)


def save_uci_bow(X, docword_path, vocab_path=None, feature_names=None):
    """Write a count matrix in the UCI "Bag of Words" format.

    The inverse of :func:`load_uci_bow`: the header ``D``, ``W``, ``NNZ`` followed by one
    line ``docID wordID count`` (1-based ids) per non-zero entry, in document then word
    order. A ``docword_path`` ending in ``.gz`` is written gzip-compressed.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_documents, n_words)
        Non-negative, integer-valued counts. ``X`` is not modified.
    docword_path : str or path-like
        Destination of the entries.
    vocab_path : str or path-like, default=None
        Destination of the vocabulary (one word per line); requires ``feature_names``.
    feature_names : sequence of str of length n_words, default=None
        Distinct, non-empty words without surrounding whitespace or line breaks.
    """
    X = check_array(
        X,
        accept_sparse=["csr", "csc", "coo"],
        dtype="numeric",
        ensure_min_samples=0,
        ensure_min_features=0,
        input_name="X",
    )
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    data = X.data
    if data.size:
        if data.min() < 0:
            raise ValueError("X must hold non-negative counts")
        if data.dtype.kind == "f":
            if not np.array_equal(data, np.round(data)):
                raise ValueError("X must hold integer counts")
            if data.max() >= 2.0**63:
                raise ValueError("X holds counts too large for a 64-bit integer")
    if (vocab_path is None) != (feature_names is None):
        raise ValueError("vocab_path and feature_names must be given together")
    words = None
    if feature_names is not None:
        words = [str(w) for w in feature_names]
        if len(words) != X.shape[1]:
            raise ValueError(
                f"feature_names has {len(words)} words but X has {X.shape[1]} columns"
            )
        for i, w in enumerate(words):
            if not w or w != w.strip() or "\n" in w or "\r" in w:
                raise ValueError(
                    f"feature_names[{i}] = {w!r}: words must be non-empty, without "
                    "surrounding whitespace or line breaks"
                )
        if len(set(words)) != len(words):
            raise ValueError("feature_names must be distinct")

    D, W = X.shape
    rows = np.repeat(np.arange(D, dtype=np.int64), np.diff(X.indptr)) + 1
    cols = X.indices.astype(np.int64) + 1
    counts = data.astype(np.int64)
    lines = [f"{D}\n{W}\n{X.nnz}\n"]
    lines.extend(map("{} {} {}\n".format, rows.tolist(), cols.tolist(), counts.tolist()))
    _write_text("".join(lines), docword_path)
    if words is not None:
        _write_text("".join(w + "\n" for w in words), vocab_path)


def _write_text(text, path):
    payload = text.encode("utf-8")
    if os.fspath(path).endswith(".gz"):
        payload = gzip.compress(payload, compresslevel=6, mtime=0)
    Path(os.fspath(path)).write_bytes(payload)


# --------------------------------------------------------------------------------------
# LDA-C
# --------------------------------------------------------------------------------------


def _parse_ldac_fast(body, n_lines):
    """Vectorized parse of LDA-C lines; ``None`` if anything is off."""
    tok = _tokenize(body, allow_colon=True)
    if tok is None:
        return None
    values, line, after_colon = tok
    if n_lines == 0:
        return (np.empty(0, np.int64),) * 3 if values.size == 0 else None
    per_line = np.bincount(line, minlength=n_lines)
    if per_line.size != n_lines or (per_line == 0).any():
        return None
    first = np.concatenate(([0], np.cumsum(per_line)[:-1]))
    position = np.arange(values.size) - np.repeat(first, per_line)
    # "N id:count id:count ...": even positions > 0 follow a ':', the others do not
    if not np.array_equal(after_colon, (position > 0) & (position % 2 == 0)):
        return None
    if not np.array_equal(per_line, 1 + 2 * values[first]):
        return None
    ids = values[position % 2 == 1]
    counts = values[(position > 0) & (position % 2 == 0)]
    if counts.size and counts.min() < 1:
        return None
    docs = line[position % 2 == 1]
    return docs, ids, counts


def _parse_ldac_slow(body, name, n_features, first_line=1):
    """Line-by-line parse of LDA-C lines; raises on the first offending line."""
    docs, ids, counts = [], [], []
    hi = None if n_features is None else n_features - 1
    for k, line in enumerate(body.split(b"\n")):
        lineno = first_line + k
        fields = line.split()
        if not fields:
            raise _error(
                name,
                lineno,
                "empty line; every line is a document 'N id:count ...' "
                "(an empty document is written '0')",
            )
        n = _check_int(fields[0], name, lineno, "number of pairs N", 0)
        pairs = fields[1:]
        if len(pairs) != n:
            raise _error(name, lineno, f"N={n} but the line holds {len(pairs)} 'id:count' pairs")
        for pair in pairs:
            parts = pair.split(b":")
            if len(parts) != 2:
                raise _error(name, lineno, f"expected a pair 'id:count', got {_show(pair)!r}")
            ids.append(_check_int(parts[0], name, lineno, "word id", 0, hi))
            counts.append(_check_int(parts[1], name, lineno, "count", 1))
            docs.append(k)
    return (
        np.array(docs, dtype=np.int64),
        np.array(ids, dtype=np.int64),
        np.array(counts, dtype=np.int64),
    )


def _load_ldac(path, vocab_path=None, n_features=None, dtype=np.float64, fast=True):
    dtype = _check_dtype(dtype)
    if n_features is not None:
        if isinstance(n_features, (bool, np.bool_)) or not isinstance(
            n_features, (int, np.integer)
        ):
            raise ValueError(f"n_features must be a non-negative integer, got {n_features!r}")
        if n_features < 0:
            raise ValueError(f"n_features must be a non-negative integer, got {n_features}")
        n_features = int(n_features)
    feature_names = None
    if vocab_path is not None:
        feature_names, vocab_name = _read_vocab(vocab_path)
        if n_features is None:
            n_features = feature_names.size
        elif n_features != feature_names.size:
            raise ValueError(
                f"{vocab_name}: the vocabulary has {feature_names.size} words, "
                f"but n_features={n_features}"
            )
    raw, name = _read_source(path)
    body = raw.rstrip()  # trailing blank lines do not make documents
    n_lines = body.count(b"\n") + 1 if body else 0
    entries = _parse_ldac_fast(body, n_lines) if fast else None
    if entries is not None and n_features is not None:
        if entries[1].size and entries[1].max() >= n_features:
            entries = None
    if entries is None:
        entries = _parse_ldac_slow(body, name, n_features)
    docs, ids, counts = entries
    if n_features is None:
        n_features = int(ids.max()) + 1 if ids.size else 0
    X = _counts_matrix(docs, ids, counts, (n_lines, n_features), dtype, name)
    descr = (
        f"LDA-C corpus read from {name}: {n_lines} documents, {n_features} words, "
        f"{int(counts.sum())} tokens."
    )
    return Bunch(data=X, feature_names=feature_names, DESCR=descr)


def load_ldac(path, vocab_path=None, n_features=None, dtype=np.float64):
    """Load a corpus in the LDA-C format (Blei's ``lda-c`` input files).

    Each line is one document ``N id:count id:count ...``: the number ``N`` of distinct
    words, then ``N`` pairs of a 0-based word id and a positive count. A document
    without words is written ``0``. Blank lines at the end of the file are ignored; a
    blank line before the last document is an error. An id listed twice in a line is
    summed. The file may be gzip-compressed (detected from the content).

    Parameters
    ----------
    path : str or path-like
        The LDA-C file.
    vocab_path : str or path-like, default=None
        Vocabulary, one word per line, word ``v`` (0-based) on line ``v + 1``.
    n_features : int, default=None
        Number of columns. Defaults to the vocabulary length, else to the largest word
        id plus one. Word ids must be below it.
    dtype : numeric dtype, default=np.float64
        Dtype of the count matrix.

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: CSR matrix ``(n_documents, n_features)`` of counts :math:`n_{dv}`;
        ``feature_names``: object array of words or ``None``; ``DESCR``.

    Raises
    ------
    ValueError
        On malformed input, with the file name and 1-based line number: ``N`` differing
        from the number of pairs, malformed pairs, non-integer fields, ids out of range,
        counts below 1, blank lines; or when ``n_features`` and the vocabulary disagree.
    """
    return _load_ldac(path, vocab_path, n_features=n_features, dtype=dtype)


# --------------------------------------------------------------------------------------
# Folder of text files
# --------------------------------------------------------------------------------------


def load_text_folder(path, **vectorizer_params):
    """Vectorize every ``.txt`` file under a folder into a document-term count matrix.

    Files are found recursively (suffix ``.txt``, any case) and ordered by path; each one
    is a document. Counting uses :class:`sklearn.feature_extraction.text.CountVectorizer`.

    Parameters
    ----------
    path : str or path-like
        The folder.
    **vectorizer_params
        Parameters of :class:`~sklearn.feature_extraction.text.CountVectorizer`; the
        defaults here are ``stop_words="english"`` and ``dtype=np.float64``. ``encoding``
        (default ``"utf-8"``) and ``decode_error`` (default ``"strict"``) are used to read
        the files. ``input`` is set by this function and may not be given.

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: CSR count matrix ``(n_files, n_words)``; ``feature_names``: object
        array of the words; ``filenames``: array of the file paths (row order);
        ``vectorizer``: the fitted ``CountVectorizer`` (to transform new documents with
        the same vocabulary); ``DESCR``.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    if "input" in vectorizer_params:
        raise ValueError("load_text_folder reads the files itself; do not pass 'input'")
    folder, files = _text_files(path)
    params = {"stop_words": "english", "dtype": np.float64}
    params.update(vectorizer_params)
    encoding = params.get("encoding", "utf-8")
    decode_error = params.get("decode_error", "strict")

    def documents():
        for f in files:
            raw = f.read_bytes()
            try:
                yield raw.decode(encoding, decode_error)
            except UnicodeDecodeError as exc:
                lineno = raw[: exc.start].count(b"\n") + 1
                raise _error(f, lineno, f"cannot decode as {encoding} ({exc.reason})") from None

    vectorizer = CountVectorizer(input="content", **params)
    X = sp.csr_matrix(vectorizer.fit_transform(documents()))
    feature_names = np.asarray(vectorizer.get_feature_names_out(), dtype=object)
    descr = (
        f"Text files under {folder}: {X.shape[0]} documents, {X.shape[1]} words, "
        f"{int(X.sum())} tokens, vectorized by CountVectorizer."
    )
    return Bunch(
        data=X,
        feature_names=feature_names,
        filenames=np.array([str(f) for f in files]),
        vectorizer=vectorizer,
        DESCR=descr,
    )


def load_text_lines(path, **vectorizer_params):
    """Vectorize a text file with one document per line into a document-term count matrix.

    Line ``i`` (1-based; lines end at ``"\\n"``, a ``"\\r"`` before it is dropped) is row
    ``i - 1``; blank lines are empty documents, so the rows stay aligned with the lines.
    Gzip-compressed content is decompressed. Counting uses
    :class:`sklearn.feature_extraction.text.CountVectorizer`.

    Parameters
    ----------
    path : str or path-like
        The file.
    **vectorizer_params
        Parameters of :class:`~sklearn.feature_extraction.text.CountVectorizer`; the
        defaults here are ``stop_words="english"`` and ``dtype=np.float64``. ``encoding``
        (default ``"utf-8"``) and ``decode_error`` (default ``"strict"``) are used to read
        the file. ``input`` is set by this function and may not be given.

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: CSR count matrix ``(n_lines, n_words)``; ``feature_names``: object array of
        the words; ``vectorizer``: the fitted ``CountVectorizer``; ``DESCR``.

    Raises
    ------
    ValueError
        If the file contains NUL bytes (a binary file, not text) or cannot be decoded (the
        message names the line).
    """
    from sklearn.feature_extraction.text import CountVectorizer

    if "input" in vectorizer_params:
        raise ValueError("load_text_lines reads the file itself; do not pass 'input'")
    params = {"stop_words": "english", "dtype": np.float64}
    params.update(vectorizer_params)
    encoding = params.get("encoding", "utf-8")
    decode_error = params.get("decode_error", "strict")
    lines, path = _read_text_lines(path, encoding, decode_error)
    vectorizer = CountVectorizer(input="content", **params)
    X = sp.csr_matrix(vectorizer.fit_transform(lines))
    feature_names = np.asarray(vectorizer.get_feature_names_out(), dtype=object)
    descr = (
        f"Lines of {path}: {X.shape[0]} documents, {X.shape[1]} words, {int(X.sum())} tokens, "
        "vectorized by CountVectorizer."
    )
    return Bunch(data=X, feature_names=feature_names, vectorizer=vectorizer, DESCR=descr)


def _read_text_lines(path, encoding="utf-8", decode_error="strict"):
    """The documents of a one-document-per-line file, as :func:`load_text_lines` reads
    them, and the file's name."""
    raw, path = _read_source(path)
    if b"\0" in raw:
        lineno = raw[: raw.index(b"\0")].count(b"\n") + 1
        raise _error(path, lineno, "contains NUL bytes: a binary file, not text")
    try:
        text = raw.decode(encoding, decode_error)
    except UnicodeDecodeError as exc:
        lineno = raw[: exc.start].count(b"\n") + 1
        raise _error(path, lineno, f"cannot decode as {encoding} ({exc.reason})") from None
    # rows are the lines between "\n" (str.splitlines would also break at form feeds,
    # U+0085, U+2028, ... and shift every later row against its line)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines], path


def _read_text_files(path, encoding="utf-8", decode_error="strict"):
    """The documents of a folder of ``.txt`` files, as :func:`load_text_folder` reads
    them (sorted by path), and the files."""
    folder, files = _text_files(path)
    docs = []
    for f in files:
        raw = f.read_bytes()
        try:
            docs.append(raw.decode(encoding, decode_error))
        except UnicodeDecodeError as exc:
            lineno = raw[: exc.start].count(b"\n") + 1
            raise _error(f, lineno, f"cannot decode as {encoding} ({exc.reason})") from None
    return docs, files


def _text_files(path):
    """The folder and its ``.txt`` files (recursively, sorted), or a clear error."""
    folder = Path(os.fspath(path))
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a directory")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".txt")
    if not files:
        raise ValueError(f"{folder}: no .txt files found")
    return folder, files
