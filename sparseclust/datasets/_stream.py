# SPDX-License-Identifier: BSD-3-Clause
"""Out-of-core corpora: CSR minibatches streamed from a file or a folder.

:func:`stream_uci_bow`, :func:`stream_ldac` and :func:`stream_text_folder` return a
:class:`CorpusStream`, an iterable of document-term count matrices of ``batch_size``
consecutive documents each (the last one may be shorter). The source is read in blocks of
about a megabyte of complete lines (or ``batch_size`` files), so memory does not grow with
the corpus; iterating again reads the source again, from the start. Every minibatch has the
corpus's full vocabulary as columns, so ``partial_fit`` can be called on each::

    for X_batch in stream_uci_bow("docword.nytimes.txt.gz", batch_size=1000):
        model.partial_fit(X_batch)

The blocks are parsed with the same compiled scanner as the whole-file loaders
(:mod:`._bow`), and with the same line-by-line parser for the error message (file name and
1-based line) when a block does not pass.

:meth:`CorpusStream.save` writes any such stream once as uncompressed binary minibatches, and
:func:`stream_npz` reads them back: memoized training reads its stream at every pass, and a
saved stream skips the decompression and parsing of a text source at each of them.
"""

import gzip
import os
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._kernels import _text_scan
from ._bow import (
    _MAX_DIGITS,
    _UCI_HEADER,
    _UNSIGNED,
    _check_dtype,
    _counts_matrix,
    _error,
    _gzip,
    _gzip_error,
    _gzip_errors,
    _parse_ldac_fast,
    _parse_ldac_slow,
    _parse_uci_slow,
    _read_vocab,
    _show,
    _text_files,
)
from ._read_ahead import read_ahead
from ._saved_batches import (
    batch_name,
    check_files,
    new_directory,
    read_manifest,
    reading,
    write_directory,
)

__all__ = ["CorpusStream", "stream_ldac", "stream_npz", "stream_text_folder", "stream_uci_bow"]

#: bytes read at a time
_BLOCK_BYTES = 1 << 20


class CorpusStream:
    """A corpus read minibatch by minibatch; iterate it (again) to read it (again).

    Attributes
    ----------
    n_features : int
        Number of columns (vocabulary size) of every minibatch.
    n_documents : int or None
        Number of documents when the source declares it (UCI header, number of files),
        else None.
    batch_size : int
    feature_names : ndarray of str or None
    source : str
    prefetch : bool
        Read the next minibatch in a background thread while the current one is in use
        (default True): the file's reading and parsing then overlap with training. The
        minibatches, their order and the errors are the same either way; set it to False to
        read in the calling thread.
    """

    def __init__(self, make_iter, *, n_features, n_documents, batch_size, feature_names,
                 source):
        self._make_iter = make_iter
        self.n_features = n_features
        self.n_documents = n_documents
        self.batch_size = batch_size
        self.feature_names = feature_names
        self.source = source
        self.prefetch = True

    def __iter__(self):
        return read_ahead(self._make_iter) if self.prefetch else self._make_iter()

    def __repr__(self):
        return (f"CorpusStream({self.source!r}, n_features={self.n_features}, "
                f"n_documents={self.n_documents}, batch_size={self.batch_size})")

    def save(self, directory):
        """Read the stream once and write its minibatches to ``directory`` in binary form.

        Each minibatch becomes an uncompressed ``scipy.sparse`` ``.npz`` file of its CSR
        arrays (about ``itemsize + 4`` bytes an entry), ``batch-000000.npz``,
        ``batch-000001.npz``, ..., beside a manifest (``corpus.json``: the number of words and
        documents, the rows, entries and dtype of each minibatch, the vocabulary as strings).
        Reading one back is a copy of its arrays, with no decompression or parsing, so a
        corpus that several passes or several fits read (memoized training, a grid search) is
        parsed once, here. The saved stream yields the same minibatches, in the same order and
        dtype, as ``scipy.sparse.csr_matrix``.

        Parameters
        ----------
        directory : str or path-like
            Created (with its parents); it must not exist, or be an empty directory. The files
            are written to a temporary directory beside it, renamed to ``directory`` when
            complete: a save that fails or is interrupted leaves nothing at ``directory``.

        Returns
        -------
        stream : CorpusStream
            ``stream_npz(directory)``: the saved minibatches.

        Raises
        ------
        FileExistsError
            When ``directory`` is a file, a symbolic link or a directory that holds files,
            checked before reading and again when the finished corpus is renamed (another
            save may have created it meanwhile).
        ValueError
            When a minibatch is not a 2-D matrix over the stream's ``n_features`` words, and
            any error raised while reading the source.
        """
        target = new_directory(directory, "CorpusStream.save")
        n_features, batch_size = int(self.n_features), int(self.batch_size)
        names = (None if self.feature_names is None
                 else [str(w) for w in self.feature_names])

        def fill(tmp):
            rows, nnz, dtypes = [], [], []
            with reading(self) as it:
                for i, Xb in enumerate(it):
                    shape = Xb.shape if sp.issparse(Xb) else np.shape(Xb)
                    if len(shape) != 2 or shape[1] != n_features:
                        raise ValueError(f"{self.source}: minibatch {i} has shape "
                                         f"{tuple(shape)}, expected (n, {n_features})")
                    Xb = sp.csr_matrix(Xb)
                    sp.save_npz(tmp / batch_name(i, "npz"), Xb, compressed=False)
                    rows.append(int(Xb.shape[0]))
                    nnz.append(int(Xb.nnz))
                    dtypes.append(str(Xb.dtype))
            return dict(format=_NPZ_FORMAT, version=_NPZ_VERSION, n_features=n_features,
                        n_documents=int(sum(rows)), batch_size=batch_size, rows=rows,
                        nnz=nnz, dtypes=dtypes, source=str(self.source),
                        feature_names=names)

        write_directory(target, fill, _NPZ_MANIFEST)
        return stream_npz(target)


def _check_batch_size(batch_size):
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size,
                                                                  (int, np.integer)):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size}")
    return int(batch_size)


def _open(path):
    """Binary file handle; gzip content (magic bytes ``1f 8b``) is decompressed."""
    fh = open(path, "rb")  # noqa: SIM115 - returned to the caller's with-statement
    magic = fh.read(2)
    fh.seek(0)
    if magic == b"\x1f\x8b":
        fh.close()
        return _gzip().open(path, "rb")
    return fh


def _read_error(fh, name, exc):
    """The ValueError for a failed read: a broken gzip archive is named as such (the message
    of the whole-file loaders)."""
    if isinstance(fh, gzip.GzipFile):
        return _gzip_error(name, exc)
    return ValueError(f"{name}: read failed ({exc})")


def _line_blocks(fh, lineno, block_bytes=None):
    """Blocks of complete lines from ``fh``: yields ``(body, first line number)``; about
    ``block_bytes`` (default :data:`_BLOCK_BYTES`, read at the call) are read at a time.

    A block ends at a line followed by a non-blank one, so blank lines inside a block are
    never trailing lines of the file; the last block has trailing whitespace removed (and
    is not yielded when only whitespace is left).
    """
    block_bytes = _BLOCK_BYTES if block_bytes is None else block_bytes
    rest = b""
    while True:
        try:
            chunk = fh.read(block_bytes)
        except _gzip_errors() as exc:
            raise _read_error(fh, getattr(fh, "name", "file"), exc) from None
        if not chunk:
            rest = rest.rstrip()
            if rest:
                yield rest, lineno
            return
        buf = rest + chunk
        end = len(buf.rstrip())
        cut = buf.rfind(b"\n", 0, end)
        if cut < 0:
            rest = buf
            continue
        body, rest = buf[:cut], buf[cut + 1:]
        yield body, lineno
        lineno += body.count(b"\n") + 1


# --------------------------------------------------------------------------------- UCI


def _uci_header(fh, name):
    header = []
    for i, what in enumerate(_UCI_HEADER):
        try:
            line = fh.readline()
        except _gzip_errors() as exc:
            raise _read_error(fh, name, exc) from None
        token = line.strip()
        if not line:
            raise _error(name, i + 1, f"bad header: expected the {what}, got end of file")
        if _UNSIGNED.fullmatch(token) is None or len(token) > _MAX_DIGITS:
            raise _error(name, i + 1, f"bad header: expected the {what} as a single "
                                      f"non-negative integer, got {_show(line)!r}")
        header.append(int(token))
    return header


def _uci_block(body, name, D, W, remaining, lineno, declared):
    """Entries (0-based docs, words, counts) of a block of UCI lines that the compiled pass
    refused, with the 0-based line of each: the line-by-line parser raises on a malformed
    line, and a block it accepts is out of docID order, which the caller reports at its
    line. ``remaining`` of the ``declared`` (header) NNZ entries are still allowed."""
    docs, words, counts = _parse_uci_slow(body, name, D, W, remaining, first_line=lineno,
                                          check_total=False, declared=declared)
    # the slow parser does not report line numbers: recover them for the order check
    lines = np.array([k for k, ln in enumerate(body.split(b"\n")) if ln.split()],
                     dtype=np.int64)
    return docs, words, counts, lines


def stream_uci_bow(docword_path, vocab_path=None, batch_size=1000, dtype=np.float64):
    """Stream a UCI "Bag of Words" corpus (``docword`` file, gzip or not) in minibatches.

    Minibatch b holds documents ``b * batch_size`` to ``(b + 1) * batch_size - 1`` (0-based,
    i.e. docIDs ``b * batch_size + 1`` ... in the file), documents without entries as empty
    rows, over all ``W`` words: the rows of :func:`load_uci_bow`'s matrix, ``batch_size``
    at a time. The entries must be ordered by docID (as in the UCI files); a repeated
    ``(docID, wordID)`` pair is summed.

    Parameters
    ----------
    docword_path : str or path-like
    vocab_path : str or path-like, default=None
        Vocabulary (one word a line, exactly ``W`` words), read once for ``feature_names``.
    batch_size : int, default=1000
    dtype : numeric dtype, default=np.float64

    Returns
    -------
    stream : CorpusStream
        Yields CSR matrices ``(n, W)``; ``n_documents`` is ``D`` from the header.

    Raises
    ------
    ValueError
        While iterating, on malformed input (file name and 1-based line, as
        :func:`load_uci_bow`), on entries out of docID order, and when the number of
        entries differs from the header's ``NNZ``.
    """
    batch_size = _check_batch_size(batch_size)
    dtype = _check_dtype(dtype)
    path = Path(os.fspath(docword_path))
    name = str(path)
    with _open(path) as fh:
        D, W, nnz = _uci_header(fh, name)
    feature_names = None
    if vocab_path is not None:
        feature_names, vocab_name = _read_vocab(vocab_path)
        if feature_names.size != W:
            raise ValueError(f"{vocab_name}: the vocabulary has {feature_names.size} words, "
                             f"but {name} (line 2) declares W={W}")

    def batches():
        n_batches = -(-D // batch_size)
        with _open(path) as fh:
            _uci_header(fh, name)
            b = 0  # the minibatch being filled
            pend = []  # entry arrays of minibatch b
            seen = 0
            last_doc = -1
            last_line = 3
            for body, lineno in _line_blocks(fh, 4):
                fast = _text_scan.scan_uci(np.frombuffer(body, dtype=np.uint8), D, W,
                                           last_doc, True, nnz - seen, _MAX_DIGITS)
                if fast is not None:
                    docs, words, counts, last = fast
                    if docs.size == 0:
                        continue
                else:  # the generic parse names the fault
                    docs, words, counts, line = _uci_block(body, name, D, W, nnz - seen,
                                                           lineno, nnz)
                    if docs.size == 0:
                        continue
                    # entries must come in docID order to be streamed
                    prev = np.concatenate([[last_doc], docs[:-1]])
                    bad = np.flatnonzero(docs < prev)
                    if bad.size:
                        raise _error(name, lineno + int(line[bad[0]]),
                                     f"docID {docs[bad[0]] + 1} after docID "
                                     f"{prev[bad[0]] + 1}: a streamed file must list its "
                                     "entries by increasing docID")
                    last = int(line[-1])
                seen += docs.size
                last_doc = int(docs[-1])
                last_line = lineno + int(last)
                which = docs // batch_size
                start = 0
                while start < docs.size:
                    stop = int(np.searchsorted(which, b, side="right"))
                    if stop > start:
                        pend.append((docs[start:stop], words[start:stop], counts[start:stop]))
                        start = stop
                    if start < docs.size:
                        yield _uci_batch(pend, b, batch_size, D, W, dtype, name)
                        pend = []
                        b += 1
            if seen != nnz:
                raise _error(name, last_line + 1, f"file ends after {seen} entries, but the "
                                                  f"header (line 3) declares NNZ={nnz}")
            while b < n_batches:
                yield _uci_batch(pend, b, batch_size, D, W, dtype, name)
                pend = []
                b += 1

    return CorpusStream(batches, n_features=W, n_documents=D, batch_size=batch_size,
                        feature_names=feature_names, source=name)


def _uci_batch(pend, b, batch_size, D, W, dtype, name):
    n = min(batch_size, D - b * batch_size)
    if pend:
        docs = np.concatenate([p[0] for p in pend]) - b * batch_size
        words = np.concatenate([p[1] for p in pend])
        counts = np.concatenate([p[2] for p in pend])
    else:
        docs = words = counts = np.empty(0, dtype=np.int64)
    return _counts_matrix(docs, words, counts, (n, W), dtype, name)


# ------------------------------------------------------------------------------- LDA-C


def stream_ldac(path, vocab_path=None, n_features=None, batch_size=1000, dtype=np.float64):
    """Stream an LDA-C corpus (one document ``N id:count ...`` a line) in minibatches.

    Parameters
    ----------
    path : str or path-like
        The LDA-C file (gzip or not).
    vocab_path : str or path-like, default=None
        Vocabulary, word ``v`` (0-based) on line ``v + 1``; gives ``n_features``.
    n_features : int, default=None
        Number of columns; required without ``vocab_path`` (a stream cannot look ahead for
        the largest word id). Word ids must be below it.
    batch_size : int, default=1000
    dtype : numeric dtype, default=np.float64

    Returns
    -------
    stream : CorpusStream
        Yields CSR matrices ``(n, n_features)``, ``batch_size`` documents (lines) each: the
        rows of :func:`load_ldac`'s matrix. ``n_documents`` is None.

    Raises
    ------
    ValueError
        Without ``n_features`` or a vocabulary, when they disagree, and while iterating on
        malformed lines (file name and 1-based line, as :func:`load_ldac`).
    """
    batch_size = _check_batch_size(batch_size)
    dtype = _check_dtype(dtype)
    feature_names = None
    if n_features is not None:
        if isinstance(n_features, (bool, np.bool_)) or not isinstance(
                n_features, (int, np.integer)) or n_features < 0:
            raise ValueError(f"n_features must be a non-negative integer, got {n_features!r}")
        n_features = int(n_features)
    if vocab_path is not None:
        feature_names, vocab_name = _read_vocab(vocab_path)
        if n_features is not None and n_features != feature_names.size:
            raise ValueError(f"{vocab_name}: the vocabulary has {feature_names.size} words, "
                             f"but n_features={n_features}")
        n_features = feature_names.size
    if n_features is None:
        raise ValueError("stream_ldac needs n_features or vocab_path: the number of columns "
                         "must be known before the first minibatch")
    path = Path(os.fspath(path))
    name = str(path)
    if not path.is_file():
        raise ValueError(f"{name} is not a file")

    def batches():
        pend_docs, pend_ids, pend_counts, n_pend = [], [], [], 0
        with _open(path) as fh:
            for body, lineno in _line_blocks(fh, 1):
                n_lines = body.count(b"\n") + 1
                ent = _parse_ldac_fast(body, n_lines)
                if ent is not None and ent[1].size and ent[1].max() >= n_features:
                    ent = None
                if ent is None:
                    ent = _parse_ldac_slow(body, name, n_features, first_line=lineno)
                docs, ids, counts = ent
                # split the block's documents into the current and further minibatches
                docs = docs + n_pend
                total = n_pend + n_lines
                start = 0
                yielded = False
                for lo in range(0, total - batch_size + 1, batch_size):
                    stop = int(np.searchsorted(docs, lo + batch_size))
                    pend_docs.append(docs[start:stop] - lo)
                    pend_ids.append(ids[start:stop])
                    pend_counts.append(counts[start:stop])
                    yield _counts_matrix(np.concatenate(pend_docs), np.concatenate(pend_ids),
                                         np.concatenate(pend_counts),
                                         (batch_size, n_features), dtype, name)
                    pend_docs, pend_ids, pend_counts = [], [], []
                    start = stop
                    yielded = True
                done = (total // batch_size) * batch_size
                if yielded:
                    pend_docs, pend_ids, pend_counts = [], [], []
                pend_docs.append(docs[start:] - done)
                pend_ids.append(ids[start:])
                pend_counts.append(counts[start:])
                n_pend = total - done
        if n_pend:
            yield _counts_matrix(np.concatenate(pend_docs), np.concatenate(pend_ids),
                                 np.concatenate(pend_counts), (n_pend, n_features), dtype,
                                 name)

    return CorpusStream(batches, n_features=n_features, n_documents=None,
                        batch_size=batch_size, feature_names=feature_names, source=name)


# ------------------------------------------------------------------------- text folder


def stream_text_folder(path, vocabulary, batch_size=1000, **vectorizer_params):
    """Stream a folder of ``.txt`` files (one document each) counted over a fixed vocabulary.

    Files are found recursively and ordered by path, as in :func:`load_text_folder`; each
    minibatch reads ``batch_size`` files and counts them with a
    :class:`~sklearn.feature_extraction.text.CountVectorizer` whose vocabulary is fixed, so
    every minibatch has the same columns. With ``vocabulary =
    load_text_folder(path).feature_names`` (and the same vectorizer parameters) the
    minibatches are the rows of :func:`load_text_folder`'s matrix.

    Parameters
    ----------
    path : str or path-like
    vocabulary : sequence of str or mapping str -> int
        The words (columns), in order, or a word -> column mapping.
    batch_size : int, default=1000
    **vectorizer_params
        As in :func:`load_text_folder` (defaults ``stop_words="english"``,
        ``dtype=np.float64``; ``encoding``, ``decode_error``); not ``input`` or
        ``vocabulary``.

    Returns
    -------
    stream : CorpusStream
        ``n_documents`` is the number of files; ``feature_names`` the vocabulary.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    batch_size = _check_batch_size(batch_size)
    for bad in ("input", "vocabulary"):
        if bad in vectorizer_params:
            raise ValueError(f"stream_text_folder sets {bad!r} itself; do not pass it")
    folder, files = _text_files(path)
    params = {"stop_words": "english", "dtype": np.float64}
    params.update(vectorizer_params)
    encoding = params.get("encoding", "utf-8")
    decode_error = params.get("decode_error", "strict")
    vectorizer = CountVectorizer(input="content", vocabulary=vocabulary, **params)
    vectorizer.fit([])  # validates the fixed vocabulary
    feature_names = np.asarray(vectorizer.get_feature_names_out(), dtype=object)

    def read(f):
        raw = f.read_bytes()
        try:
            return raw.decode(encoding, decode_error)
        except UnicodeDecodeError as exc:
            lineno = raw[: exc.start].count(b"\n") + 1
            raise _error(f, lineno, f"cannot decode as {encoding} ({exc.reason})") from None

    def batches():
        for lo in range(0, len(files), batch_size):
            texts = [read(f) for f in files[lo:lo + batch_size]]
            yield sp.csr_matrix(vectorizer.transform(texts))

    return CorpusStream(batches, n_features=feature_names.size, n_documents=len(files),
                        batch_size=batch_size, feature_names=feature_names, source=str(folder))


# ------------------------------------------------------------------------- saved stream

_NPZ_FORMAT = "sparseclust.CorpusStream"
_NPZ_VERSION = 1
_NPZ_MANIFEST = "corpus.json"


def stream_npz(directory):
    """Stream a corpus written by :meth:`CorpusStream.save`.

    Minibatch ``i`` is the file ``batch-<i>.npz`` of ``directory`` (``i`` zero-padded to six
    digits), read with :func:`scipy.sparse.load_npz`: the minibatches of the stream that was
    saved, in its order and dtypes, over the same words, as ``scipy.sparse.csr_matrix``.

    Parameters
    ----------
    directory : str or path-like
        A directory written by :meth:`CorpusStream.save`.

    Returns
    -------
    stream : CorpusStream
        ``n_documents`` is the number of documents saved; ``batch_size`` and
        ``feature_names`` are those of the saved stream, ``source`` is ``directory``.

    Raises
    ------
    ValueError
        When ``directory`` holds no saved corpus (its ``corpus.json``) or an incomplete
        manifest, a minibatch file is missing, or, while iterating, a file cannot be read or
        does not hold the rows, words, entries and dtype the manifest declares.
    """
    keys = ("n_features", "n_documents", "batch_size", "rows", "nnz", "dtypes")
    folder, name, manifest = read_manifest(directory, _NPZ_MANIFEST, _NPZ_FORMAT,
                                           _NPZ_VERSION, keys, "corpus", "CorpusStream.save")
    if not len(manifest["rows"]) == len(manifest["nnz"]) == len(manifest["dtypes"]):
        raise ValueError(f"{name}/{_NPZ_MANIFEST}: incomplete manifest")
    rows, n_features = manifest["rows"], int(manifest["n_features"])
    files = check_files(folder, name, len(rows), "npz")
    names = manifest.get("feature_names")
    feature_names = None if names is None else np.asarray(names, dtype=object)
    declared = list(zip(files, rows, manifest["nnz"], manifest["dtypes"], strict=True))

    def batches():
        for f, n, nz, dt in declared:
            try:
                Xb = sp.load_npz(f)
            except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
                raise ValueError(f"{f}: cannot read the saved minibatch ({exc})") from None
            if Xb.shape != (n, n_features) or Xb.nnz != nz or str(Xb.dtype) != dt:
                raise ValueError(f"{f}: holds a {Xb.shape[0]} x {Xb.shape[1]} {Xb.dtype} "
                                 f"matrix of {Xb.nnz} entries, the manifest declares "
                                 f"{n} x {n_features} {dt} of {nz}")
            yield sp.csr_matrix(Xb)

    return CorpusStream(batches, n_features=n_features,
                        n_documents=int(manifest["n_documents"]),
                        batch_size=int(manifest["batch_size"]), feature_names=feature_names,
                        source=name)
