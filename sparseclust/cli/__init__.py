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

import sys

from ._apply import _run_apply
from ._common import _HDP_TRUNCATION, CLIError  # noqa: F401 (tests use them)
from ._mixture import _run_mixture
from ._parser import _build_parser
from ._topics import _run_topics, _split_documents  # noqa: F401

__all__ = ["main"]


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
