# SPDX-License-Identifier: BSD-3-Clause
"""Held-out document completion against wall-clock time on 20 Newsgroups (Hughes & Sudderth 2016,
Fig. 4).

Methods, all with the same priors (alpha = 0.5 / K per topic, topic-word prior 0.1) and the
same thread count (``--threads``, default 1):

* SparseLDA, memoized and stochastic, L in {1, 8, K};
* scikit-learn ``LatentDirichletAllocation``, online (``partial_fit`` over the shuffled
  training set, minibatches of 128, its default learning schedule) and batch (one
  variational EM iteration at a time through its ``_em_step``);
* gensim ``LdaModel`` (online variational Bayes, its default schedule, chunks of 2000);
* tomotopy ``LDAModel`` (collapsed Gibbs sampling, hyperparameter optimisation off).

Every method's topics are scored by the same :func:`sparseclust.metrics.document_completion_score`
(same alpha, same split seed, same test documents) at checkpoints spaced geometrically in
training time; the time spent scoring is excluded from each method's clock. Each method
runs until its time budget (per K) is spent or it converges.

Data: ``20news-bydate.tar.gz`` read with ``tarfile``; headers (up to the first blank line)
removed; ``CountVectorizer(stop_words="english", min_df=5)`` fitted on ``train``; the
training documents are shuffled once (seeded) so that online methods do not see the
newsgroups one after another; a seeded subset of ``--n-test`` ``test`` documents is used
for document completion.

Usage::

    python benchmarks/bench_lda_heldout.py            # full run (K = 100, 400), ~40 min
    python benchmarks/bench_lda_heldout.py --quick    # smoke run, ~2 min
"""

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    Stopwatch,
    environment,
    newsgroups_heldout_split,
    token_lists,
    write_json,
)

from sparseclust.metrics import document_completion_score  # noqa: E402

TOPIC_WORD_PRIOR = 0.1


def doc_topic_prior(K):
    return 0.5 / K


# ---------------------------------------------------------------------------------------
# the evaluation loop


class Scorer:
    """Document completion of a topic matrix on the fixed test split; timed separately."""

    def __init__(self, X_test, K, seed, n_threads):
        self.X_test = X_test
        self.alpha = doc_topic_prior(K)
        self.seed = seed
        self.n_threads = n_threads
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, topic_word):
        t0 = time.perf_counter()
        s = document_completion_score(
            topic_word,
            self.X_test,
            heldout_fraction=0.2,
            random_state=self.seed,
            doc_topic_prior=self.alpha,
            n_threads=self.n_threads,
        )
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return s


class Recorder:
    """Decides when to score (geometric checkpoints in training time) and keeps the curve."""

    def __init__(self, scorer, budget, first=1.0, growth=1.3, log=None, fixed=False):
        self.scorer = scorer
        self.budget = budget
        self.next = first
        self.growth = growth
        # fixed: checkpoints at the first step ending after each of first * growth**n, the
        # same times for every method (else growth times the last checkpoint's time)
        self.fixed = fixed
        self.curve = []  # (seconds, score, units of work)
        self.log = log

    def due(self, t):
        return t >= self.next or t >= self.budget

    def record(self, t, topic_word, units):
        score = self.scorer(topic_word)
        self.curve.append((float(t), float(score), units))
        if self.fixed:
            while self.next <= t:
                self.next *= self.growth
        else:
            self.next = max(t * self.growth, t + 0.5)
        if self.log:
            self.log(f"    t={t:8.2f}s  units={units!s:>6}  score={score: .5f}")
        return score


def run_stepper(runner, recorder, budget, clock=time.perf_counter):
    """Generic driver: ``runner.step()`` units of work until the budget is spent (on
    ``clock``: wall time by default)."""
    sw = Stopwatch(clock=clock)
    runner.start()
    units = 0
    while True:
        more = runner.step()
        units += 1
        t = sw.pause()
        last = (not more) or t >= budget
        if recorder.due(t) or last:
            recorder.record(t, runner.topics(), runner.units(units))
        if last:
            break
        sw.resume()
    return sw.elapsed


# ---------------------------------------------------------------------------------------
# peers


class SklearnOnline:
    """scikit-learn online VB: partial_fit over consecutive chunks of the training set."""

    def __init__(self, X, K, seed, threads, chunk_batches=8):
        from sklearn.decomposition import LatentDirichletAllocation

        self.X = X
        self.model = LatentDirichletAllocation(
            n_components=K,
            doc_topic_prior=doc_topic_prior(K),
            topic_word_prior=TOPIC_WORD_PRIOR,
            learning_method="online",
            total_samples=X.shape[0],
            random_state=seed,
            n_jobs=threads,
        )
        self.chunk = self.model.batch_size * chunk_batches
        self.pos = 0

    def start(self):
        pass

    def step(self):
        hi = min(self.pos + self.chunk, self.X.shape[0])
        self.model.partial_fit(self.X[self.pos : hi])
        self.pos = 0 if hi >= self.X.shape[0] else hi
        return True

    def topics(self):
        return self.model.components_

    def units(self, n):
        return round(n * self.chunk / self.X.shape[0], 3)  # passes


class SklearnBatch:
    """scikit-learn batch VB, one EM iteration per step (its private ``_em_step``)."""

    def __init__(self, X, K, seed, threads):
        from sklearn.decomposition import LatentDirichletAllocation

        self.X = X
        self.model = LatentDirichletAllocation(
            n_components=K,
            doc_topic_prior=doc_topic_prior(K),
            topic_word_prior=TOPIC_WORD_PRIOR,
            learning_method="batch",
            random_state=seed,
            n_jobs=threads,
        )

    def start(self):
        self.model._init_latent_vars(self.X.shape[1], dtype=np.float64)

    def step(self):
        self.model._em_step(self.X, total_samples=self.X.shape[0], batch_update=True)
        return True

    def topics(self):
        return self.model.components_

    def units(self, n):
        return n


class Gensim:
    """gensim LdaModel (online VB), ``update`` over consecutive chunks of documents."""

    def __init__(self, X, K, seed, threads, chunksize=2000, chunks_per_step=1):
        from gensim.models import LdaModel

        self.K = K
        self.V = X.shape[1]
        # bag-of-words lists, prepared outside the timed region (as CSR is for the others)
        self.corpus = [
            list(
                zip(
                    X.indices[X.indptr[d] : X.indptr[d + 1]].tolist(),
                    X.data[X.indptr[d] : X.indptr[d + 1]].tolist(),
                    strict=True,
                )
            )
            for d in range(X.shape[0])
        ]
        self.id2word = {j: str(j) for j in range(self.V)}
        self.chunksize = chunksize
        self.step_docs = chunksize * chunks_per_step
        self.make = lambda: LdaModel(
            num_topics=K,
            id2word=self.id2word,
            alpha=np.full(K, doc_topic_prior(K)),
            eta=TOPIC_WORD_PRIOR,
            chunksize=chunksize,
            passes=1,
            random_state=seed,
            eval_every=None,
            update_every=1,
        )
        self.pos = 0

    def start(self):
        self.model = self.make()

    def step(self):
        hi = min(self.pos + self.step_docs, len(self.corpus))
        self.model.update(self.corpus[self.pos : hi], chunks_as_numpy=False)
        self.pos = 0 if hi >= len(self.corpus) else hi
        return True

    def topics(self):
        return self.model.get_topics()

    def units(self, n):
        return round(n * self.step_docs / len(self.corpus), 3)


class Tomotopy:
    """tomotopy LDAModel: collapsed Gibbs sampling, ``train`` a few sweeps per step."""

    def __init__(self, X, K, seed, threads, sweeps_per_step=5):
        import tomotopy as tp

        self.tp = tp
        self.K = K
        self.V = X.shape[1]
        self.threads = threads
        self.sweeps = sweeps_per_step
        self.seed = seed
        # token lists prepared outside the timed region
        self.docs = token_lists(X)
        self.total = 0

    def start(self):
        tp = self.tp
        self.model = tp.LDAModel(
            tw=tp.TermWeight.ONE,
            k=self.K,
            alpha=doc_topic_prior(self.K),
            eta=TOPIC_WORD_PRIOR,
            seed=self.seed,
        )
        self.model.optim_interval = 0  # keep the priors fixed, as for every other method
        for words in self.docs:
            if words:
                self.model.add_doc(words)
        self.model.train(0, workers=self.threads)
        vocab = np.array([int(w) for w in self.model.used_vocabs])
        self.cols = vocab

    def step(self):
        self.model.train(self.sweeps, workers=self.threads)
        self.total += self.sweeps
        return True

    def topics(self):
        phi = np.full((self.K, self.V), 0.0)
        for k in range(self.K):
            phi[k, self.cols] = self.model.get_topic_word_dist(k)
        # words absent from the training tokens (none with min_df on train) get the prior mass
        missing = np.setdiff1d(np.arange(self.V), self.cols)
        if missing.size:
            phi[:, missing] = phi[:, self.cols].min(axis=1, keepdims=True)
        return phi

    def units(self, n):
        return self.total  # sweeps


# ---------------------------------------------------------------------------------------
# SparseLDA


def sparselda_topic_word(model, info):
    """Current topic-word pseudo-counts lambda inside SparseLDA's per-pass ``fit`` callback."""
    return np.asarray(info["components"])


@contextlib.contextmanager
def per_pass_callback(model, callback):
    """Yield a function fitting ``model`` with ``callback(info)`` after every pass."""
    yield lambda X: model.fit(X, callback=callback)


def run_sparselda(X, K, L, algorithm, seed, threads, recorder, budget, opts):
    from sparseclust.topics import SparseLDA

    kw = dict(
        n_components=K,
        L=L,
        algorithm=algorithm,
        doc_topic_prior=doc_topic_prior(K),
        topic_word_prior=TOPIC_WORD_PRIOR,
        max_iter=opts.max_passes,
        tol=opts.tol,
        random_state=seed,
        n_threads=threads,
    )
    if algorithm == "memoized":
        kw["n_batches"] = opts.n_batches
    if algorithm == "stochastic":
        kw.update(batch_size=opts.svi_batch_size, kappa=opts.kappa, delta=opts.delta)
    model = SparseLDA(**kw)
    sw = Stopwatch()
    last_pass = [None]

    def callback(info):
        t = sw.pause()
        stop = t >= budget
        last_pass[0] = info.get("pass")
        if recorder.due(t) or stop:
            recorder.record(t, sparselda_topic_word(model, info), info.get("pass"))
        sw.resume()
        return stop

    with per_pass_callback(model, callback) as fit:
        fit(X)
    t = sw.pause()
    if not recorder.curve or recorder.curve[-1][2] != last_pass[0]:
        recorder.record(t, model.topic_word_distribution_, model.n_iter_)
    return t


# ---------------------------------------------------------------------------------------
# main


def method_list(K, selected):
    methods = []
    for alg in ("memoized", "stochastic"):
        for L in (1, 8, K):
            name = f"sparselda-{'mvi' if alg == 'memoized' else 'svi'}-L{'K' if L == K else L}"
            methods.append((name, ("sparselda", alg, L)))
    methods += [
        ("sklearn-online", ("sklearn-online",)),
        ("sklearn-batch", ("sklearn-batch",)),
        ("gensim", ("gensim",)),
        ("tomotopy", ("tomotopy",)),
    ]
    if selected:
        keep = set(selected)
        methods = [m for m in methods if m[0] in keep or m[0].rsplit("-", 1)[0] in keep]
    return methods


def first_time_reaching(curve, target):
    for t, s, _ in curve:
        if s >= target:
            return t
    return None


def summarize(runs_for_k):
    """Final/best scores and time to reach scikit-learn's best score, per method."""
    sk = [r for r in runs_for_k if r["method"].startswith("sklearn")]
    best_sk = max((s for r in sk for _, s, _ in r["curve"]), default=None)
    sk_time = None
    if best_sk is not None:
        times = [first_time_reaching(r["curve"], best_sk) for r in sk]
        sk_time = min(t for t in times if t is not None)
    rows = []
    for r in runs_for_k:
        curve = r["curve"]
        t_reach = first_time_reaching(curve, best_sk) if best_sk is not None else None
        rows.append(
            {
                "method": r["method"],
                "final_score": curve[-1][1],
                "best_score": max(s for _, s, _ in curve),
                "train_seconds": curve[-1][0],
                "units": curve[-1][2],
                "time_to_sklearn_best": t_reach,
                "ratio_to_sklearn_time": (t_reach / sk_time)
                if (t_reach is not None and sk_time)
                else None,
            }
        )
    return {"sklearn_best_score": best_sk, "sklearn_time_to_best": sk_time, "rows": rows}


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    ks = sorted({r["K"] for r in results["runs"]})
    fig, axes = plt.subplots(1, len(ks), figsize=(6.5 * len(ks), 4.8), squeeze=False)
    styles = {
        "mvi": "-",
        "svi": "--",
        "sklearn": ":",
        "gensim": "-.",
        "tomotopy": (0, (1, 1)),
    }
    colors = {
        "L1": "tab:red",
        "L8": "tab:blue",
        "LK": "tab:green",
        "sklearn-online": "tab:gray",
        "sklearn-batch": "black",
        "gensim": "tab:purple",
        "tomotopy": "tab:orange",
    }
    for ax, K in zip(axes[0], ks, strict=True):
        for r in results["runs"]:
            if r["K"] != K:
                continue
            name = r["method"]
            t = [max(c[0], 1e-2) for c in r["curve"]]
            s = [c[1] for c in r["curve"]]
            if name.startswith("sparselda"):
                _, alg, ltag = name.split("-")
                ls, color = styles[alg], colors[ltag]
                lname = {"LK": "L=K", "L1": "L=1", "L8": "L=8"}[ltag]
                label = f"SparseLDA {alg.upper()} {lname}"
            else:
                ls = styles[name.split("-")[0]]
                color = colors[name]
                label = name
            ax.plot(t, s, linestyle=ls, color=color, marker=".", label=label)
        ax.set_xscale("log")
        ticks = [
            t
            for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
            if t <= 2 * max(c[0] for r in results["runs"] if r["K"] == K for c in r["curve"])
        ]
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("training time (s, log scale; scoring excluded)")
        ax.set_ylabel("held-out log-likelihood per token")
        ax.set_title(f"20 Newsgroups, K = {K}")
        ax.grid(alpha=0.3)
        # zoom on the useful range
        finals = [r["curve"][-1][1] for r in results["runs"] if r["K"] == K]
        lo = np.percentile(finals, 10) - 0.4
        hi = max(c[1] for r in results["runs"] if r["K"] == K for c in r["curve"]) + 0.05
        ax.set_ylim(lo, hi)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown_table(results):
    lines = []
    for K, summ in sorted(results["summary"].items(), key=lambda kv: int(kv[0])):
        if summ.get("sklearn_best_score") is None:  # run without the scikit-learn methods
            lines.append(f"\nK = {K}: no scikit-learn method in this run\n")
        else:
            lines.append(
                f"\nK = {K}: scikit-learn's best held-out score "
                f"{summ['sklearn_best_score']:.4f} "
                f"reached after {summ['sklearn_time_to_best']:.1f} s\n"
            )
        lines.append(
            "| method | final score | best score | training time (s) | passes / sweeps | "
            "time to sklearn's best (s) | ratio to sklearn's time |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        for row in summ["rows"]:
            t = row["time_to_sklearn_best"]
            ratio = row["ratio_to_sklearn_time"]
            lines.append(
                f"| {row['method']} | {row['final_score']:.4f} | {row['best_score']:.4f} | "
                f"{row['train_seconds']:.1f} | {row['units']} | "
                f"{'—' if t is None else f'{t:.1f}'} | "
                f"{'—' if ratio is None else f'{ratio:.2f}'} |"
            )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ks", type=int, nargs="+", default=[100, 400])
    p.add_argument(
        "--budget",
        type=float,
        nargs="+",
        default=None,
        help="training seconds per method, one value per K or one for all "
        "(default 60 for K <= 100, 120 above; 10 with --quick)",
    )
    p.add_argument("--threads", type=int, default=1, help="threads of every method (default 1)")
    p.add_argument("--score-threads", type=int, default=2, help="threads of the (untimed) scoring")
    p.add_argument(
        "--n-test", type=int, default=1000, help="test documents scored (seeded subset)"
    )
    p.add_argument(
        "--n-train", type=int, default=None, help="use only this many training documents"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="subset of methods, e.g. sparselda-mvi-L8 sklearn-online gensim",
    )
    p.add_argument(
        "--n-batches", type=int, default=5, help="SparseLDA memoized batches (paper: 5)"
    )
    p.add_argument(
        "--svi-batch-size", type=int, default=500, help="SparseLDA stochastic minibatch"
    )
    p.add_argument("--kappa", type=float, default=0.55, help="SparseLDA stochastic decay")
    p.add_argument("--delta", type=float, default=10.0, help="SparseLDA stochastic delay")
    p.add_argument("--max-passes", type=int, default=1000)
    p.add_argument(
        "--tol",
        type=float,
        default=8e-5,
        help="SparseLDA's tol: ELBO change per training token that ends training early (the "
        "stored runs used the earlier relative measure, 1e-5, about 8e-5 per token here)",
    )
    p.add_argument("--growth", type=float, default=1.5, help="ratio between scoring checkpoints")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 3000 training / 300 test documents, K = 50, 10 s per method",
    )
    p.add_argument("--out", default=str(RESULTS / "lda_heldout.json"))
    p.add_argument(
        "--replot",
        action="store_true",
        help="only redraw the plot and table from an existing --out JSON",
    )
    opts = p.parse_args(argv)
    if opts.replot:
        with open(opts.out) as fh:
            results = json.load(fh)
        plot(results, Path(opts.out).with_suffix(".png"))
        print(markdown_table(results))
        return results
    if opts.quick:
        opts.ks, opts.n_train, opts.n_test = [50], 3000, 300
        opts.budget = opts.budget or [10.0]
        if opts.out == str(RESULTS / "lda_heldout.json"):
            opts.out = str(RESULTS / "lda_heldout_quick.json")
    if opts.budget is None:
        opts.budget = [60.0 if K <= 100 else 120.0 for K in opts.ks]
    budgets = opts.budget * len(opts.ks) if len(opts.budget) == 1 else opts.budget
    if len(budgets) != len(opts.ks):
        p.error("--budget needs one value, or one per K")

    def log(msg):
        print(msg, flush=True)

    t0 = time.perf_counter()
    # train shuffled once (for the online methods), seeded test subset
    X_train, X_test, vocab = newsgroups_heldout_split(opts.seed, opts.n_test, opts.n_train)
    log(
        f"20 Newsgroups: train {X_train.shape[0]} docs x {X_train.shape[1]} words, "
        f"{int(X_train.sum())} tokens; test subset {X_test.shape[0]} docs, "
        f"{int(X_test.sum())} tokens "
        f"({time.perf_counter() - t0:.1f}s to load)"
    )

    results = {
        "benchmark": "lda_heldout",
        "dataset": {
            "name": "20newsgroups-bydate",
            "headers_removed": True,
            "min_df": 5,
            "stop_words": "english",
            "n_train": X_train.shape[0],
            "n_test": X_test.shape[0],
            "n_words": X_train.shape[1],
            "train_tokens": float(X_train.sum()),
            "test_tokens": float(X_test.sum()),
        },
        "settings": {k: v for k, v in vars(opts).items()},
        "priors": {"doc_topic_prior": "0.5/K", "topic_word_prior": TOPIC_WORD_PRIOR},
        "environment": environment(),
        "runs": [],
        "summary": {},
    }

    for K, budget in zip(opts.ks, budgets, strict=True):
        log(f"\n=== K = {K}, budget {budget:.0f} s per method, {opts.threads} thread(s) ===")
        scorer = Scorer(X_test, K, opts.seed, opts.score_threads)
        for name, spec in method_list(K, opts.methods):
            log(f"  {name}")
            recorder = Recorder(scorer, budget, growth=opts.growth, log=log)
            scorer.seconds = 0.0
            with threadpool_limits(limits=opts.threads):
                if spec[0] == "sparselda":
                    run_sparselda(
                        X_train,
                        K,
                        spec[2],
                        spec[1],
                        opts.seed,
                        opts.threads,
                        recorder,
                        budget,
                        opts,
                    )
                else:
                    cls = {
                        "sklearn-online": SklearnOnline,
                        "sklearn-batch": SklearnBatch,
                        "gensim": Gensim,
                        "tomotopy": Tomotopy,
                    }[spec[0]]
                    runner = cls(X_train, K, opts.seed, opts.threads)
                    run_stepper(runner, recorder, budget)
            results["runs"].append(
                {
                    "method": name,
                    "K": K,
                    "curve": recorder.curve,
                    "scoring_seconds": scorer.seconds,
                }
            )
            write_json(opts.out, results)
        results["summary"][str(K)] = summarize([r for r in results["runs"] if r["K"] == K])
        write_json(opts.out, results)

    out = Path(opts.out)
    write_json(out, results)
    try:
        plot(results, out.with_suffix(".png"))
    except ImportError:
        log("matplotlib not installed: no plot")
    table = markdown_table(results)
    log(table)
    log(f"\nwrote {out} and {out.with_suffix('.png')} ({(time.perf_counter() - t0) / 60:.1f} min)")
    return results


if __name__ == "__main__":
    main()
