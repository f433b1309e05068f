# SPDX-License-Identifier: BSD-3-Clause
"""Command-line interface: ``sparseclust topics [PATH] ...``, ``sparseclust apply MODEL DOCS``,
``sparseclust mixture X -k K``.

Fits :class:`sparseclust.SparseLDA` (or, with ``--model hdp``, :class:`sparseclust.HDPTopicModel`,
which learns the number of topics, or with ``--model sem``, :class:`sparseclust.StochasticEMLDA`,
LDA by parallel stochastic EM) to a corpus, then prints each topic's top words, the
held-out document-completion score (Hughes & Sudderth 2016, App. E) on a fraction of the
documents kept out of training beside the score of a unigram model on the same held-out
words, the mean UMass coherence (Mimno et al. 2011) on the training documents, whether
training converged, and timings; on request also the left-to-right held-out log-likelihood
(Wallach et al. 2009; ``--left-to-right R``) and NPMI coherence (Lau, Newman & Baldwin 2014;
``--npmi``); optionally saves the model and the document-topic matrix.
See ``doc/cli.md``.
"""

import argparse
import gzip
import json
import os
import re
import sys
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

__all__ = ["main"]

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


# ---------------------------------------------------------------------------------------
# argument parsing


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to 2**32 - 1, got {text!r}")
    return value


def _nonzero_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value == 0:
        raise argparse.ArgumentTypeError("expected a non-zero integer (-1 = all CPUs)")
    return value


def _nonnegative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0 or not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return value


def _max_df(text):
    """A fraction of the documents in (0, 1] (a number with a point), or a count >= 1."""
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a fraction in (0, 1] or a document count >= 1, got {text!r}") from None
    ok = 0 < value <= 1 if isinstance(value, float) else value >= 1
    if not ok:
        raise argparse.ArgumentTypeError(
            f"expected a fraction in (0, 1] or a document count >= 1, got {text!r}")
    return value


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="sparseclust",
        description="Fast clustering and topic models through sparse posteriors.",
    )
    from sparseclust import __version__

    parser.add_argument("--version", action="version", version=f"sparseclust {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    t = sub.add_parser(
        "topics",
        help="fit an L-sparse LDA topic model to a corpus and report its topics and scores",
        description=(
            "Fit SparseLDA to a corpus; print each topic's top words, the held-out "
            "document-completion log-likelihood per token on documents kept out of "
            "training, the mean UMass coherence on the training documents, and timings."
        ),
    )
    t.add_argument(
        "path",
        nargs="?",
        metavar="PATH",
        help=(
            "corpus: a UCI bag-of-words file docword.NAME.txt[.gz] (vocabulary from --vocab "
            "or the sibling vocab.NAME.txt), an LDA-C file (.ldac, .lda-c, .dat; vocabulary "
            "from --vocab), a text file with one document per line (.txt), or a folder of "
            ".txt files (one document each). Default: the bundled KOS blog corpus."
        ),
    )
    t.add_argument(
        "--format",
        choices=_FORMATS,
        default="auto",
        help="corpus format (default auto: from the file name, see PATH)",
    )
    t.add_argument("--vocab", metavar="FILE", help="vocabulary file, one word per line")
    t.add_argument(
        "--model",
        choices=("lda", "hdp", "sem"),
        default="lda",
        help="lda: SparseLDA with K topics (default); hdp: HDPTopicModel, which learns the "
        "number of topics starting from K (--n-topics is then its truncation); sem: "
        "StochasticEMLDA, one sampled topic per token and sweep (--max-iter sweeps; --L "
        "does not apply; --algorithm stochastic runs its online minibatch steps)",
    )
    t.add_argument(
        "--n-topics", "-k", type=_positive_int, default=None,
        help="number of topics K (default 20); with --model hdp the truncation (default "
        f"{_HDP_TRUNCATION}, HDPTopicModel's max_components, or the number of documents if "
        "fewer)",
    )
    t.add_argument(
        "--L",
        type=_positive_int,
        default=None,
        help="topics kept per word type (default 8, or K when K < 8; L = K is dense)",
    )
    t.add_argument(
        "--algorithm",
        choices=("memoized", "stochastic", "batch"),
        default="memoized",
        help="learning algorithm (default memoized)",
    )
    t.add_argument(
        "--max-iter",
        type=_positive_int,
        default=50,
        help="maximum passes over the training documents (default 50; training stops "
        "earlier when it converges, see --tol)",
    )
    t.add_argument(
        "--tol",
        type=_nonnegative_float,
        default=None,
        help="stop when the ELBO changes by less than this many nats per training token "
        "between passes (default: SparseLDA's; 0 runs every pass)",
    )
    t.add_argument(
        "--n-batches", type=_positive_int, default=None, help="batches of the memoized algorithm"
    )
    t.add_argument(
        "--batch-size",
        type=_positive_int,
        default=None,
        help="minibatch size of the stochastic algorithm",
    )
    t.add_argument(
        "--heldout-fraction",
        type=_fraction,
        default=0.1,
        help="fraction of documents kept out of training for the document-completion score "
        "(default 0.1; 0 skips it)",
    )
    t.add_argument(
        "--left-to-right",
        metavar="R",
        type=_positive_int,
        default=None,
        help="also score the held-out documents by the left-to-right estimator of their "
        "log-likelihood with R particles (Wallach et al. 2009; cost grows with the square "
        "of the document length)",
    )
    t.add_argument(
        "--npmi",
        action="store_true",
        help="also report NPMI coherence of the top words (document co-occurrence in the "
        "training documents)",
    )
    t.add_argument(
        "--top-n",
        type=_positive_int,
        default=10,
        help="words shown per topic, also used for coherence (default 10)",
    )
    t.add_argument(
        "--min-df",
        type=_positive_int,
        default=1,
        help="text input only (folder or lines): drop words in fewer documents (default 1)",
    )
    t.add_argument(
        "--max-df",
        type=_max_df,
        default=1.0,
        help="text input only: drop words in more than this fraction of the documents (a "
        "number with a point, e.g. 0.5) or this many documents (an integer); default 1.0",
    )
    t.add_argument(
        "--threads",
        type=_nonzero_int,
        default=None,
        help="threads (default: all available; -1 all, -2 all but one)",
    )
    t.add_argument(
        "--seed", type=_seed, default=0,
        help="random seed of the split and the fit, 0 to 2**32 - 1 (default 0)"
    )
    t.add_argument("--quiet", "-q", action="store_true", help="no progress bar or status messages")
    t.add_argument(
        "--output",
        "-o",
        metavar="JSON",
        help="also write topics, scores and timings to this JSON file",
    )
    t.add_argument(
        "--report",
        metavar="HTML",
        help="also write a self-contained HTML report (corpus, scores explained, training "
        "trace, topics with word bars; nothing loaded from the network)",
    )
    t.add_argument(
        "--save-model",
        metavar="FILE",
        help="save the fitted model with its vocabulary, a scikit-learn Pipeline of "
        "('vectorizer', 'model') (load it with sparseclust.load, which checks the format "
        "version; a pickle underneath, so only load files you trust; apply it to new "
        "documents with 'sparseclust apply')",
    )
    t.add_argument(
        "--doc-topics",
        metavar="FILE",
        help="save the document-topic matrix E[pi_d] of every document, in corpus order "
        "(rows: documents, columns: topics), as .npy, .csv, .tsv or .txt",
    )
    a = sub.add_parser(
        "apply",
        help="document-topic proportions of new documents under a model saved by "
        "'sparseclust topics --save-model'",
        description=(
            "Load a model saved by 'sparseclust topics --save-model', count the words of new "
            "documents with the model's own vectorizer (or map word ids through the model's "
            "vocabulary) and write their document-topic proportions E[pi_d], one row per "
            "document in input order, one column per topic."
        ),
    )
    a.add_argument("model", metavar="MODEL", help="a model file saved by --save-model")
    a.add_argument(
        "docs",
        metavar="DOCS",
        help="new documents: a folder of .txt files (one document each, sorted by path), a "
        "text file with one document per line (.txt), or a UCI docword / LDA-C file (word "
        "ids; with a vocabulary file its words are mapped onto the model's)",
    )
    a.add_argument(
        "--format", choices=_FORMATS, default="auto",
        help="format of DOCS (default auto: from the name, as for 'topics')",
    )
    a.add_argument("--vocab", metavar="FILE",
                   help="vocabulary of a UCI / LDA-C DOCS file, one word per line")
    a.add_argument(
        "--out",
        "-o",
        metavar="FILE",
        default="doc_topics.csv",
        help="where to write the document-topic matrix: .npy (numpy), .csv, .tsv or .txt "
        "(a header topic0, topic1, ...); default doc_topics.csv in the current directory",
    )
    a.add_argument("--quiet", "-q", action="store_true", help="no summary on stdout")
    g = sub.add_parser(
        "mixture",
        help="fit an L-sparse Gaussian mixture to a data matrix and write its labels",
        description=(
            "Fit SparseGaussianMixture to the rows of a numeric matrix (.npy, or .csv with "
            "an optional header line); print the cluster sizes and how training ended; "
            "optionally write each row's label and save the model."
        ),
    )
    g.add_argument("data", metavar="X", help="data: a 2-D .npy file or a .csv file of numbers "
                   "(comma-separated, one row per sample; a first line that is not numeric "
                   "is a header and skipped)")
    g.add_argument("--n-components", "-k", type=_positive_int, required=True,
                   help="number of mixture components K")
    g.add_argument("--L", type=_positive_int, default=None,
                   help="components kept per row (default 4, or K when K < 4; L = K is dense)")
    g.add_argument("--covariance-type", choices=("full", "diag", "spherical"), default="full",
                   help="covariance of each component (default full)")
    g.add_argument("--algorithm", choices=("memoized", "stochastic", "batch"),
                   default="memoized", help="learning algorithm (default memoized)")
    g.add_argument("--max-iter", type=_positive_int, default=100,
                   help="maximum passes over the data (default 100)")
    g.add_argument("--threads", type=_nonzero_int, default=None,
                   help="threads (default: all available; -1 all, -2 all but one)")
    g.add_argument("--seed", type=_seed, default=0, help="random seed (default 0)")
    g.add_argument("--labels", metavar="FILE",
                   help="write each row's component (0 .. K-1), in row order: .csv/.txt (a "
                   "header 'label', one per line) or .npy")
    g.add_argument("--save-model", metavar="FILE",
                   help="save the fitted SparseGaussianMixture (sparseclust.save format)")
    g.add_argument("--quiet", "-q", action="store_true", help="no status messages")
    return parser


# ---------------------------------------------------------------------------------------
# corpus loading


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


def _save_doc_topics(path, theta):
    suffix = Path(path).suffix.lower()
    if suffix == ".npy":
        np.save(path, theta)
        return
    delimiter = "," if suffix == ".csv" else "\t"
    header = delimiter.join(f"topic{k}" for k in range(theta.shape[1]))
    np.savetxt(path, theta, delimiter=delimiter, header=header, comments="", fmt="%.6g")


# ---------------------------------------------------------------------------------------
# progress


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


def _say(args, message):
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


def _warn(args, message):
    """Warnings are shown even with --quiet."""
    print(f"sparseclust: warning: {message}", file=sys.stderr, flush=True)


def _convergence_summary(model, args):
    """Whether and why training stopped, from the fitted model's trace."""
    trace = getattr(model, "trace_", None) or []
    n_iter = int(getattr(model, "n_iter_", len(trace)))
    tol = float(getattr(model, "tol_", model.tol))  # HDPTopicModel's tol='auto' resolved
    if type(model).__name__ == "StochasticEMLDA":
        return _sem_convergence_summary(model, trace, n_iter, tol)
    last = trace[-1].get("elbo_change") if trace else None
    last = None if last is None or not np.isfinite(last) else float(last)
    converged = bool(getattr(model, "converged_", False))
    if converged and model.algorithm == "stochastic":
        from ._engine import STOCHASTIC_WINDOW as w

        msg = (f"converged after {n_iter} passes of stochastic training (the mean ELBO of the "
               f"last {w} passes differs from that of the {w} before them by {last:.2g} nats "
               f"per token, below tol = {tol:g})")
    elif converged:
        msg = (f"converged after {n_iter} passes (the ELBO changed by {last:.2g} nats per "
               f"token in the last pass, below tol = {tol:g})")
    elif model.algorithm == "stochastic":
        msg = (f"ran {n_iter} passes of stochastic training (its running objective is an "
               f"estimate; it stops early only if that changes by less than tol = {tol:g})")
    else:
        change = "" if last is None else f"; the ELBO still changed by {last:.2g} nats per token"
        msg = (f"stopped after --max-iter {n_iter} passes without converging{change} "
               f"(tol = {tol:g}); more passes may improve the topics")
    return {"converged": converged, "last_change": last, "tol": tol, "message": msg}


def _sem_convergence_summary(model, trace, n_iter, tol):
    """The same summary for StochasticEMLDA (sweeps and its log joint likelihood)."""
    converged = bool(getattr(model, "converged_", False))
    last = trace[-1].get("log_joint_change") if trace else None
    last = None if last is None or not np.isfinite(last) else float(last)
    if model.algorithm == "online":
        msg = f"ran {n_iter} passes of online stochastic-EM minibatch steps"
    elif converged:
        msg = (f"converged after {n_iter} sweeps (the log joint likelihood changed by "
               f"{last:.2g} nats per token in the last sweep, below tol = {tol:g})")
    else:
        change = "" if last is None else (f"; the log joint likelihood changed by {last:.2g} "
                                          "nats per token in the last sweep")
        msg = (f"ran {n_iter} stochastic-EM sweeps{change} (a sampler's log joint keeps "
               "fluctuating; more sweeps may improve the topics)")
    return {"converged": converged, "last_change": last, "tol": tol, "message": msg}


# ---------------------------------------------------------------------------------------
# the topics command


def _split_documents(n_docs, fraction, seed):
    """Seeded (train_idx, test_idx) with round(fraction * n_docs) test documents."""
    if fraction == 0:
        return np.arange(n_docs), np.arange(0)
    n_test = int(round(fraction * n_docs))
    n_test = min(max(n_test, 1), n_docs - 1)
    perm = np.random.RandomState(seed).permutation(n_docs)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def _unigram_baseline(X_train, X_test, tau, seed, n_threads):
    """Document completion of the unigram model: every held-out token scored by the smoothed
    training word frequencies p_v = (c_v + tau) / (N + V tau), on the same split as the topic
    model (the split depends only on the held-out documents, the fraction and the seed)."""
    from sparseclust.metrics import document_completion_score

    counts = np.asarray(X_train.sum(axis=0), dtype=np.float64).ravel() + tau
    return document_completion_score(
        (counts / counts.sum())[None, :], X_test, heldout_fraction=0.2, random_state=seed,
        doc_topic_prior=1.0, n_threads=n_threads,
    )


def _run_topics(args):
    t0 = time.perf_counter()
    X, feature_names, description, vectorizer = _load_corpus(
        args.path, args.vocab, args.min_df, args.format, args.max_df)
    X = X.tocsr()
    n_docs, n_words = X.shape
    if feature_names is None:
        _warn(
            args,
            f"no vocabulary for {Path(args.path).name} "
            f"({_missing_vocabulary_hint(args.path, args.format)}): topics are shown as word "
            "ids word0, word1, ...; give --vocab FILE (one word per line) for words",
        )
        feature_names = np.array([f"word{j}" for j in range(n_words)], dtype=object)
    if n_docs < 2 or X.nnz == 0:
        raise CLIError(
            f"the corpus has {n_docs} documents and {X.nnz} nonzero counts: too few to fit"
        )
    if args.n_topics is None:
        # the HDP learns K below its truncation: a cap of the LDA default would cap what it
        # can learn, so it gets its estimator's own default
        args.n_topics = min(_HDP_TRUNCATION, n_docs) if args.model == "hdp" else 20
    if args.n_topics > n_docs:
        raise CLIError(f"--n-topics {args.n_topics} exceeds the number of documents ({n_docs})")
    if args.top_n < 2:
        raise CLIError("--top-n must be at least 2 (coherence scores word pairs)")
    for target in (args.output, args.report, args.save_model, args.doc_topics):
        if target:
            parent = Path(target).resolve().parent
            if not parent.is_dir():
                raise CLIError(f"cannot write {target}: directory {parent} does not exist")
    if args.doc_topics and Path(args.doc_topics).suffix.lower() not in _DOC_TOPIC_SUFFIXES:
        raise CLIError(
            f"--doc-topics {args.doc_topics}: expected a file ending in "
            f"{', '.join(_DOC_TOPIC_SUFFIXES)}"
        )
    if args.model == "sem" and args.L is not None:
        _warn(args, "--L does not apply to --model sem (it samples one topic per token)")
    if args.model == "sem" and args.n_batches is not None:
        _warn(args, "--n-batches does not apply to --model sem (its batch sweeps visit every "
                    "document; --batch-size sets its online minibatches)")
    if args.L is None:
        args.L = min(8, args.n_topics)
    elif args.L > args.n_topics and args.model != "sem":
        _warn(
            args,
            f"--L {args.L} exceeds --n-topics {args.n_topics}: using L = {args.n_topics} "
            "(every topic kept: the dense local step)",
        )
    if args.left_to_right is not None and args.heldout_fraction == 0:
        raise CLIError("--left-to-right scores the held-out documents: it needs "
                       "--heldout-fraction > 0")
    train_idx, test_idx = _split_documents(n_docs, args.heldout_fraction, args.seed)
    X_train, X_test = X[train_idx], X[test_idx]
    if X_train.nnz == 0:
        raise CLIError(
            f"the {len(train_idx)} training documents are all empty: nothing to fit (lower "
            "--heldout-fraction, or give a corpus with more non-empty documents)")
    t_load = time.perf_counter() - t0
    _say(
        args,
        f"corpus: {description}: {n_docs} documents, {n_words} words, {int(X.sum())} tokens; "
        f"training on {len(train_idx)}, {len(test_idx)} held out",
    )

    from sparseclust.metrics import (
        document_completion_score,
        left_to_right_score,
        npmi_coherence,
        top_words,
        umass_coherence,
    )
    from sparseclust.topics import HDPTopicModel, SparseLDA, StochasticEMLDA

    Estimator = {"hdp": HDPTopicModel, "sem": StochasticEMLDA}.get(args.model, SparseLDA)
    size = "max_components" if args.model == "hdp" else "n_components"
    params = dict(
        L=min(args.L, args.n_topics),
        algorithm=args.algorithm,
        max_iter=args.max_iter,
        random_state=args.seed,
        n_threads=args.threads,
    )
    if args.model == "sem":
        del params["L"]
        params["algorithm"] = "online" if args.algorithm == "stochastic" else "batch"
    params[size] = args.n_topics
    if args.tol is not None:
        params["tol"] = args.tol
    if args.n_batches is not None and args.model != "sem":
        params["n_batches"] = args.n_batches
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    try:
        model = Estimator(**params)
    except TypeError as exc:  # pragma: no cover - estimator contract
        raise CLIError(f"{Estimator.__name__} does not accept these options: {exc}") from None
    what = "truncation K" if args.model == "hdp" else "K"
    l_text = f", L={params['L']}" if "L" in params else ""
    _say(
        args,
        f"fitting {Estimator.__name__}: {what}={args.n_topics}{l_text}, "
        f"algorithm={params['algorithm']}, up to {args.max_iter} "
        f"{'sweeps' if args.model == 'sem' else 'passes'}",
    )
    progress = _Progress(args.max_iter, enabled=not args.quiet)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # convergence is reported below, in words
            from sklearn.exceptions import ConvergenceWarning

            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, callback=progress)
    except ValueError as exc:
        raise CLIError(f"cannot fit: {exc}") from None
    finally:
        progress.close()
    t_fit = time.perf_counter() - t0
    convergence = _convergence_summary(model, args)

    t0 = time.perf_counter()
    words = top_words(model, feature_names, n=args.top_n)
    top_n = min(args.top_n, n_words)
    coherence = umass_coherence(model, X_train, top_n=top_n) if top_n >= 2 else None
    npmi = npmi_coherence(model, X_train, top_n=top_n) if args.npmi and top_n >= 2 else None
    heldout = baseline = None
    l2r = l2r_std = None
    if args.left_to_right is not None and X_test.shape[0] > 0:
        try:
            l2r, l2r_std = left_to_right_score(
                model,
                X_test,
                n_particles=args.left_to_right,
                random_state=args.seed,
                n_threads=args.threads,
                return_std=True,
            )
        except ValueError as exc:
            _say(args, f"no left-to-right score: {exc}")
    # documents with fewer than 2 word types cannot be split for document completion; empty
    # ones have no tokens for left-to-right
    types_per_doc = np.asarray((X_test > 0).sum(axis=1)).ravel()
    n_completed = int(np.count_nonzero(types_per_doc >= 2))
    n_nonempty = int(np.count_nonzero(types_per_doc >= 1))
    if X_test.shape[0] > 0:
        try:
            heldout = document_completion_score(
                model,
                X_test,
                heldout_fraction=0.2,
                random_state=args.seed,
                n_threads=args.threads,
            )
            baseline = _unigram_baseline(
                X_train, X_test, float(model.topic_word_prior_), args.seed, args.threads
            )
        except ValueError as exc:
            _say(args, f"no held-out score: {exc}")
    t_eval = time.perf_counter() - t0

    # topics ordered by their share of the training tokens
    lam = np.asarray(model.components_, dtype=np.float64)
    prior = float(getattr(model, "topic_word_prior", 0.0) or 0.0)
    mass = np.maximum(lam.sum(axis=1) - prior * n_words, 0.0)
    share = mass / mass.sum() if mass.sum() > 0 else np.full(len(mass), 1.0 / len(mass))
    order = np.argsort(-share, kind="stable")

    out = sys.stdout
    n_shown = len(order)
    learned = f", learned from a truncation of {args.n_topics}" if args.model == "hdp" else ""
    print(f"\nTopics (K={n_shown}{learned}{l_text}), by share of training tokens:",
          file=out)
    width = len(str(n_shown - 1))
    for k in order:
        coh = f"  [coherence {coherence[k]:7.1f}]" if coherence is not None else ""
        print(f"  {k:>{width}} {100 * share[k]:5.1f}%  {' '.join(words[k])}{coh}", file=out)
    print("", file=out)
    if heldout is not None:
        print(
            f"held-out document completion: {heldout:.4f} nats per token "
            f"({_documents_scored(n_completed, len(test_idx), 'with 2 or more word types')}, "
            "20% of each one's word types held out; "
            f"perplexity {np.exp(-heldout):.0f})",
            file=out,
        )
        print(
            f"  unigram baseline on the same held-out words: {baseline:.4f} nats per token "
            f"(perplexity {np.exp(-baseline):.0f}); the topics gain {heldout - baseline:+.4f} "
            "nats per token (higher is better; the baseline predicts every word by its "
            "frequency in the training documents)",
            file=out,
        )
    if l2r is not None:
        se = "" if not np.isfinite(l2r_std) else f" +- {l2r_std:.4f} (standard error)"
        print(
            f"held-out left-to-right log-likelihood: {l2r:.4f}{se} nats per token "
            f"({_documents_scored(n_nonempty, len(test_idx), 'not empty')}, whole, "
            f"{args.left_to_right} particles)",
            file=out,
        )
    if npmi is not None:
        print(
            f"NPMI coherence (top {top_n} words, training documents): "
            f"mean {npmi.mean():.3f}",
            file=out,
        )
    if coherence is not None:
        print(
            f"UMass coherence (top {top_n} words, training documents): "
            f"mean {coherence.mean():.2f}",
            file=out,
        )
    print(f"training: {convergence['message']}", file=out)
    n_iter = getattr(model, "n_iter_", None)
    unit = "sweeps" if args.model == "sem" and params["algorithm"] == "batch" else "passes"
    iters = f" ({n_iter} {unit})" if n_iter is not None else ""
    t0 = time.perf_counter()
    if args.doc_topics:
        try:
            _save_doc_topics(args.doc_topics, model.transform(X).astype(np.float64))
        except OSError as exc:
            raise CLIError(f"cannot write {args.doc_topics}: {exc}") from None
        n_cols = getattr(model, "n_components_", args.n_topics)
        _say(args, f"wrote the {n_docs} x {n_cols} document-topic matrix to "
                   f"{args.doc_topics}")
    if args.save_model:
        try:
            from ._persist import save

            save(_saved_pipeline(model, vectorizer, feature_names), args.save_model)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save_model}: {exc}") from None
        _say(args, f"saved the model to {args.save_model}")
    t_save = time.perf_counter() - t0
    saved = f", save {t_save:.2f}s" if (args.doc_topics or args.save_model) else ""
    print(
        f"timings: load {t_load:.2f}s, fit {t_fit:.2f}s{iters}, evaluate {t_eval:.2f}s{saved}",
        file=out,
    )

    if args.output or args.report:
        trace = getattr(model, "trace_", None)
        payload = {
            "corpus": {
                "description": description,
                "path": None if args.path is None else os.fspath(args.path),
                "n_documents": n_docs,
                "n_words": n_words,
                "n_tokens": float(X.sum()),
                "n_train": int(len(train_idx)),
                "n_train_tokens": float(X_train.sum()),
                "n_heldout": int(len(test_idx)),
                "n_heldout_scored": int(n_completed),
                "n_heldout_nonempty": int(n_nonempty),
            },
            "model": Estimator.__name__,
            "n_topics": int(len(order)),
            "params": {k: v for k, v in params.items()},
            "topics": [
                {
                    "index": int(k),
                    "share": float(share[k]),
                    "words": words[k],
                    "coherence": None if coherence is None else float(coherence[k]),
                    "npmi": None if npmi is None else float(npmi[k]),
                }
                for k in order
            ],
            "scores": {
                "heldout_document_completion": heldout,
                "heldout_unigram_baseline": baseline,
                "umass_coherence_mean": None if coherence is None else float(coherence.mean()),
                "heldout_left_to_right": l2r,
                "heldout_left_to_right_std": (
                    None if l2r_std is None or not np.isfinite(l2r_std) else l2r_std
                ),
                "left_to_right_particles": args.left_to_right,
                "npmi_coherence_mean": None if npmi is None else float(npmi.mean()),
                "coherence_top_n": top_n,
            },
            "timings": {"load": t_load, "fit": t_fit, "evaluate": t_eval},
            "n_iter": None if n_iter is None else int(n_iter),
            "converged": convergence["converged"],
            "last_elbo_change_per_token": convergence["last_change"],
            "tol": convergence["tol"],
            "saved": {"model": args.save_model, "doc_topics": args.doc_topics},
            "trace": _plain_trace(trace),
        }
    if args.output:
        try:
            with open(args.output, "w") as fh:
                json.dump(payload, fh, indent=1)
                fh.write("\n")
        except OSError as exc:
            raise CLIError(f"cannot write {args.output}: {exc}") from None
        _say(args, f"wrote {args.output}")
    if args.report:
        from ._report import render_report
        from .metrics._topics import _top_word_indices, _topic_word_and_prior

        phi, _ = _topic_word_and_prior(model)
        top = _top_word_indices(phi, top_n)
        probs = [[float(phi[k, j]) for j in top[k]] for k in order]
        try:
            with open(args.report, "w", encoding="utf-8") as fh:
                fh.write(render_report(payload, probs, convergence["message"]))
        except OSError as exc:
            raise CLIError(f"cannot write {args.report}: {exc}") from None
        _say(args, f"wrote the report {args.report}")
    return 0


def _saved_pipeline(model, vectorizer, feature_names):
    """What --save-model writes: the vectorizer (text input) or the word-id vocabulary and
    the model, without training state (see sparseclust._saved)."""
    from ._saved import WordIdVocabulary, slim_copy, topic_pipeline

    if vectorizer is None:
        vectorizer = WordIdVocabulary(np.asarray(feature_names, dtype=str)).fit()
    return slim_copy(topic_pipeline(vectorizer, model))


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
    from sklearn.feature_extraction.text import CountVectorizer

    from sparseclust import datasets
    from sparseclust.datasets._bow import _read_text_files, _read_text_lines

    pipe, model = _load_saved_topic_model(args.model)
    if Path(args.out).suffix.lower() not in _DOC_TOPIC_SUFFIXES:
        raise CLIError(f"--out {args.out}: expected a file ending in "
                       f"{', '.join(_DOC_TOPIC_SUFFIXES)}")
    parent = Path(args.out).resolve().parent
    if not parent.is_dir():
        raise CLIError(f"cannot write {args.out}: directory {parent} does not exist")
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
            X = vectorizer.transform(texts)
        else:
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
            if bunch.feature_names is not None and vectorizer is not None:
                from ._saved import map_columns

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
    return 0


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


def _run_mixture(args):
    X = _load_matrix(args.data)
    n, D = X.shape
    K = args.n_components
    if K > n:
        raise CLIError(f"--n-components {K} exceeds the number of rows ({n})")
    for target in (args.labels, args.save_model):
        if target:
            parent = Path(target).resolve().parent
            if not parent.is_dir():
                raise CLIError(f"cannot write {target}: directory {parent} does not exist")
    if args.labels and Path(args.labels).suffix.lower() not in (".csv", ".txt", ".npy"):
        raise CLIError(f"--labels {args.labels}: expected a file ending in .csv, .txt or .npy")
    from sklearn.exceptions import ConvergenceWarning

    from sparseclust import SparseGaussianMixture

    L = min(args.L if args.L is not None else 4, K)
    model = SparseGaussianMixture(
        K, L=L, covariance_type=args.covariance_type, algorithm=args.algorithm,
        max_iter=args.max_iter, random_state=args.seed, n_threads=args.threads,
        n_batches=min(10, n),
    )
    _say(args, f"data: {args.data}: {n} rows, {D} columns; fitting SparseGaussianMixture: "
               f"K={K}, L={L}, covariance {args.covariance_type}, algorithm {args.algorithm}")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = model.fit(X).predict(X)
    except ValueError as exc:
        raise CLIError(f"cannot fit: {exc}") from None
    t_fit = time.perf_counter() - t0
    sizes = np.bincount(labels, minlength=K)
    how = "converged" if model.converged_ else "stopped without converging"
    print(f"{how} after {model.n_iter_} passes ({t_fit:.2f}s); lower bound "
          f"{model.lower_bound_:.6g}")
    print("rows per component: " + " ".join(f"{k}:{int(c)}" for k, c in enumerate(sizes)))
    if args.labels:
        try:
            if Path(args.labels).suffix.lower() == ".npy":
                np.save(args.labels, labels.astype(np.int64))
            else:
                np.savetxt(args.labels, labels, fmt="%d", header="label", comments="")
        except OSError as exc:
            raise CLIError(f"cannot write {args.labels}: {exc}") from None
        _say(args, f"wrote the {n} labels to {args.labels}")
    if args.save_model:
        from ._persist import save
        from ._saved import slim_copy

        try:
            save(slim_copy(model), args.save_model)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save_model}: {exc}") from None
        _say(args, f"saved the model to {args.save_model}")
    return 0


def _pad_columns(X, n):
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    return sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n))


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


def main(argv=None):
    """Entry point of the ``sparseclust`` console command; returns the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help, --version (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        if args.command == "topics":
            return _run_topics(args)
        if args.command == "apply":
            return _run_apply(args)
        if args.command == "mixture":
            return _run_mixture(args)
    except CLIError as exc:
        print(f"sparseclust: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsparseclust: interrupted", file=sys.stderr)
        return 130
    parser.print_usage(sys.stderr)  # pragma: no cover - subcommand is required
    return 2
