# SPDX-License-Identifier: BSD-3-Clause
"""Stochastic against memoized SparseLDA after a fixed number of passes on 20 Newsgroups.

Stochastic variational inference (``algorithm='stochastic'``) and memoized training run the
same number of passes (``--passes``, default 10, ``tol = 0``) from the same initialisation
(KL k-means++ with the same seed); the topics are scored by held-out document completion
(:func:`sparseclust.metrics.document_completion_score`, 20% of each test document's word
types held out) after selected passes. The stochastic runs sweep the learning-rate delay
``delta`` (absolute, or as a multiple of the number of minibatches per pass), the decay
``kappa``, the minibatch size and the local step's effort (``local_max_iter`` / ``local_tol``).

Two splits, so that the defaults are not tuned on the numbers that are reported:

* ``--split test``: all ``train`` posts are fitted and the 1000 ``test`` documents of
  ``bench_lda_heldout.py`` (same seed, same documents) are scored;
* ``--split validation``: the same training posts, and ``--n-val`` (default 1000) *other*
  ``test`` posts are scored: the next ones of the same seeded permutation of the ``test``
  set, disjoint from the reported documents. (Training posts held out of the training set
  are a poor validation set here: many 20 Newsgroups posts quote posts of the same period,
  so they are no sample of the later ``test`` posts.)

Timings are CPU seconds of this single-threaded process (``time.process_time``), scoring
excluded.

Usage::

    python benchmarks/bench_lda_stochastic.py --split validation --ks 100 --grid full
    python benchmarks/bench_lda_stochastic.py --combine results/a.json results/b.json --out x.json
    python benchmarks/bench_lda_stochastic.py --split test --ks 100 400 --seeds 0 1 \\
        --grid defaults --out benchmarks/results/lda_stochastic.json
"""

import argparse
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    environment,
    load_20newsgroups,
    newsgroups_heldout_split,
    vectorize,
    write_json,
)

from sparseclust import HDPTopicModel, SparseLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402
from sparseclust.topics._sparse_lda import _BATCH_SIZE  # noqa: E402

#: stochastic settings of the sweep; ``delta_per_pass`` sets delta = that many passes' worth
#: of minibatches (delta = c * ceil(n_documents / batch_size)) instead of an absolute delta
GRIDS = {
    "full": {
        "delta=1": dict(delta=1.0),
        "delta=10": dict(delta=10.0),
        "delta=100": dict(delta=100.0),
        "delta=1pass": dict(delta_per_pass=1.0),
        "delta=4pass": dict(delta_per_pass=4.0),
        "delta=1pass,kappa=0.5": dict(delta_per_pass=1.0, kappa=0.5),
        "delta=1pass,kappa=0.9": dict(delta_per_pass=1.0, kappa=0.9),
        "delta=1pass,batch=128": dict(delta_per_pass=1.0, batch_size=128),
        "delta=1pass,batch=1024": dict(delta_per_pass=1.0, batch_size=1024),
        "delta=1pass,local_max_iter=20": dict(delta_per_pass=1.0, local_max_iter=20),
        "delta=1pass,local_tol=0.01": dict(delta_per_pass=1.0, local_tol=0.01),
    },
    "small": {
        "delta=1": dict(delta=1.0),
        "delta=100": dict(delta=100.0),
        "delta=1pass": dict(delta_per_pass=1.0),
        "delta=4pass": dict(delta_per_pass=4.0),
        "delta=1pass,batch=1024": dict(delta_per_pass=1.0, batch_size=1024),
    },
    # minibatch sizes (the default delay: four passes' worth of minibatches)
    "batch": {
        "defaults": {},
        "batch=1024": dict(batch_size=1024),
        "batch=4096": dict(batch_size=4096),
        "batch=8192": dict(batch_size=8192),
    },
    # the estimator's defaults (whatever they are in the installed version)
    "defaults": {"defaults": {}},
    # saved sweeps per stochastic step of the Gibbs local step (--local-step gibbs)
    "sweeps": {"defaults": {}, "S=10": dict(n_saved_sweeps=10), "S=20": dict(n_saved_sweeps=20)},
    # the Gibbs local step's document chains in stochastic fit (--local-step gibbs): their
    # sweeps and the delay
    "gibbs_chains": {
        "defaults": {},
        "S=5": dict(n_saved_sweeps=5),
        "S=10": dict(n_saved_sweeps=10),
        "delta=1pass": dict(delta_per_pass=1.0),
        "delta=2pass": dict(delta_per_pass=2.0),
    },
}

TOPIC_WORD_PRIOR = 0.1
#: HDPTopicModel's alpha (--model hdp): the total document concentration, as SparseLDA's
#: 0.5 / K per topic sums to 0.5
HDP_ALPHA = 0.5


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def load(split, n_val, seed, n_test=1000):
    if split == "test":
        return newsgroups_heldout_split(seed=seed, n_test=n_test)
    # newsgroups_heldout_split's draws, continued past its n_test test documents
    import scipy.sparse as sp

    train_texts, _, _ = load_20newsgroups("train")
    test_texts, _, _ = load_20newsgroups("test")
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(train_texts))
    train_texts = [train_texts[i] for i in order]
    X_train, X_test, vocab = vectorize(train_texts, test_texts, min_df=5)
    val_idx = np.sort(rng.permutation(X_test.shape[0])[n_test : n_test + n_val])
    return sp.csr_matrix(X_train), X_test[val_idx], vocab


def fit_and_score(X, X_test, K, seed, params, score_at, passes, model_name="sparselda"):
    """Fit SparseLDA (or HDPTopicModel of truncation K) for ``passes`` passes, scoring after
    the passes in ``score_at``; returns the record of the run (CPU seconds exclude scoring).
    The HDP is scored after its last pass only, with its own document prior alpha E[beta]
    (``document_completion_score`` of the fitted model)."""
    scores = {}
    scoring = [0.0]

    def callback(info):
        p = info["pass"]
        if p in score_at and model_name == "sparselda":
            t0 = time.process_time()
            lam = info["components"]
            scores[p] = float(document_completion_score(
                lam, X_test, heldout_fraction=0.2, random_state=0,
                doc_topic_prior=0.5 / K, n_threads=1))
            scoring[0] += time.process_time() - t0
        return False

    if model_name == "hdp":
        model = HDPTopicModel(K, alpha=HDP_ALPHA, topic_word_prior=TOPIC_WORD_PRIOR,
                              max_iter=passes, tol=0, random_state=seed, n_threads=1,
                              **params)
    else:
        model = SparseLDA(n_components=K, topic_word_prior=TOPIC_WORD_PRIOR, max_iter=passes,
                          tol=0, random_state=seed, n_threads=1, **params)
    t0 = time.process_time()
    model.fit(X, callback=callback)
    cpu = time.process_time() - t0 - scoring[0]
    if model_name == "hdp":
        scores[model.n_iter_] = float(document_completion_score(
            model, X_test, heldout_fraction=0.2, random_state=0, n_threads=1))
    return {
        "model": model_name,
        "n_components_learned": int(model.n_components_) if model_name == "hdp" else K,
        "params": {k: (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v)
                   for k, v in params.items()},
        "cpu_seconds": cpu,
        "n_iter": model.n_iter_,
        "heldout": {str(k): v for k, v in sorted(scores.items())},
        "final": scores.get(passes),
        "elbo_per_token": [e["elbo"] / float(X.sum()) for e in model.trace_],
        "rho_last": model.trace_[-1].get("rho"),
    }


def resolve(cfg, n_docs, local_step="variational"):
    cfg = dict(cfg)
    c = cfg.pop("delta_per_pass", None)
    if c is not None:
        batch = cfg.get("batch_size", _BATCH_SIZE[local_step])
        cfg["delta"] = float(c * math.ceil(n_docs / batch))
    return cfg


def gaps_to_memoized(runs):
    """Final held-out score of every stochastic run minus memoized's (same K, same seed)."""
    memo = {(r["K"], r["seed"]): r["final"] for r in runs if r["method"] == "memoized"}
    summary = {}
    for r in runs:
        if r["method"] == "stochastic" and (r["K"], r["seed"]) in memo:
            key = f"K={r['K']} {r['config']}"
            summary.setdefault(key, []).append(r["final"] - memo[(r["K"], r["seed"])])
    return {k: {"per_seed": v, "mean": float(np.mean(v)), "worst": float(np.min(v))}
            for k, v in summary.items()}


def combine(paths, out):
    """Merge the runs of several result files of one split (e.g. runs made in parallel)."""
    import json

    parts = []
    for path in paths:
        with open(path) as fh:
            parts.append(json.load(fh))
    if len({p["split"] for p in parts}) != 1:
        raise ValueError("the files are of different splits")
    payload = {k: parts[0][k] for k in ("benchmark", "split", "dataset")}
    payload["parts"] = [
        {"file": Path(path).name, "settings": p["settings"], "environment": p["environment"]}
        for path, p in zip(paths, parts, strict=True)
    ]
    payload["runs"] = [r for p in parts for r in p["runs"]]
    payload["summary_gap_to_memoized"] = gaps_to_memoized(payload["runs"])
    write_json(out, payload)
    for k, v in payload["summary_gap_to_memoized"].items():
        log(f"{k}: gap {v['mean']:+.4f} (per seed {np.round(v['per_seed'], 4).tolist()})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=["validation", "test"], default="validation")
    ap.add_argument("--ks", type=int, nargs="+", default=[100])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--grid", choices=sorted(GRIDS), default="small")
    ap.add_argument("--configs", nargs="*", default=None,
                    help="names of the grid's configurations to run (default all)")
    ap.add_argument("--passes", type=int, default=10)
    ap.add_argument("--score-every", type=int, default=0,
                    help="also score every this many passes (0: the last pass only)")
    ap.add_argument("--n-val", type=int, default=1000)
    ap.add_argument("--no-memoized", action="store_true")
    ap.add_argument("--no-stochastic", action="store_true")
    ap.add_argument("--memoized-from", default=None,
                    help="a JSON of this benchmark (same split) whose memoized runs are copied "
                         "in instead of running memoized training again")
    ap.add_argument("--local-step", choices=["variational", "gibbs"], default="variational",
                    help="SparseLDA's local step, for the memoized and the stochastic runs")
    ap.add_argument("--model", choices=["sparselda", "hdp"], default="sparselda",
                    help="the estimator: SparseLDA with K topics, or HDPTopicModel of "
                         "truncation K (memoized with its default moves; stochastic without)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: K = 20, 2 passes, the 'defaults' grid")
    ap.add_argument("--combine", nargs="+", default=None,
                    help="only merge these result files (of one split) into --out")
    args = ap.parse_args(argv)
    if args.quick:
        args.ks, args.passes, args.grid, args.configs = [20], 2, "defaults", None
    if args.combine:
        combine(args.combine, args.out or RESULTS / f"lda_stochastic_{args.split}.json")
        return
    out = Path(args.out) if args.out else RESULTS / (
        "lda_stochastic_quick.json" if args.quick else f"lda_stochastic_{args.split}.json")

    X, X_test, vocab = load(args.split, args.n_val, seed=0)
    n_docs = X.shape[0]
    log(f"{args.split}: {n_docs} training documents, {X_test.shape[0]} scored, V={X.shape[1]}")
    score_at = {args.passes}
    if args.score_every:
        score_at |= set(range(args.score_every, args.passes + 1, args.score_every))
    grid = GRIDS[args.grid]
    names = [] if args.no_stochastic else (args.configs or list(grid))
    runs = []
    payload = {
        "benchmark": "bench_lda_stochastic",
        "split": args.split,
        "dataset": {"name": "20newsgroups-bydate", "n_train": n_docs,
                    "n_scored": int(X_test.shape[0]), "n_words": int(X.shape[1]),
                    "train_tokens": float(X.sum())},
        "settings": vars(args) | {"out": str(out)},
        "environment": environment(),
        "runs": runs,
    }
    if args.memoized_from:
        import json

        with open(args.memoized_from) as fh:
            other = json.load(fh)
        if other["split"] != args.split or other["settings"]["passes"] != args.passes:
            raise ValueError(f"{args.memoized_from} has another split or number of passes")
        runs.extend(r for r in other["runs"] if r["method"] == "memoized"
                    and r["K"] in args.ks and r["seed"] in args.seeds)
        payload["memoized_from"] = {"file": Path(args.memoized_from).name,
                                    "environment": other["environment"]}
        args.no_memoized = True
    step = {} if args.local_step == "variational" else {"local_step": args.local_step}
    with threadpool_limits(1):
        for K in args.ks:
            for seed in args.seeds:
                if not args.no_memoized:
                    r = fit_and_score(X, X_test, K, seed,
                                      {"algorithm": "memoized", **step}, score_at, args.passes,
                                      args.model)
                    r.update(method="memoized", K=K, seed=seed)
                    runs.append(r)
                    log(f"K={K} seed={seed} memoized: {r['final']:.4f} ({r['cpu_seconds']:.0f}"
                        f" s) {r['heldout']}")
                    write_json(out, payload)
                for name in names:
                    params = ({"algorithm": "stochastic", **step}
                              | resolve(grid[name], n_docs, args.local_step))
                    r = fit_and_score(X, X_test, K, seed, params, score_at, args.passes,
                                      args.model)
                    r.update(method="stochastic", config=name, K=K, seed=seed)
                    runs.append(r)
                    log(f"K={K} seed={seed} {name}: {r['final']:.4f} ({r['cpu_seconds']:.0f} s)"
                        f" {r['heldout']}")
                    payload["environment"]["loadavg"] = os.getloadavg()
                    write_json(out, payload)
    payload["summary_gap_to_memoized"] = gaps_to_memoized(runs)
    payload["environment"]["loadavg"] = os.getloadavg()
    write_json(out, payload)
    for k, v in payload["summary_gap_to_memoized"].items():
        log(f"{k}: gap {v['mean']:+.4f} (per seed {np.round(v['per_seed'], 4).tolist()})")


if __name__ == "__main__":
    main()
