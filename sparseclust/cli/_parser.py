# SPDX-License-Identifier: BSD-3-Clause
"""The argument parser of the ``sparseclust`` command and the types of its options."""

import argparse

import numpy as np

from ._common import _FORMATS, _HDP_TRUNCATION


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
    """The parser of the three commands."""
    parser = argparse.ArgumentParser(
        prog="sparseclust",
        description="Fast clustering and topic models through sparse posteriors.",
    )
    from sparseclust import __version__

    parser.add_argument("--version", action="version", version=f"sparseclust {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    _add_topics_command(sub)
    _add_apply_command(sub)
    _add_mixture_command(sub)
    return parser


def _add_topics_command(sub):
    t = sub.add_parser(
        "topics",
        help="fit an L-sparse LDA topic model to a corpus and report its topics and scores",
        description=(
            "Fit SparseLDA to a corpus; print each topic's top words, the held-out "
            "document-completion log-likelihood per token on documents kept out of "
            "training, the mean UMass coherence on the training documents, and timings."
        ),
    )
    _add_corpus_arguments(t)
    _add_model_arguments(t)
    _add_scoring_arguments(t)
    _add_text_arguments(t)
    _add_output_arguments(t)


def _add_corpus_arguments(t):
    """topics: the corpus and its format."""
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


def _add_model_arguments(t):
    """topics: the model, its size and its training."""
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
        "--local-step",
        choices=("gibbs", "variational"),
        default="gibbs",
        help="--model lda: the document step, sampled topics per token (gibbs, default) or "
        "the L-sparse variational step (variational; --L applies to it only)",
    )
    t.add_argument(
        "--max-iter",
        type=_positive_int,
        default=None,
        help="maximum passes over the training documents (default: the model's, 25 for "
        "lda with the gibbs step, 50 for lda with the variational step and for hdp, 200 "
        "sweeps for sem, 100 passes with --algorithm stochastic; training stops earlier "
        "when it converges, see --tol)",
    )
    t.add_argument(
        "--tol",
        type=_nonnegative_float,
        default=None,
        help="stop when the ELBO changes by less than this many nats per training token "
        "between passes (default: the model's; SparseLDA's gibbs step runs every pass)",
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


def _add_scoring_arguments(t):
    """topics: the held-out scores and the coherence."""
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


def _add_text_arguments(t):
    """topics: the vocabulary of text input, threads, seed and quiet."""
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


def _add_output_arguments(t):
    """topics: what is written besides the printed summary."""
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


def _add_apply_command(sub):
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


def _add_mixture_command(sub):
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
