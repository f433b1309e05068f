# SPDX-License-Identifier: BSD-3-Clause
"""HDPTopicModel against the grid of SparseLDA fits a user would otherwise run, and against the
HDP topic models of gensim and tomotopy: learned number of topics, held-out document
completion and wall-clock time, on KOS and 20 Newsgroups.

Methods (one thread each, topic-word prior 0.1, document concentration alpha = 0.5):

* ``hdp``: HDPTopicModel from a truncation of ``--truncation`` topics (default 200), memoized
  training with merge/delete/sort moves, L = 8, its default initialization and stopping rule
  (``init='auto'``: 800 stochastic EM sweeps, 300 before 30a831f, seeded from the model's
  ``random_state``; ``tol='auto'``, 1e-2 after the sweeps since 30a831f, 1e-4 before; the
  runs stored before the sweeps, ``hdp.json`` and ``hdp_more_seeds.json``, started from
  k-means++);
  several seeds;
* ``lda-K``: SparseLDA at K in ``--ks`` (memoized, L = 8, alpha = 0.5 / K per topic, i.e. the
  same total prior mass), its default stopping rule; plus one SparseLDA at the K the HDP
  learned (seed by seed), for the time and pass-time ratios;
* ``gensim-hdp``: gensim ``HdpModel`` (online variational HDP; T = truncation, second-level
  truncation K = 15 as its default, alpha = 0.5, gamma as ours, eta = 0.1, chunks of 256), one
  pass over the shuffled training set per step, its topics and document prior from
  ``hdp_to_lda``;
* ``tomotopy-hdp``: tomotopy ``HDPModel`` (collapsed Gibbs sampling of the Chinese restaurant
  franchise; alpha = 0.5, eta = 0.1, gamma as ours, ``optim_interval = 0`` so the priors stay
  fixed as for every other method, ``initial_k`` its default), 10 sweeps per step, scored on
  its live topics with document prior alpha times each live topic's share of the tokens.

The peers run for ``--peer-budget`` seconds (default: twice the slowest HDP fit). Every
method is scored by :func:`sparseclust.metrics.document_completion_score` on the same test
documents, split and seed; scoring time is excluded from every clock. Times are CPU seconds of
the (single-threaded) process by default (``--clock wall`` for wall time), so that ratios
between methods hold on a busy machine.

Data: KOS (bundled; 10% of the documents held out, seeded) and 20 Newsgroups (the split of
``bench_lda_heldout.py``: 11,314 training posts, 1,000 test posts).

The grid runs with seed 0 by default; ``--grid-seeds`` adds seeds, and each HDP seed is then
also compared with the best grid point of its own seed and with the mean over seeds of each
seed's best (``minus_best_grid_same_seed``, ``minus_mean_best_grid``). ``--reuse-hdp`` takes
the HDP fits (and SparseLDA at their learned K) of a stored result instead of re-running them.

Usage::

    python benchmarks/bench_hdp.py                       # both corpora, ~2-3 h on 2 cores
    python benchmarks/bench_hdp.py --corpora kos --quick # smoke run
    python benchmarks/bench_hdp.py --corpora kos --methods lda --grid-seeds 0 1 2 3 4 \
        --reuse results/hdp.json --reuse-hdp results/hdp_fast_sticks_kos.json
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    Stopwatch,
    environment,
    newsgroups_heldout_split,
    token_lists,
    write_json,
)

from sparseclust import HDPTopicModel, SparseLDA, StochasticEMLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402

ALPHA = 0.5
TAU = 0.1
# every method runs on one thread; CPU time of the process (``--clock cpu``, the default) is
# what a loaded machine disturbs least, wall time is kept beside it where it is available
CLOCK = time.process_time


def load(corpus, seed):
    if corpus == "kos":
        from sparseclust.datasets import load_kos

        X = sp.csr_array(load_kos().data, dtype=np.float64)
        perm = np.random.RandomState(seed).permutation(X.shape[0])
        n_test = int(round(0.1 * X.shape[0]))
        return X[np.sort(perm[n_test:])], X[np.sort(perm[:n_test])]
    X_train, X_test, _ = newsgroups_heldout_split(seed=seed)
    return sp.csr_array(X_train), sp.csr_array(X_test)


class Scorer:
    def __init__(self, X_test, seed):
        self.X_test, self.seed, self.seconds = X_test, seed, 0.0

    def __call__(self, topic_word, alpha):
        t0 = time.perf_counter()
        s = document_completion_score(topic_word, self.X_test, random_state=self.seed,
                                      doc_topic_prior=alpha, n_threads=1)
        self.seconds += time.perf_counter() - t0
        return float(s)


def live_from_lambda(lam):
    sizes = lam.sum(axis=1) - TAU * lam.shape[1]
    return sizes >= 1.0


def run_hdp(X, scorer, truncation, seed, gamma, max_iter, init_sweeps=None):
    init = {}
    if init_sweeps:  # start from stochastic EM sweeps (inside the clock) instead of k-means++
        init["init"] = StochasticEMLDA(truncation, max_iter=init_sweeps, random_state=seed,
                                       n_threads=1)
    m = HDPTopicModel(truncation, alpha=ALPHA, gamma=gamma, topic_word_prior=TAU, L=8,
                      max_iter=max_iter, random_state=seed, n_threads=1, **init)
    curve, marks = [], []
    sw = Stopwatch(clock=CLOCK)

    def cb(info):
        marks.append(sw.pause())
        lam = info["components"]
        live = live_from_lambda(lam)
        curve.append(dict(t=marks[-1], wall=info["elapsed"], n_live=int(live.sum()),
                          n_topics=int(lam.shape[0]), merges=info.get("merges_accepted", 0),
                          deletes=info.get("deletes_accepted", 0)))
        sw.resume()
        return False

    m.fit(X, callback=cb)
    seconds = sw.pause()
    final = scorer(m, None)
    # diagnostic, not the HDP's score: the same topics with SparseLDA's uniform document
    # prior alpha / K (separates the topics from the prior alpha E[beta] in a gap to SparseLDA)
    uniform = scorer(m.topic_word_distribution_, ALPHA / m.n_components_)
    return dict(method="hdp", seed=seed, gamma=gamma, init_sweeps=init_sweeps,
                n_live=m.n_components_,
                n_topics_model=m.n_topics_model_, n_iter=m.n_iter_, seconds=seconds,
                wall_seconds=m.trace_[-1]["elapsed"], final_score=final,
                final_score_uniform_prior=uniform, curve=curve,
                pass_seconds=np.diff([0.0] + marks).tolist(),
                trace=[{k: v for k, v in e.items() if isinstance(v, (int, float, bool))}
                       for e in m.trace_])


def run_lda(X, scorer, K, seed, max_iter, score_every_pass=True):
    m = SparseLDA(K, L=8, doc_topic_prior=ALPHA / K, topic_word_prior=TAU, max_iter=max_iter,
                  random_state=seed, n_threads=1)
    curve, marks = [], []
    sw = Stopwatch(clock=CLOCK)

    def cb(info):
        marks.append(sw.pause())
        if score_every_pass:
            lam = info["components"]
            curve.append(dict(t=marks[-1], wall=info["elapsed"],
                              score=scorer(lam / lam.sum(axis=1, keepdims=True), ALPHA / K)))
        sw.resume()
        return False

    m.fit(X, callback=cb)
    seconds = sw.pause()
    final = scorer(m, ALPHA / K)
    return dict(method=f"lda-{K}", K=K, seed=seed, n_iter=m.n_iter_, seconds=seconds,
                wall_seconds=m.trace_[-1]["elapsed"], final_score=final, curve=curve,
                pass_seconds=np.diff([0.0] + marks).tolist())


def run_gensim(X, scorer, truncation, seed, gamma, budget):
    from gensim.models import HdpModel

    V = X.shape[1]
    id2word = {i: str(i) for i in range(V)}
    rng = np.random.RandomState(seed)
    docs = [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(),
                     X.data[X.indptr[d]:X.indptr[d + 1]].tolist(), strict=True))
            for d in range(X.shape[0])]
    n_chunks = -(-len(docs) // 256)
    sw = Stopwatch(clock=CLOCK)
    hdp, curve, passes = None, [], 0
    while True:
        order = rng.permutation(len(docs))
        corpus = [docs[i] for i in order]
        if hdp is None:
            # the first pass is made by the constructor (a model built empty and then
            # updated returns NaN topics in the gensim version measured); max_chunks makes
            # every later ``update`` call exactly one pass
            hdp = HdpModel(corpus, id2word, max_chunks=n_chunks, chunksize=256, T=truncation,
                           alpha=ALPHA, gamma=gamma, eta=TAU, random_state=seed)
        else:
            hdp.update(corpus)
        passes += 1
        t = sw.pause()
        alpha, beta = hdp.hdp_to_lda()
        score = scorer(beta, np.maximum(alpha, 1e-12))
        curve.append(dict(t=t, score=score, passes=passes))
        if t >= budget:
            break
        sw.resume()
    return dict(method="gensim-hdp", seed=seed, n_live=int(truncation), seconds=curve[-1]["t"],
                final_score=curve[-1]["score"], curve=curve)


def run_tomotopy(X, scorer, seed, gamma, budget, sweeps=10):
    import tomotopy as tp

    V = X.shape[1]
    words = token_lists(X)
    sw = Stopwatch(clock=CLOCK)
    mdl = tp.HDPModel(tw=tp.TermWeight.ONE, alpha=ALPHA, eta=TAU, gamma=gamma, seed=seed)
    mdl.optim_interval = 0
    for w in words:
        if w:
            mdl.add_doc(w)
    mdl.train(0, workers=1)
    cols = np.array([int(w) for w in mdl.used_vocabs])
    curve, total = [], 0
    while True:
        mdl.train(sweeps, workers=1)
        total += sweeps
        t = sw.pause()
        live = [k for k in range(mdl.k) if mdl.is_live_topic(k)]
        counts = np.asarray(mdl.get_count_by_topics(), dtype=float)[live]
        phi = np.zeros((len(live), V))
        for i, k in enumerate(live):
            phi[i, cols] = mdl.get_topic_word_dist(k)
        missing = np.setdiff1d(np.arange(V), cols)
        if missing.size:
            phi[:, missing] = phi[:, cols].min(axis=1, keepdims=True)
        alpha = ALPHA * np.maximum(counts / counts.sum(), 1e-12)
        score = scorer(phi, alpha)
        curve.append(dict(t=t, score=score, sweeps=total, n_live=len(live)))
        if t >= budget:
            break
        sw.resume()
    return dict(method="tomotopy-hdp", seed=seed, n_live=curve[-1]["n_live"],
                seconds=curve[-1]["t"], final_score=curve[-1]["score"], curve=curve)


def summarize(runs):
    hdp = [r for r in runs if r["method"] == "hdp"]
    grid = [r for r in runs if r["method"].startswith("lda-") and r.get("grid")]
    # the best grid point of every grid seed; "the grid's best" is that of the first seed
    # (seed 0 unless --grid-seeds says otherwise), never the best over seeds
    by_seed = {}
    for r in grid:
        if r["seed"] not in by_seed or r["final_score"] > by_seed[r["seed"]]["final_score"]:
            by_seed[r["seed"]] = r
    best = by_seed[min(by_seed)] if by_seed else None
    first = [r for r in grid if best and r["seed"] == best["seed"]]
    out = {"best_grid_K": best["K"] if best else None,
           "best_grid_score": best["final_score"] if best else None,
           "grid_seconds": float(sum(r["seconds"] for r in first)),
           "best_grid_by_seed": {str(k): dict(K=r["K"], score=r["final_score"])
                                 for k, r in sorted(by_seed.items())},
           "mean_best_grid_score": (float(np.mean([r["final_score"] for r in by_seed.values()]))
                                    if by_seed else None),
           "hdp": []}
    for h in hdp:
        at_k = [r for r in runs if r["method"].startswith("lda-") and r.get("learned_for")
                == h["seed"]]
        row = dict(seed=h["seed"], n_live=h["n_live"], score=h["final_score"],
                   seconds=h["seconds"], passes=h["n_iter"])
        if best:
            row["minus_best_grid"] = h["final_score"] - best["final_score"]
            row["minus_mean_best_grid"] = h["final_score"] - out["mean_best_grid_score"]
        if h["seed"] in by_seed:
            row["minus_best_grid_same_seed"] = h["final_score"] - by_seed[h["seed"]]["final_score"]
        if at_k:
            lda = at_k[0]
            row["lda_at_learned_K_seconds"] = lda["seconds"]
            row["lda_at_learned_K_score"] = lda["final_score"]
            row["time_ratio_to_lda_at_learned_K"] = h["seconds"] / lda["seconds"]
            # pass time once the number of topics has settled: the last third of the passes
            hp = h["pass_seconds"][-max(1, len(h["pass_seconds"]) // 3):]
            row["pass_ratio_to_lda"] = float(np.median(hp) / np.median(lda["pass_seconds"]))
        for peer in ("gensim-hdp", "tomotopy-hdp"):
            pr = [r for r in runs if r["method"] == peer]
            if pr:
                row[f"minus_{peer}"] = h["final_score"] - pr[0]["final_score"]
        out["hdp"].append(row)
    return out


#: line colours of the grid's K (C3 and C4 are the HDP's and tomotopy's)
GRID_COLOURS = ["C0", "C1", "C2", "C5", "C6", "C7", "C8", "C9"]


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    corpora = list(results)
    fig, axes = plt.subplots(2, len(corpora), figsize=(6.5 * len(corpora), 8), squeeze=False)
    for j, c in enumerate(corpora):
        runs = results[c]["runs"]
        ax, ax2 = axes[0, j], axes[1, j]
        for r in runs:
            m = r["method"]
            if m == "hdp":
                ts = [p["t"] for p in r["curve"]]
                ax2.plot(ts, [p["n_live"] for p in r["curve"]], "-", color="C3", alpha=0.7,
                         label="HDPTopicModel" if r["seed"] == 0 else None)
                ax.plot([r["seconds"]], [r["final_score"]], "o", color="C3",
                        label="HDPTopicModel (end)" if r["seed"] == 0 else None)
            elif m.startswith("lda-") and r.get("grid"):
                # one line colour per K; the first grid seed labelled, later seeds thinner
                k_idx = sorted({q["K"] for q in runs if q.get("grid")}).index(r["K"])
                first = r["seed"] == min(q["seed"] for q in runs if q.get("grid"))
                ax.plot([p["t"] for p in r["curve"]], [p["score"] for p in r["curve"]], "-",
                        lw=1 if first else 0.5, color=GRID_COLOURS[k_idx % len(GRID_COLOURS)],
                        alpha=1.0 if first else 0.5,
                        label=f"SparseLDA K={r['K']}" if first else None)
            elif m == "gensim-hdp":
                ax.plot([p["t"] for p in r["curve"]], [p["score"] for p in r["curve"]], "--",
                        color="k", label="gensim HdpModel")
            elif m == "tomotopy-hdp":
                ax.plot([p["t"] for p in r["curve"]], [p["score"] for p in r["curve"]], ":",
                        color="C4", label="tomotopy HDPModel")
                ax2.plot([p["t"] for p in r["curve"]], [p["n_live"] for p in r["curve"]], ":",
                         color="C4", label="tomotopy HDPModel")
        ax.set_xscale("log")
        ax.set_title(f"{c}: held-out document completion")
        ax.set_ylabel("nats per held-out token")
        ax.set_xlabel("training CPU seconds (1 thread)")
        lo = max(min(p["score"] for r in runs for p in r.get("curve", []) if "score" in p),
                 max(r["final_score"] for r in runs) - 0.5)
        ax.set_ylim(bottom=lo)
        ax.legend(fontsize=7)
        ax2.set_xscale("log")
        ax2.set_title(f"{c}: live topics")
        ax2.set_xlabel("training CPU seconds (1 thread)")
        ax2.set_ylabel("topics")
        ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(results):
    lines = []
    for c, res in results.items():
        s = res["summary"]
        if s["best_grid_K"] is not None:
            lines.append(f"**{c}** (best SparseLDA on the grid: K = {s['best_grid_K']}, "
                         f"{s['best_grid_score']:.4f}; the whole grid took "
                         f"{s['grid_seconds']:.0f} CPU s)")
        else:
            lines.append(f"**{c}** (no SparseLDA grid in this run)")
        lines.append("")
        lines.append("| run | learned K | held-out | seconds | vs best grid | time / LDA at "
                     "learned K | pass / LDA pass |")
        lines.append("|---|---|---|---|---|---|---|")
        for h in s["hdp"]:
            lines.append(
                f"| HDP seed {h['seed']} | {h['n_live']} | {h['score']:.4f} | "
                f"{h['seconds']:.0f} | {h.get('minus_best_grid', float('nan')):+.4f} | "
                f"{h.get('time_ratio_to_lda_at_learned_K', float('nan')):.2f} | "
                f"{h.get('pass_ratio_to_lda', float('nan')):.2f} |")
        for r in res["runs"]:
            if r["method"] in ("gensim-hdp", "tomotopy-hdp"):
                lines.append(f"| {r['method']} | {r['n_live']} | {r['final_score']:.4f} | "
                             f"{r['seconds']:.0f} | | | |")
            elif r["method"].startswith("lda-") and r.get("grid"):
                lines.append(f"| SparseLDA K={r['K']} | {r['K']} | {r['final_score']:.4f} | "
                             f"{r['seconds']:.0f} | | | |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpora", nargs="+", default=["kos", "20ng"], choices=["kos", "20ng"])
    p.add_argument("--truncation", type=int, default=200)
    p.add_argument("--ks", type=int, nargs="+", default=[25, 50, 100, 200, 400])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--grid-seeds", type=int, nargs="+", default=[0],
                   help="seeds of the SparseLDA grid (grid runs already in --reuse are kept); "
                        "each HDP seed is also compared with the grid of its own seed")
    p.add_argument("--reuse-hdp", default=None,
                   help="a stored result whose HDP fits and SparseLDA fits at their learned K "
                        "are taken as they are (for adding grid seeds); the HDP is not re-run")
    p.add_argument("--gamma", type=float, default=None,
                   help="stick concentration (default: HDPTopicModel's default)")
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--init-sweeps", type=int, default=None,
                   help="start the HDP from this many StochasticEMLDA sweeps "
                        "(init=StochasticEMLDA(truncation, max_iter=N, random_state=seed)); "
                        "default: the model's default init")
    p.add_argument("--peer-budget", type=float, default=None)
    p.add_argument("--methods", nargs="+", default=["hdp", "lda", "gensim", "tomotopy"])
    p.add_argument("--quick", action="store_true", help="small smoke run")
    p.add_argument("--reuse", default=None,
                   help="a stored result whose SparseLDA grid and peer runs are taken as they "
                        "are (for a re-run of the HDP and the SparseLDA fits at its learned K "
                        "after a change to the HDP only); the reused runs are marked")
    p.add_argument("--out", default=str(RESULTS / "hdp.json"))
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                   help="time source for every method (CPU time of the process by default)")
    args = p.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    if args.quick:
        args.truncation, args.ks, args.seeds, args.max_iter = 40, [10, 20], [0], 5
        args.peer_budget = args.peer_budget or 10.0
    gamma = args.gamma if args.gamma is not None else HDPTopicModel().gamma
    results = {}

    def save(corpus, runs, X, X_test, budget=None):
        # written after every run, so an interrupted benchmark keeps what it measured
        results[corpus] = {"runs": runs, "summary": summarize(runs), "peer_budget": budget,
                           "n_train": X.shape[0], "n_test": X_test.shape[0],
                           "n_words": X.shape[1]}
        write_json(args.out, {"environment": environment(), "args": vars(args),
                              "alpha": ALPHA, "topic_word_prior": TAU, "gamma": gamma,
                              "results": results})

    for corpus in args.corpora:
        X, X_test = load(corpus, 0)
        scorer = Scorer(X_test, 0)
        print(f"== {corpus}: train {X.shape}, test {X_test.shape[0]} documents", flush=True)
        runs = []
        if args.reuse:
            old = json.loads(Path(args.reuse).read_text())
            commit = old.get("environment", {}).get("commit")
            for r in old["results"].get(corpus, {}).get("runs", []):
                if r.get("grid") or r["method"] in ("gensim-hdp", "tomotopy-hdp"):
                    runs.append(dict(r, reused_from=commit))
        if args.reuse_hdp:
            old_hdp = json.loads(Path(args.reuse_hdp).read_text())
            commit = old_hdp.get("environment", {}).get("commit")
            for r in old_hdp["results"].get(corpus, {}).get("runs", []):
                if r["method"] == "hdp" or r.get("learned_for") is not None:
                    runs.append(dict(r, reused_from=commit))
        if "hdp" in args.methods and not args.reuse_hdp:
            for seed in args.seeds:
                r = run_hdp(X, scorer, args.truncation, seed, gamma, args.max_iter,
                            args.init_sweeps)
                print(f"  hdp seed {seed}: K={r['n_live']} score={r['final_score']:.4f} "
                      f"{r['seconds']:.1f}s {r['n_iter']} passes", flush=True)
                runs.append(r)
                save(corpus, runs, X, X_test)
                if "lda" in args.methods:
                    lr = run_lda(X, scorer, r["n_live"], seed, args.max_iter,
                                 score_every_pass=False)
                    lr["learned_for"] = seed
                    print(f"    lda at K={r['n_live']}: {lr['final_score']:.4f} "
                          f"{lr['seconds']:.1f}s", flush=True)
                    runs.append(lr)
                    save(corpus, runs, X, X_test)
        if "lda" in args.methods:
            have = {(r["K"], r["seed"]) for r in runs if r.get("grid")}
            for gseed in args.grid_seeds:
                for K in args.ks:
                    if (K, gseed) in have:
                        continue
                    r = run_lda(X, scorer, K, gseed, args.max_iter)
                    r["grid"] = True
                    print(f"  lda K={K} seed {gseed}: {r['final_score']:.4f} "
                          f"{r['seconds']:.1f}s {r['n_iter']} passes", flush=True)
                    runs.append(r)
                    save(corpus, runs, X, X_test)
        if args.reuse:
            save(corpus, runs, X, X_test, old["results"].get(corpus, {}).get("peer_budget"))
            continue
        hdp_times = [r["seconds"] for r in runs if r["method"] == "hdp"]
        budget = args.peer_budget or (2.0 * max(hdp_times) if hdp_times else 300.0)
        if "gensim" in args.methods:
            r = run_gensim(X, scorer, args.truncation, 0, gamma, budget)
            print(f"  gensim: {r['final_score']:.4f} {r['seconds']:.1f}s", flush=True)
            runs.append(r)
            save(corpus, runs, X, X_test, budget)
        if "tomotopy" in args.methods:
            r = run_tomotopy(X, scorer, 0, gamma, budget)
            print(f"  tomotopy: K={r['n_live']} {r['final_score']:.4f} {r['seconds']:.1f}s",
                  flush=True)
            runs.append(r)
        save(corpus, runs, X, X_test, budget)
    print(markdown(results))
    plot(results, Path(args.out).with_suffix(".png"))
    return results


if __name__ == "__main__":
    main()
