# SPDX-License-Identifier: BSD-3-Clause
"""HDPTopicModel settings chosen on a validation split of the *training* documents only.

The training documents of ``bench_hdp.py`` (KOS: the 90% it trains on) are split again: 90% to
fit, 10% to score by document completion. The test documents of ``bench_hdp.py`` are never
read. For each setting and seed: HDP learned K, validation score with the model's own document
prior alpha E[beta] and, as a diagnostic of where a gap to SparseLDA comes from, with the
uniform prior alpha / K over the same topics; and SparseLDA at the learned K (same seed).

Usage::

    python benchmarks/bench_hdp_validation.py --gammas 1 10 --seeds 0 1
    python benchmarks/bench_hdp_validation.py --corpus 20ng --no-lda --init-sweeps 300
    python benchmarks/bench_hdp_validation.py --sem-sweeps 100 200 300 --seeds 0 1 2 3 4

``--init-sweeps N`` starts the HDP from N stochastic EM sweeps (``init=StochasticEMLDA(
truncation, max_iter=N, random_state=seed)``, inside the clock) instead of the model's
default ``init`` (``'auto'``: stochastic EM sweeps seeded from the model's generator, 300
before 30a831f and 800 since; it was k-means++ before that, and the earlier results files were
made with that).
``--sem-sweeps N [N ...]`` starts as the default does (``init='auto'``: the sweeps' seed drawn
from the model's ``random_state``), with N sweeps. ``--curve`` scores the validation documents
after every pass and replays the stopping rule for every ``--tols`` value; the fit itself runs
with ``tol='auto'`` unless ``--extra tol=...`` is given, so pass ``--extra tol=0.0001``
(or 0) to replay tols below the default. ``--replay FILE`` recomputes a stored run's stops.
(The studies of the moves' options, the move start, the delete start, the topic-word merge
pairs and the delete budget rule, needed options of the model that are no longer in the
package; git history keeps them.)
"""

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, environment, write_json  # noqa: E402
from bench_hdp import ALPHA, TAU, load  # noqa: E402

from sparseclust import HDPTopicModel, SparseLDA, StochasticEMLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402
from sparseclust.topics._hdp import LIVE_MIN_TOKENS  # noqa: E402

IMDB_DOCS = 10_000


def validation_split(corpus, seed=12345):
    if corpus == "imdb":  # a corpus no HDP default was chosen on: 10,000 training reviews
        from _common import imdb_heldout_split

        X = sp.csr_array(imdb_heldout_split(0, n_train=IMDB_DOCS)[0])
    else:
        X, _ = load(corpus, 0)  # bench_hdp's training documents; its test documents unused
    perm = np.random.RandomState(seed).permutation(X.shape[0])
    n_val = int(round(0.1 * X.shape[0]))
    return X[np.sort(perm[n_val:])], X[np.sort(perm[:n_val])]


def stop_pass(trace, tol, rule="no_move"):
    """0-based index of the pass a stopping rule stops at on a stored trace (dicts with
    ``progress``, ``merges``, ``deletes``; the last pass if it never stops). Memoized training
    is deterministic, so a fit stopped there equals the traced fit's state after that pass.

    ``'no_move'``: HDPTopicModel's rule (see its ``tol``): the first pass whose progress is
    below tol and which accepted no merge or delete. ``'second_below'``: the rule before
    30a831f, which also stopped at the second pass in a row below tol whatever the moves.
    """
    prev_below = False
    for i, c in enumerate(trace):
        p = c["progress"]
        below = p is not None and np.isfinite(p) and p < tol
        moved = bool(c["merges"] or c["deletes"])
        if below and (not moved or (rule == "second_below" and prev_below)):
            return i
        prev_below = below
    return len(trace) - 1


def replay_stop(curve, tol):
    """Where HDPTopicModel's stopping rule would have stopped this ``--curve`` fit with
    ``tol`` (:func:`stop_pass`), and its state there."""
    i = stop_pass(curve, tol)
    c = curve[i]
    return dict(passes=i + 1, seconds=c["seconds"], n_live=c["n_live"],
                score_uniform_prior=c["score_uniform_prior"])


def replay_file(path):
    """Recompute the ``stops`` of a stored ``--curve`` run with :func:`replay_stop`."""
    import json

    with open(path) as f:
        d = json.load(f)
    for row in d["runs"]:
        row["stops"] = [dict(tol=tol, **replay_stop(row["curve"], tol))
                        for tol in d["args"]["tols"]]
    d["stops_replayed_with"] = environment()["commit"]
    write_json(path, d)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="kos", choices=["kos", "20ng", "imdb"],
                   help="imdb: 10,000 reviews of the IMDB training set (imdb_heldout_split, "
                   "seed 0), a check on a corpus the defaults were not chosen on")
    p.add_argument("--gammas", type=float, nargs="+", default=[1.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--truncation", type=int, default=200)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--extra", default="", help="extra HDPTopicModel keyword=value, comma-sep")
    p.add_argument("--no-lda", action="store_true")
    p.add_argument("--init-sweeps", type=int, default=None,
                   help="start from this many stochastic EM sweeps (default: the model's "
                   "init, 'auto')")
    p.add_argument("--sem-sweeps", type=int, nargs="+", default=[None],
                   help="start as init='auto' does (sweeps seeded from the model's "
                   "random_state) with these many stochastic EM sweeps")
    p.add_argument("--curve", action="store_true",
                   help="score the validation documents after every pass (uniform prior "
                   "alpha / K over the live topics, outside the clock) and replay the "
                   "stopping rule for every --tols value")
    p.add_argument("--tols", type=float, nargs="+", default=[1e-4, 3e-4, 1e-3, 3e-3],
                   help="tol values the stopping rule is replayed for (with --curve; the "
                   "fit itself runs with the model's tol, which must be the smallest)")
    p.add_argument("--replay", metavar="FILE",
                   help="only recompute the stops of a stored --curve run with the current "
                   "stopping rule, in place")
    p.add_argument("--out", default=str(RESULTS / "hdp_validation.json"))
    args = p.parse_args(argv)
    if args.replay:
        return replay_file(args.replay)
    extra = {}
    for kv in filter(None, args.extra.split(",")):
        k, v = kv.split("=")
        default = getattr(HDPTopicModel(), k)
        if default is None or isinstance(default, str):  # e.g. tol='auto': a number or a word
            try:
                extra[k] = float(v) if any(c in v for c in ".e") else int(v)
            except ValueError:
                extra[k] = v
        else:
            extra[k] = type(default)(v)
    X, X_val = validation_split(args.corpus)
    runs = []
    for gamma, sweeps, seed in itertools.product(args.gammas, args.sem_sweeps, args.seeds):
        init = {}
        if sweeps is not None:
            init["init"] = StochasticEMLDA(args.truncation, max_iter=sweeps)
        elif args.init_sweeps:
            init["init"] = StochasticEMLDA(args.truncation, max_iter=args.init_sweeps,
                                           random_state=seed, n_threads=1)
        m = HDPTopicModel(args.truncation, alpha=ALPHA, gamma=gamma, topic_word_prior=TAU,
                          L=8, max_iter=args.max_iter, random_state=seed, n_threads=1,
                          **extra, **init)
        curve, off = [], [0.0]
        t0 = time.process_time()

        def per_pass(info):
            t1 = time.process_time()
            lam = info["components"]
            live = lam.sum(axis=1) - TAU * lam.shape[1] >= LIVE_MIN_TOKENS
            phi = lam[live] / lam[live].sum(axis=1, keepdims=True)
            score = document_completion_score(phi, X_val, random_state=0,
                                              doc_topic_prior=ALPHA / live.sum(), n_threads=1)
            curve.append(dict(seconds=t1 - t0 - off[0], n_live=int(live.sum()),
                              score_uniform_prior=score))
            off[0] += time.process_time() - t1

        m.fit(X, callback=per_pass if args.curve else None)
        sec = time.process_time() - t0 - off[0]
        K = m.n_components_
        own = document_completion_score(m, X_val, random_state=0, n_threads=1)
        uni = document_completion_score(m.topic_word_distribution_, X_val, random_state=0,
                                        doc_topic_prior=ALPHA / K, n_threads=1)
        row = dict(gamma=gamma, sem_sweeps=sweeps, seed=seed,
                   extra=extra, init_sweeps=args.init_sweeps, n_live=K,
                   passes=m.n_iter_, seconds=sec, score=own, score_uniform_prior=uni)
        if args.curve:
            for c, tr in zip(curve, m.trace_, strict=True):
                c.update(progress=tr["progress"], merges=tr["merges_accepted"],
                         deletes=tr["deletes_accepted"])
            row["curve"] = curve
            row["stops"] = [dict(tol=tol, **replay_stop(curve, tol)) for tol in args.tols]
        if not args.no_lda:
            lda = SparseLDA(K, L=8, doc_topic_prior=ALPHA / K, topic_word_prior=TAU,
                            max_iter=args.max_iter, random_state=seed, n_threads=1)
            t0 = time.process_time()
            lda.fit(X)
            row["lda_seconds"] = time.process_time() - t0
            row["lda_passes"] = lda.n_iter_
            row["lda_score"] = document_completion_score(lda, X_val, random_state=0,
                                                         doc_topic_prior=ALPHA / K,
                                                         n_threads=1)
        row["deletes_tried"] = int(sum(e["deletes_tried"] for e in m.trace_))
        row["deletes_accepted"] = int(sum(e["deletes_accepted"] for e in m.trace_))
        row["pass_seconds_moves"] = [float(e["time_moves"]) for e in m.trace_]
        print({k: v for k, v in row.items() if k != "curve"}, flush=True)
        runs.append(row)
        write_json(args.out, dict(environment=environment(), args=vars(args),
                                  n_fit=X.shape[0], n_val=X_val.shape[0], runs=runs))


if __name__ == "__main__":
    main()
