# SPDX-License-Identifier: BSD-3-Clause
"""Which fixed point memoized SparseLDA reaches, by initialization (20 Newsgroups).

SparseLDA (memoized, 5 batches, L = 8, no restarts) from several starting topic-word counts,
scored after every pass by the held-out benchmark's scorer (same split, same test documents,
same alpha as ``bench_lda_heldout.py``), with the whole-corpus ELBO of every pass:

* ``kmeans++`` -- the default: KL k-means++ seeding, then KL k-means assigning each document
  to argmax_k sum_v x_dv log mu_kv;
* ``seeds-only`` -- the k-means++ seed documents alone (no k-means iterations);
* ``smoothed-kmeans`` -- the seeding followed by 10 iterations of the assignment rule that
  scores the *smoothed* document, argmax_k sum_v (x_dv + tau) log mu_kv (the rule the
  package used before; kept here as a reference);
* ``random`` -- ``init='random'``;
* ``tomotopy-warm`` -- topic-word counts of a tomotopy collapsed Gibbs run of ``--gibbs-sweeps``
  sweeps (same priors), given as ``init=``; its own score is printed too. This asks whether
  the variational objective itself or the search is what limits the held-out score.

``prep_seconds`` is the time to build an array given as ``init`` (the Gibbs run for
``tomotopy-warm``); the string inits run inside ``fit``. Scoring is excluded from the clock.

    python benchmarks/bench_lda_init.py --K 400 --passes 12
    python benchmarks/bench_lda_init.py --kos 8     # the command-line default run, 8 seeds
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    environment,
    newsgroups_heldout_split,
    token_lists,
    write_json,
)

from sparseclust import SparseLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402
from sparseclust.topics._sparse_lda import _kl_kmeanspp_seeds  # noqa: E402

TAU = 0.1


def smoothed_kmeans(X, seeds, tau, n_iter):
    """The superseded assignment rule, argmax_k sum_v (x_dv + tau) log mu_kv (reference)."""
    D = X.shape[0]
    counts = X[seeds].toarray()
    for _ in range(n_iter):
        logmu = np.log(counts + tau) - np.log((counts + tau).sum(axis=1, keepdims=True))
        score = np.asarray(X @ logmu.T) + tau * logmu.sum(axis=1)[None, :]
        z = np.argmax(score, axis=1)
        R = sp.csr_array((np.ones(D), (z, np.arange(D))), shape=(counts.shape[0], D))
        new = np.asarray((R @ X).toarray())
        empty = new.sum(axis=1) == 0
        new[empty] = counts[empty]
        counts = new
    return counts


def tomotopy_counts(X, K, alpha, sweeps, seed):
    """Topic-word counts n_kv of a tomotopy LDAModel after ``sweeps`` Gibbs sweeps."""
    import tomotopy as tp

    model = tp.LDAModel(tw=tp.TermWeight.ONE, k=K, alpha=alpha, eta=TAU, seed=seed)
    model.optim_interval = 0
    for words in token_lists(X):
        if words:
            model.add_doc(words)
    model.train(sweeps, workers=1)
    V = X.shape[1]
    cols = np.array([int(w) for w in model.used_vocabs])
    phi = np.zeros((K, V))
    for k in range(K):
        phi[k, cols] = model.get_topic_word_dist(k)
    n_k = np.asarray(model.get_count_by_topics(), dtype=np.float64)
    counts = np.zeros((K, V))
    # get_topic_word_dist = (n_kv + eta) / (n_k + V_used eta)
    counts[:, cols] = phi[:, cols] * (n_k[:, None] + cols.size * TAU) - TAU
    return np.maximum(counts, 0.0), phi


def kos_check(n_seeds, score_threads):
    """The ``sparseclust topics`` default run (bundled KOS, K = 20, L = 8, 30 passes, 10% of the
    documents held out) for seeds 0..n_seeds-1, from the default start and from the seeding
    followed by the smoothed assignment rule. Returns one row per seed."""
    from sparseclust.cli import _split_documents
    from sparseclust.datasets import load_kos

    X = sp.csr_array(load_kos().data, dtype=np.float64)
    rows = []
    for seed in range(n_seeds):
        tr, te = _split_documents(X.shape[0], 0.1, seed)
        Xtr, Xte = X[tr], X[te]
        rng = np.random.RandomState(seed)
        old = smoothed_kmeans(Xtr, _kl_kmeanspp_seeds(Xtr, 20, TAU, rng), TAU, 10)
        row = {"seed": seed}
        for name, init in (("kmeans++", "kmeans++"), ("smoothed-kmeans", old)):
            # the array arm gets the generator as the seeding left it: same batch split
            state = np.random.RandomState(seed) if name == "kmeans++" else rng
            model = SparseLDA(n_components=20, L=8, max_iter=30, init=init, random_state=state)
            model.fit(Xtr)
            row[name] = float(
                document_completion_score(
                    model, Xte, heldout_fraction=0.2, random_state=seed, n_threads=score_threads
                )
            )
        print(row, flush=True)
        rows.append(row)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", type=int, default=400)
    p.add_argument("--L", type=int, default=8)
    p.add_argument("--passes", type=int, default=12)
    p.add_argument(
        "--inits",
        nargs="+",
        default=["kmeans++", "seeds-only", "smoothed-kmeans", "random", "tomotopy-warm"],
    )
    p.add_argument("--gibbs-sweeps", type=int, default=300)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--score-threads", type=int, default=2)
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="3,000 documents, K = 50, 3 passes")
    p.add_argument(
        "--kos",
        type=int,
        default=0,
        metavar="N",
        help="instead: the bundled KOS corpus as `sparseclust topics` runs it, N seeds",
    )
    p.add_argument("--out", default=str(RESULTS / "lda_init.json"))
    opts = p.parse_args(argv)
    if opts.kos:
        rows = kos_check(opts.kos, opts.score_threads)
        if opts.out == str(RESULTS / "lda_init.json"):
            opts.out = str(RESULTS / "lda_init_kos.json")
        settings = {
            "corpus": "KOS (bundled)",
            "n_components": 20,
            "L": 8,
            "max_iter": 30,
            "heldout_documents": 0.1,
            "heldout_fraction_of_word_types": 0.2,
            "restarts": 0,
            "seeds": list(range(opts.kos)),
        }
        payload = {"benchmark": "lda_init_kos", "settings": settings, "rows": rows}
        payload["environment"] = environment()
        write_json(opts.out, payload)
        print("| seed | kmeans++ | smoothed rule | difference |")
        print("|---|---|---|---|")
        for r in rows:
            d = r["kmeans++"] - r["smoothed-kmeans"]
            print(f"| {r['seed']} | {r['kmeans++']:.4f} | {r['smoothed-kmeans']:.4f} | {d:+.4f} |")
        return
    n_train = None
    if opts.quick:
        opts.K, opts.passes, opts.gibbs_sweeps, n_train = 50, 3, 20, 3000
        if opts.out == str(RESULTS / "lda_init.json"):
            opts.out = str(RESULTS / "lda_init_quick.json")

    Xtr, Xte, _ = newsgroups_heldout_split(opts.seed, opts.n_test, n_train)
    Xc = sp.csr_array(Xtr)
    K, alpha = opts.K, 0.5 / opts.K

    def score(topic_word):
        return float(
            document_completion_score(
                topic_word,
                Xte,
                heldout_fraction=0.2,
                random_state=opts.seed,
                doc_topic_prior=alpha,
                n_threads=opts.score_threads,
            )
        )

    runs = []
    for name in opts.inits:
        rng = np.random.RandomState(opts.seed)
        extra = {}
        t0 = time.perf_counter()
        if name == "kmeans++":
            init = "kmeans++"
        elif name == "random":
            init = "random"
        elif name == "seeds-only":
            init = Xc[_kl_kmeanspp_seeds(Xc, K, TAU, rng)].toarray()
        elif name == "smoothed-kmeans":
            init = smoothed_kmeans(Xc, _kl_kmeanspp_seeds(Xc, K, TAU, rng), TAU, 10)
        elif name == "tomotopy-warm":
            _kl_kmeanspp_seeds(Xc, K, TAU, rng)  # advance rng as the default start does
            try:
                init, phi = tomotopy_counts(Xtr, K, alpha, opts.gibbs_sweeps, opts.seed)
            except ImportError:
                print("tomotopy not installed: skipping tomotopy-warm", flush=True)
                continue
            extra = {"gibbs_sweeps": opts.gibbs_sweeps, "gibbs_score": score(phi)}
            print(f"tomotopy after {opts.gibbs_sweeps} sweeps: {extra['gibbs_score']:.4f}")
        else:
            p.error(f"unknown init {name!r}")
        prep = time.perf_counter() - t0
        curve = []

        def callback(info, curve=curve, name=name):
            lam = np.asarray(info["components"])
            s = score(lam / lam.sum(axis=1, keepdims=True))
            curve.append((int(info["pass"]), float(info["elapsed"]), s, float(info["elbo"])))
            print(
                f"{name:16s} pass {info['pass']:3d} t={info['elapsed']:7.1f}s "
                f"heldout {s:.4f} elbo/token {info['elbo'] / Xtr.sum():.5f}",
                flush=True,
            )
            return False

        t1 = time.perf_counter()
        model = SparseLDA(
            n_components=K,
            L=opts.L,
            doc_topic_prior=alpha,
            topic_word_prior=TAU,
            n_batches=5,
            max_iter=opts.passes,
            tol=0,
            init=init,
            # an array init draws nothing from the generator, the string inits draw their own:
            # handing over the generator as the seeding left it (seeding code identical to the
            # estimator's) gives every arm the engine's batch split of the default arm
            random_state=np.random.RandomState(opts.seed) if isinstance(init, str) else rng,
            n_threads=opts.threads,
        )
        model.fit(Xtr, callback=callback)
        wall = time.perf_counter() - t1
        runs.append(
            {
                "init": name,
                "curve": curve,
                "prep_seconds": prep,
                "best": max(c[2] for c in curve),
                "final": curve[-1][2],
                "final_elbo_per_token": curve[-1][3] / float(Xtr.sum()),
                "fit_wall_seconds": wall,
                **extra,
            }
        )
        write_json(
            opts.out,
            {
                "benchmark": "lda_init",
                "settings": vars(opts),
                "environment": environment(),
                "runs": runs,
            },
        )

    print(f"\nK = {K}, L = {opts.L}, memoized, {opts.passes} passes")
    print("| init | held-out after pass 1 | best | final | final ELBO / token |")
    print("|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['init']} | {r['curve'][0][2]:.4f} | {r['best']:.4f} | {r['final']:.4f} "
            f"| {r['final_elbo_per_token']:.5f} |"
        )


if __name__ == "__main__":
    main()
