# SPDX-License-Identifier: BSD-3-Clause
"""Effect of the document-level restart proposals on held-out quality (20 Newsgroups).

SparseLDA (memoized, L = 8) with ``restarts`` in {0, 4}, scored after every pass by
``document_completion_score`` on a seeded subset of test posts (with the whole-corpus ELBO of
the pass), until a time budget is spent.
Scoring time is excluded from the clock (the fit callback pauses it).

    python benchmarks/bench_lda_restarts.py --K 400 --budget 120 --threads 1
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, load_20newsgroups, vectorize, write_json  # noqa: E402

from sparseclust import SparseLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", type=int, default=400)
    p.add_argument("--L", type=int, default=8)
    p.add_argument("--restarts", type=int, nargs="+", default=[0, 4])
    p.add_argument("--budget", type=float, default=120.0, help="training seconds per setting")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "lda_restarts.json"))
    opts = p.parse_args(argv)

    train, test = load_20newsgroups("train")[0], load_20newsgroups("test")[0]
    Xtr, Xte, _ = vectorize(train, test)
    rng = np.random.RandomState(opts.seed)
    Xte = Xte[np.sort(rng.choice(Xte.shape[0], opts.n_test, replace=False))]
    Xtr = Xtr[np.random.RandomState(opts.seed + 1).permutation(Xtr.shape[0])]
    alpha = 0.5 / opts.K
    n_tokens = float(Xtr.sum())
    runs = []
    for r in opts.restarts:
        curve = []

        def score(info, curve=curve):
            lam = info["components"]
            s = document_completion_score(
                lam / lam.sum(axis=1, keepdims=True),
                Xte,
                random_state=opts.seed,
                doc_topic_prior=alpha,
            )
            curve.append((float(info["elapsed"]), float(s), float(info["elbo"])))
            print(
                f"restarts={r} pass {info['pass']:3d} t={info['elapsed']:7.1f}s heldout {s:.4f}"
                f" elbo/token {info['elbo'] / n_tokens:.5f}",
                flush=True,
            )
            return info["elapsed"] > opts.budget

        t0 = time.perf_counter()
        SparseLDA(
            n_components=opts.K,
            L=opts.L,
            n_batches=5,
            max_iter=1000,
            tol=0,
            restarts=r,
            random_state=opts.seed,
            n_threads=opts.threads,
        ).fit(Xtr, callback=score)
        runs.append(
            {
                "restarts": r,
                "curve": curve,
                "wall": time.perf_counter() - t0,
                "best": max(c[1] for c in curve),
                "final": curve[-1][1],
                "final_elbo_per_token": curve[-1][2] / n_tokens,
            }
        )
    write_json(
        opts.out,
        {
            "benchmark": "lda_restarts",
            "settings": vars(opts),
            "environment": environment(),
            "runs": runs,
        },
    )
    print("| restarts | best held-out | final held-out | final ELBO / token | passes |")
    print("|---|---|---|---|---|")
    for run in runs:
        print(
            f"| {run['restarts']} | {run['best']:.4f} | {run['final']:.4f} "
            f"| {run['final_elbo_per_token']:.5f} | {len(run['curve'])} |"
        )


if __name__ == "__main__":
    main()
