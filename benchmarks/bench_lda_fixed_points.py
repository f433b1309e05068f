# SPDX-License-Identifier: BSD-3-Clause
"""Where SparseLDA's local steps lead from a given set of topics: warm starts on
20 Newsgroups at K = 400 (alpha = 0.5 / K, topic-word prior 0.1, one thread, CPU seconds).

``refs``
    Reference topics on the held-out split of ``bench_lda_heldout.py`` (``--seed``):
    tomotopy's collapsed Gibbs sampler for ``--tomotopy-budget`` CPU seconds and memoized
    SparseLDA with the variational step (k-means++ start) for ``--variational-budget``;
    their topic-word counts are cached under ``--cache`` (not results) and scored.
``warm``
    From each cached reference (``--refs``), SparseLDA with the local steps of ``--methods``
    (``gibbs-memoized``, ``gibbs-stochastic``, ``variational-memoized``), ``init`` = the
    reference's counts, for ``--budget`` CPU seconds; held-out document completion of the
    reported test posts after every memoized pass (scoring outside the clock). A local step
    whose fixed point lies below the start moves the score down from it.

Usage::

    python benchmarks/bench_lda_fixed_points.py refs --seed 1
    python benchmarks/bench_lda_fixed_points.py warm --seed 1 --refs variational \
        --methods gibbs-memoized
    python benchmarks/bench_lda_fixed_points.py warm --seed 1 --refs tomotopy \
        --methods gibbs-memoized variational-memoized
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, environment, newsgroups_heldout_split, write_json  # noqa: E402
from bench_lda_heldout import (  # noqa: E402
    TOPIC_WORD_PRIOR,
    Scorer,
    Tomotopy,
    doc_topic_prior,
)

from sparseclust.topics import SparseLDA  # noqa: E402

K = 400
OUT = RESULTS / "lda_fixed_points.json"
METHODS = {
    "gibbs-memoized": dict(local_step="gibbs", algorithm="memoized"),
    "gibbs-stochastic": dict(local_step="gibbs", algorithm="stochastic"),
    "variational-memoized": dict(local_step="variational", algorithm="memoized"),
}


def _lda(seed, **kw):
    return SparseLDA(n_components=K, doc_topic_prior=doc_topic_prior(K),
                     topic_word_prior=TOPIC_WORD_PRIOR, max_iter=10_000, tol=0,
                     random_state=seed, n_threads=1, n_batches=10, **kw)


def _load(path):
    return json.loads(Path(path).read_text()) if Path(path).exists() else {}


def refs(opts):
    X, X_test, _ = newsgroups_heldout_split(seed=opts.seed)
    scorer = Scorer(X_test, K, opts.seed, 1)
    res = _load(opts.out)
    cache = Path(opts.cache)
    cache.mkdir(parents=True, exist_ok=True)
    with threadpool_limits(1):
        for name in opts.refs:
            t0 = time.process_time()
            if name == "tomotopy":
                runner = Tomotopy(X, K, opts.seed, 1)
                runner.start()
                while time.process_time() - t0 < opts.tomotopy_budget:
                    runner.step()
                sec = time.process_time() - t0
                lam = runner.topics()  # (n_kw + tau) / (n_k + V tau): back to counts
                n_k = np.asarray(runner.model.get_count_by_topics(), dtype=np.float64)
                counts = np.maximum(lam * (n_k + X.shape[1] * TOPIC_WORD_PRIOR)[:, None]
                                    - TOPIC_WORD_PRIOR, 0.0)
                units = {"sweeps": runner.total}
            else:
                budget = opts.variational_budget
                m = _lda(opts.seed)
                m.fit(X, callback=lambda info: time.process_time() - t0 >= budget)
                sec = time.process_time() - t0
                counts = m.components_ - TOPIC_WORD_PRIOR
                units = {"passes": m.n_iter_}
            np.save(cache / f"{name}_s{opts.seed}.npy", counts)
            score = scorer(counts + TOPIC_WORD_PRIOR)
            print(f"{name}: {sec:.1f} CPU s, {units}, score {score:.5f}", flush=True)
            res.setdefault(f"seed{opts.seed}", {}).setdefault("refs", {})[name] = {
                "cpu_seconds": sec, **units, "score": score}
            res.setdefault("environments", {})[f"refs-{name}-s{opts.seed}"] = environment()
            write_json(opts.out, res)


def warm(opts):
    X, X_test, _ = newsgroups_heldout_split(seed=opts.seed)
    scorer = Scorer(X_test, K, opts.seed, 1)
    res = _load(opts.out)
    for ref in opts.refs:
        counts = np.load(Path(opts.cache) / f"{ref}_s{opts.seed}.npy")
        start = scorer(counts + TOPIC_WORD_PRIOR)
        for name in opts.methods:
            print(f"from {ref}: {name} (start {start:.5f})", flush=True)
            curve = []
            clock = {"t": 0.0, "t1": 0.0}

            def callback(info, clock=clock, curve=curve, name=name):
                clock["t"] += time.process_time() - clock["t1"]
                p = info.get("pass")
                stop = clock["t"] >= opts.budget
                if "memoized" in name or stop or p in (1, 2, 4, 8, 16, 32, 64, 128):
                    s = scorer(np.asarray(info["components"]))
                    curve.append([clock["t"], s, p])
                    print(f"    t={clock['t']:7.1f}s pass={p} score={s:.5f}", flush=True)
                clock["t1"] = time.process_time()
                return stop

            with threadpool_limits(1):
                m = _lda(opts.seed, init=counts, **METHODS[name])
                clock["t1"] = time.process_time()
                m.fit(X, callback=callback)
            runs = res.setdefault(f"seed{opts.seed}", {}).setdefault("warm", {})
            runs.setdefault(ref, {})[name] = {
                "start_score": start, "budget_cpu_seconds": opts.budget,
                "curve": curve, "final_score": curve[-1][1],
                "best_score": max(c[1] for c in curve)}
            res.setdefault("environments", {})[f"warm-{ref}-{name}-s{opts.seed}"] = \
                environment()
            write_json(opts.out, res)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["refs", "warm"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--refs", nargs="+", default=["tomotopy", "variational"],
                   choices=["tomotopy", "variational"])
    p.add_argument("--methods", nargs="+", default=["gibbs-memoized"],
                   choices=sorted(METHODS))
    p.add_argument("--tomotopy-budget", type=float, default=400.0)
    p.add_argument("--variational-budget", type=float, default=150.0)
    p.add_argument("--budget", type=float, default=100.0)
    p.add_argument("--cache", default=str(Path(__file__).resolve().parent / "cache"))
    p.add_argument("--out", default=str(OUT))
    opts = p.parse_args()
    {"refs": refs, "warm": warm}[opts.what](opts)


if __name__ == "__main__":
    main()
