# SPDX-License-Identifier: BSD-3-Clause
"""The ``apply`` command: the document-topic proportions of new documents under a model saved
by ``topics --save-model``."""

from pathlib import Path

import numpy as np

from ._common import _DOC_TOPIC_SUFFIXES, _UCI_DOCWORD, CLIError, _check_writable, _save_doc_topics
from ._corpus import _detect_format, _head_bytes, _refuse_binary


def _load_saved_topic_model(path):
    """``(pipeline or None, topic model)`` of a file written by ``topics --save-model``."""
    from sklearn.pipeline import Pipeline

    import sparseclust

    if not Path(path).is_file():
        raise CLIError(f"{path}: no such model file")
    try:
        obj = sparseclust.load(path)
    except (ValueError, OSError, ImportError) as exc:
        raise CLIError(f"cannot load the model: {exc}") from None

    def is_topic_model(est):
        return hasattr(est, "components_") and hasattr(est, "transform") and hasattr(
            est, "topic_word_prior_")

    if isinstance(obj, Pipeline) and list(obj.named_steps) == ["vectorizer", "model"] \
            and is_topic_model(obj.named_steps["model"]):
        return obj, obj.named_steps["model"]
    if is_topic_model(obj):  # saved by an earlier release: no vocabulary
        return None, obj
    raise CLIError(
        f"{path} holds a {type(obj).__name__}, not a topic model saved by 'sparseclust "
        "topics --save-model'")


def _run_apply(args):
    pipe, model = _load_saved_topic_model(args.model)
    if Path(args.out).suffix.lower() not in _DOC_TOPIC_SUFFIXES:
        raise CLIError(f"--out {args.out}: expected a file ending in "
                       f"{', '.join(_DOC_TOPIC_SUFFIXES)}")
    _check_writable(args.out)
    p = Path(args.docs)
    if not p.exists():
        raise CLIError(f"{args.docs}: no such file or directory")
    fmt = _detect_format(p) if args.format == "auto" else args.format
    if (fmt == "folder") != p.is_dir():
        raise CLIError(f"{p}: --format {fmt} needs a {'folder' if fmt == 'folder' else 'file'}")
    vectorizer = None if pipe is None else pipe.named_steps["vectorizer"]
    n_words = int(model.components_.shape[1])
    dropped = None
    try:
        if fmt in ("folder", "lines"):
            X = _count_text(args, p, fmt, model, vectorizer)
        else:
            X, dropped = _count_word_ids(args, p, fmt, vectorizer, n_words)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {args.docs}: {exc}") from None
    if X.shape[0] == 0:
        raise CLIError(f"{p}: no documents")
    theta = np.asarray(model.transform(X), dtype=np.float64)
    try:
        _save_doc_topics(args.out, theta)
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc}") from None
    if not args.quiet:
        _print_applied(args, X, theta, n_words, dropped)
    return 0


def _count_text(args, p, fmt, model, vectorizer):
    """The counts of a folder of text files or a file of lines, by the model's vectorizer."""
    from sklearn.feature_extraction.text import CountVectorizer

    from sparseclust.datasets._bow import _read_text_files, _read_text_lines

    if args.vocab is not None:
        raise CLIError("--vocab is only used with a UCI or LDA-C DOCS file")
    if vectorizer is None:
        raise CLIError(
            f"{args.model} holds a bare {type(model).__name__} without its vocabulary "
            "(saved by an earlier release): it cannot count the words of text; refit "
            "it with 'sparseclust topics --save-model'")
    if not isinstance(vectorizer, CountVectorizer):
        raise CLIError(
            f"{args.model} was fitted on word ids (a UCI or LDA-C corpus): it cannot "
            "count the words of text; give DOCS as a UCI or LDA-C file")
    read = _read_text_files if fmt == "folder" else _read_text_lines
    if fmt == "lines" and not _head_bytes(p, 1 << 16).strip():
        raise CLIError(f"{p}: the file is empty: no documents")
    if fmt == "folder":
        files = [f for f in p.rglob("*") if f.is_file() and f.suffix.lower() == ".txt"]
        if not files:
            raise CLIError(f"{p}: the folder holds no .txt files: no documents")
        for f in files:
            _refuse_binary(f)
    texts, _ = read(p, vectorizer.encoding, vectorizer.decode_error)
    return vectorizer.transform(texts)


def _count_word_ids(args, p, fmt, vectorizer, n_words):
    """The counts of a UCI or LDA-C file in the model's columns (its words mapped through the
    model's vocabulary when both have one), and the tokens of unknown words dropped."""
    from sparseclust import datasets

    if args.vocab is not None and not Path(args.vocab).is_file():
        raise CLIError(f"{args.vocab}: vocabulary file not found")
    if not _head_bytes(p, 1 << 16).strip():
        raise CLIError(f"{p}: the file is empty: no documents")
    _refuse_binary(p)
    vocab = args.vocab
    m = _UCI_DOCWORD.match(p.name)
    if fmt == "uci" and vocab is None and m is not None:
        sibling = p.with_name(f"vocab.{m.group('name')}.txt")
        vocab = sibling if sibling.is_file() else None
    load = datasets.load_uci_bow if fmt == "uci" else datasets.load_ldac
    bunch = load(p, vocab)
    X = bunch.data.tocsr()
    dropped = None
    if bunch.feature_names is not None and vectorizer is not None:
        from .._saved import map_columns

        vocabulary = {w: j for j, w in enumerate(
            np.asarray(vectorizer.get_feature_names_out(), dtype=str).tolist())}
        X, n_known, dropped = map_columns(X, bunch.feature_names, vocabulary)
        if n_known == 0:
            raise CLIError(f"{p}: none of its {len(bunch.feature_names)} words is in "
                           f"the model's vocabulary ({n_words} words)")
    elif X.shape[1] > n_words:
        raise CLIError(
            f"{p} has {X.shape[1]} word ids, the model {n_words}; give its --vocab "
            "to map its words onto the model's")
    elif X.shape[1] < n_words:  # the same ids, the last ones unused
        X = _pad_columns(X, n_words)
    return X, dropped


def _print_applied(args, X, theta, n_words, dropped):
    """The summary of the apply command."""
    n_docs, K = theta.shape
    tokens = float(X.sum())
    empty = int(np.count_nonzero(np.asarray(X.sum(axis=1)).ravel() == 0))
    print(f"{n_docs} documents, {tokens:.0f} tokens in the model's vocabulary of "
          f"{n_words} words ({empty} documents without any), {K} topics")
    if dropped:
        print(f"{dropped:.0f} tokens of words the model does not know were dropped")
    mean = theta.mean(axis=0)
    top = np.argsort(-mean, kind="stable")[:5]
    print("largest mean proportions: "
          + ", ".join(f"topic {k} {100 * mean[k]:.1f}%" for k in top))
    print(f"wrote the {n_docs} x {K} document-topic matrix to {args.out}")


def _pad_columns(X, n):
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n))
