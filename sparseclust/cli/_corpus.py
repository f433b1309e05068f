# SPDX-License-Identifier: BSD-3-Clause
"""Reading the inputs of the commands: a corpus in one of its formats (UCI bag of words,
LDA-C, lines of text, a folder of text files) and a numeric matrix."""

import gzip
import zlib
from pathlib import Path

import numpy as np

from ._common import _LDAC_SUFFIXES, _LINES_SUFFIXES, _UCI_DOCWORD, CLIError


def _load_corpus(path, vocab=None, min_df=1, fmt="auto", max_df=1.0):
    """Returns ``(X csr, feature_names or None, description, vectorizer or None)``; bad
    input raises CLIError. ``vectorizer`` is the fitted CountVectorizer of text input."""
    try:
        return _load_corpus_unchecked(path, vocab, min_df, fmt, max_df)
    except _EmptyVocabulary as exc:
        raise CLIError(str(exc)) from None
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read corpus: {exc}") from None


class _EmptyVocabulary(ValueError):
    """The vocabulary filters left no word (or the input has no text)."""


def _df_text(value):
    return f"{value:g}" if isinstance(value, float) else str(value)


def _vectorize_text(load, p, what, min_df, max_df):
    """Run a text loader; an empty vocabulary becomes one line naming the input and the
    filters."""
    try:
        return load(p, min_df=min_df, max_df=max_df, decode_error="replace")
    except ValueError as exc:
        text = str(exc)
        if "empty vocabulary" in text:
            raise _EmptyVocabulary(
                f"{p}: {what} contain no words (only stop words, numbers, punctuation or "
                "one-letter tokens; English stop words are removed)") from None
        if "no terms remain" in text or "max_df corresponds to" in text:
            raise _EmptyVocabulary(
                f"{p}: the vocabulary filters removed every word (--min-df "
                f"{_df_text(min_df)}, --max-df {_df_text(max_df)}, English stop words); "
                "lower --min-df or raise --max-df") from None
        raise


def _head_bytes(path, n=8192):
    """The first ``n`` bytes of a file, decompressed when it is gzip-compressed."""
    with open(path, "rb") as fh:
        head = fh.read(n)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(n)
        except (OSError, EOFError, zlib.error):
            pass  # the reader reports the broken archive
    return head


def _refuse_binary(path):
    """A corpus file must be text: NUL bytes (in its first 8 KiB) mean a binary file."""
    if b"\0" in _head_bytes(path):
        raise CLIError(
            f"{path}: this looks like a binary file (it contains NUL bytes), not a text "
            "corpus; expected a UCI docword.NAME.txt[.gz] file, an LDA-C file, a text file "
            "with one document per line, or a folder of .txt files"
        )


def _detect_format(p):
    if p.is_dir():
        return "folder"
    if _UCI_DOCWORD.match(p.name) is not None:
        return "uci"
    name = p.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(_LDAC_SUFFIXES):
        return "ldac"
    if name.endswith(_LINES_SUFFIXES):
        return "lines"
    raise CLIError(
        f"{p}: unrecognised corpus format; expected a UCI docword.NAME.txt[.gz] file, "
        f"an LDA-C file ({', '.join(_LDAC_SUFFIXES)}), a text file with one document per "
        "line (.txt) or a folder of .txt files (or give --format)"
    )


def _load_corpus_unchecked(path, vocab, min_df, fmt, max_df=1.0):
    from sparseclust import datasets

    if path is None:
        if vocab is not None:
            raise CLIError("--vocab needs a corpus PATH")
        if fmt != "auto" or min_df != 1 or max_df != 1.0:
            raise CLIError("--format, --min-df and --max-df describe a corpus PATH; the "
                           "bundled KOS corpus takes none of them")
        bunch = datasets.load_kos()
        return bunch.data, bunch.feature_names, "KOS blog posts (bundled)", None

    p = Path(path)
    if not p.exists():
        raise CLIError(f"{path}: no such file or directory")
    if vocab is not None and not Path(vocab).is_file():
        raise CLIError(f"{vocab}: vocabulary file not found")
    fmt = _detect_format(p) if fmt == "auto" else fmt
    if (fmt == "folder") != p.is_dir():
        raise CLIError(f"{path}: --format {fmt} needs a {'folder' if fmt == 'folder' else 'file'}")

    if fmt == "folder":
        if vocab is not None:
            raise CLIError("--vocab is not used with a folder of text files")
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() == ".txt")
        if not files:
            raise CLIError(f"{p}: the folder holds no .txt files: no documents")
        for f in files:
            _refuse_binary(f)
        if all(f.stat().st_size == 0 for f in files):
            raise CLIError(f"{p}: all {len(files)} .txt files are empty: no text to fit")
        bunch = _vectorize_text(datasets.load_text_folder, p, f"the {len(files)} .txt files",
                                min_df, max_df)
        return bunch.data, bunch.feature_names, f"text files under {p}", bunch.vectorizer

    if not _head_bytes(p, 1 << 16).strip():
        raise CLIError(f"{p}: the file is empty: no documents")
    _refuse_binary(p)
    if fmt == "lines":
        if vocab is not None:
            raise CLIError("--vocab is not used with a text file (the words are the vocabulary)")
        bunch = _vectorize_text(datasets.load_text_lines, p, "its lines", min_df, max_df)
        return (bunch.data, bunch.feature_names,
                f"lines of {p.name} (one document per line)", bunch.vectorizer)
    if (min_df, max_df) != (1, 1.0):
        raise CLIError("--min-df and --max-df filter the words of text input (a folder or "
                       "one document per line), not of a word-id corpus")

    if vocab is not None:
        _refuse_binary(vocab)
    if fmt == "uci":
        m = _UCI_DOCWORD.match(p.name)
        if vocab is None and m is not None:
            sibling = p.with_name(f"vocab.{m.group('name')}.txt")
            vocab = sibling if sibling.is_file() else None
        bunch = datasets.load_uci_bow(p, vocab)
        return bunch.data, bunch.feature_names, f"UCI bag of words {p.name}", None
    bunch = datasets.load_ldac(p, vocab)
    return bunch.data, bunch.feature_names, f"LDA-C {p.name}", None


def _missing_vocabulary_hint(path, fmt):
    """Why the corpus has no vocabulary, for the warning."""
    p = Path(path)
    m = _UCI_DOCWORD.match(p.name)
    if m is not None and fmt in ("auto", "uci"):
        return f"no --vocab and no vocab.{m.group('name')}.txt beside {p.name}"
    return "no --vocab given"


def _load_matrix(path):
    """A finite 2-D float64 matrix from a .npy or .csv file, or CLIError."""
    p = Path(path)
    if not p.is_file():
        raise CLIError(f"{path}: no such file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".npy":
            X = np.load(p, allow_pickle=False)
        elif suffix in (".csv", ".txt"):
            if not _head_bytes(p, 1 << 16).strip():
                raise CLIError(f"{p}: the file is empty: no rows")
            try:
                X = np.loadtxt(p, delimiter=",", ndmin=2)
            except ValueError:
                X = np.loadtxt(p, delimiter=",", ndmin=2, skiprows=1)
        else:
            raise CLIError(f"{p}: expected a .npy or .csv file")
    except CLIError:
        raise
    except (ValueError, OSError) as exc:
        raise CLIError(f"cannot read {p}: {exc}") from None
    if X.ndim != 2 or X.size == 0:
        raise CLIError(f"{p}: expected a non-empty 2-D matrix, got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise CLIError(f"{p}: expected real numbers, got {X.dtype}")
    X = np.asarray(X, dtype=np.float64)
    if not np.all(np.isfinite(X)):
        raise CLIError(f"{p}: contains NaN or infinite values")
    return X
