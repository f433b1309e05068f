# SPDX-License-Identifier: BSD-3-Clause
"""StochasticEMLDA against collapsed Gibbs samplers and SparseLDA on 20 Newsgroups or IMDB.

Methods, all with alpha = 0.5 / K and beta = 0.1 (``--paper-alpha`` adds runs with the
paper's alpha = 50 / K at the largest K for StochasticEMLDA and tomotopy):

* ``sem-1t``, ``sem-2t``: StochasticEMLDA (sampler 'auto'), 1 and 2 OpenMP threads;
* ``tomotopy``: tomotopy ``LDAModel`` (collapsed Gibbs, one thread, ``optim_interval=0``),
  5 sweeps per step; scored with its own topic-word distributions and, as ``curve_rb``, with
  the Rao-Blackwellized topics of its assignments (StochasticEMLDA's estimator applied to the
  peer's sample, computed by this library's kernel);
* ``lda``: the ``lda`` package (collapsed Gibbs, one sweep per step through its
  ``_sample_topics``);
* ``sparselda``: SparseLDA, memoized, L = 8, one thread.

Measured, per K:

* tokens per second of one sweep (median over the run's sweeps; for StochasticEMLDA the sweep
  includes the word weights, the alias tables and the log joint likelihood);
* held-out document completion (:func:`sparseclust.metrics.document_completion_score`, the
  scorer of ``bench_lda_heldout.py``: same split, same alpha) at geometric checkpoints of
  training time; the scoring time is excluded from each method's clock; StochasticEMLDA is
  scored with the topics its ``fit`` returns (Rao-Blackwellized counts, their computation
  inside the clock of the checkpoint) and, as ``curve_sample``, with the last sample's counts;
* the peak memory of a 3-sweep StochasticEMLDA fit (one thread) in a fresh subprocess per K:
  the peak resident set size above the loaded corpus (``--memory-only`` measures only this),
  and the peak of numpy's allocations (tracemalloc).

``--crossover-only`` times the dense and the alias paths of the sampler for small K on KOS
(the crossover used by ``sampler='auto'``, measured on a corpus other than the one reported).

Usage::

    python benchmarks/bench_sem.py                 # K = 100, 400, 1000; 60 s per method
    python benchmarks/bench_sem.py --quick         # smoke run
    python benchmarks/bench_sem.py --corpus imdb   # IMDB: 25,000 train reviews, 1000 test
    python benchmarks/bench_sem.py --clock cpu --methods sem-1t tomotopy   # CPU-time budgets
    python benchmarks/bench_sem.py --clock cpu --fixed-grid ...   # the same checkpoint times
    python benchmarks/bench_sem.py --threads-only --ks 400 --out results/sem_threads.json
    python benchmarks/bench_sem.py --memory-only --out results/sem_memory.json
    python benchmarks/bench_sem.py --crossover-only --out results/sem_crossover_kos.json
"""

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    Stopwatch,
    environment,
    imdb_heldout_split,
    newsgroups_heldout_split,
    write_json,
)
from bench_lda_heldout import Recorder, Scorer, Tomotopy, run_sparselda, run_stepper  # noqa: E402

from sparseclust import StochasticEMLDA  # noqa: E402

BETA = 0.1


class AlphaScorer(Scorer):
    """The held-out scorer with a given alpha (the 50 / K runs)."""

    def __init__(self, X_test, alpha, seed, n_threads):
        super().__init__(X_test, 1, seed, n_threads)
        self.alpha = alpha


class TomotopyAlpha(Tomotopy):
    def __init__(self, X, K, seed, threads, alpha):
        super().__init__(X, K, seed, threads)
        self.alpha = alpha

    def start(self):
        tp = self.tp
        self.model = tp.LDAModel(tw=tp.TermWeight.ONE, k=self.K, alpha=self.alpha, eta=BETA,
                                 seed=self.seed)
        self.model.optim_interval = 0
        for words in self.docs:
            if words:
                self.model.add_doc(words)
        self.model.train(0, workers=self.threads)
        self.cols = np.array([int(w) for w in self.model.used_vocabs])
        self.rb = []  # (CPU seconds of the estimate, its topics' held-out score)

    def rao_blackwell(self, clock):
        """The Rao-Blackwellized topics of tomotopy's current assignments (the estimator
        StochasticEMLDA returns, applied to the peer's sample: Papanikolaou et al. show it
        applies to any collapsed Gibbs sampler), and the ``clock`` seconds of computing them
        once the assignments are read out of tomotopy (the read-out is not timed)."""
        from sparseclust._kernels import _tokens as _sampler
        from sparseclust.topics._sem_sampler import TokenLayout, _RaoBlackwell

        words = [np.asarray(d.words, dtype=np.int32) for d in self.model.docs]
        z = np.concatenate([np.asarray(d.topics) for d in self.model.docs]).astype(np.uint16)
        tok = np.zeros(len(words) + 1, np.int64)
        np.cumsum([w.size for w in words], out=tok[1:])
        lay = TokenLayout(tok, np.concatenate(words), np.ones(z.size, np.int32), tok)
        t0 = clock()
        W = np.zeros((self.cols.size, self.K), np.int32)
        _sampler.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, 1)
        R = _RaoBlackwell(self.K, BETA, np.full(self.K, self.alpha), 1, W=W).sum(lay, [z])
        dt = clock() - t0
        phi = np.full((self.K, self.V), BETA)
        phi[:, self.cols] += R.T
        return phi / phi.sum(axis=1, keepdims=True), dt


class LdaPackage:
    """The ``lda`` package's collapsed Gibbs sampler, one sweep per step."""

    def __init__(self, X, K, seed, threads, alpha):
        import lda

        self.lda = lda
        self.X = X.astype(np.int64)
        self.K, self.seed, self.alpha = K, seed, alpha
        self.total = 0

    def start(self):
        self.model = self.lda.LDA(n_topics=self.K, n_iter=1, alpha=self.alpha, eta=BETA,
                                  random_state=self.seed, refresh=10**9)
        self.model._initialize(self.X)
        self.rands = self.model._rands.copy()
        self.rs = np.random.RandomState(self.seed)

    def step(self):
        self.rs.shuffle(self.rands)
        self.model._sample_topics(self.rands)
        self.total += 1
        return True

    def topics(self):
        c = self.model.nzw_ + BETA
        return c / c.sum(axis=1, keepdims=True)

    def units(self, n):
        return self.total


CORPORA = {"20newsgroups": ("20 Newsgroups", newsgroups_heldout_split),
           "imdb": ("IMDB", imdb_heldout_split)}
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def run_sem(X, K, alpha, seed, threads, recorder, budget, clock=time.perf_counter):
    """StochasticEMLDA until ``budget`` seconds of ``clock``; tokens/s of a sweep on the same
    clock (the time between two callbacks, the scoring excluded).

    The curve scores the topics ``fit`` would return if stopped at the checkpoint (the
    default ``topic_estimate='rao_blackwell'``), at the time of the sweeps so far plus the
    time of computing that estimate (paid once by a fit that stops there, so it is not added
    to the later checkpoints); ``curve_sample`` scores the counts of the same assignments
    (``topic_estimate='sample'``) at the time of the sweeps.
    """
    model = StochasticEMLDA(K, doc_topic_prior=alpha, topic_word_prior=BETA, max_iter=100000,
                            n_threads=threads, random_state=seed)
    sw = Stopwatch(clock=clock)
    stamps = [0.0]
    sample = []

    def callback(info):
        t = sw.pause()
        stamps.append(t)
        stop = t >= budget
        if recorder.due(t) or stop:
            t0 = clock()
            R = info["topic_estimate"]().T + BETA
            t_rb = clock() - t0
            recorder.record(t + t_rb, R / R.sum(axis=1, keepdims=True), info["sweep"])
            c = info["word_topic_counts"].T + BETA
            sample.append((t, float(recorder.scorer(c / c.sum(axis=1, keepdims=True))),
                           info["sweep"], t_rb))
        sw.resume()
        return stop

    model.fit(X, callback=callback)
    sw.pause()
    n_tokens = float(X.sum())
    # the first interval also holds the initialization (token layout, random assignment)
    tps = n_tokens / np.diff(stamps[1:]) if len(stamps) > 2 else n_tokens / np.diff(stamps)
    return {"tokens_per_s": float(np.median(tps)), "sweeps": len(stamps) - 1,
            "curve_sample": sample}


def timed_stepper(runner, recorder, budget, n_tokens, sweeps_per_step, clock=time.perf_counter):
    """run_stepper, plus the median tokens per second of the steps (sweeps) on ``clock``."""
    times = []
    orig = runner.step

    def step():
        t0 = clock()
        out = orig()
        times.append(clock() - t0)
        return out

    runner.step = step
    run_stepper(runner, recorder, budget, clock=clock)
    per_sweep = np.median(times) / sweeps_per_step
    return {"tokens_per_s": float(n_tokens / per_sweep), "sweeps": len(times) * sweeps_per_step}


def threads_speedup(X, K, sweeps=20, repeats=3):
    """Wall-clock tokens/s of StochasticEMLDA with 1 and 2 threads (median of the sweeps of
    each fit, the fits alternating, ``repeats`` each): needs an otherwise idle machine."""
    out = {"K": K, "sweeps": sweeps, "repeats": repeats, "load_start": os.getloadavg(),
           "uptime": _uptime()}
    for threads in (1, 2):
        out[f"{threads}t"] = []
    for _ in range(repeats):
        for threads in (1, 2):
            m = StochasticEMLDA(K, max_iter=sweeps, n_threads=threads, random_state=0).fit(X)
            out[f"{threads}t"].append(float(np.median([e["tokens_per_s"] for e in m.trace_])))
    out["load_end"] = os.getloadavg()
    out["speedup"] = float(np.median(out["2t"]) / np.median(out["1t"]))
    print(f"  threads K={K}: 1t {np.median(out['1t']):.3g}, 2t {np.median(out['2t']):.3g} "
          f"tokens/s, speed-up {out['speedup']:.2f} (load {out['load_start']})", flush=True)
    return out


def _uptime():
    import subprocess

    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:  # pragma: no cover
        return None


def crossover(X, ks, sweeps=60):
    """Tokens per CPU second of the dense and alias paths (one thread) for every K in ``ks``:
    the median over ``sweeps`` sweeps from uniform assignments, and the medians of the first
    and last 10 sweeps (the sparse path gets faster as the documents concentrate on fewer
    topics)."""
    rows = []
    n_tokens = float(X.sum())
    for K in ks:
        row = {"K": K, "sweeps": sweeps}
        for sampler in ("dense", "alias"):
            stamps = [time.process_time()]

            def cb(info, stamps=stamps):
                stamps.append(time.process_time())

            StochasticEMLDA(K, sampler=sampler, max_iter=sweeps, n_threads=1,
                            random_state=0).fit(X, callback=cb)
            tps = n_tokens / np.diff(stamps)
            row[sampler] = float(np.median(tps))
            row[sampler + "_first10"] = float(np.median(tps[:10]))
            row[sampler + "_last10"] = float(np.median(tps[-10:]))
        rows.append(row)
        print(f"  crossover K={K}: dense {row['dense']:.3g}, alias {row['alias']:.3g} tokens "
              "per CPU second", flush=True)
    return rows


def _vm_kib(field):
    """A field of /proc/self/status in KiB (VmRSS: resident now, VmHWM: its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _memory_child(path, K, sweeps):
    """In a fresh process: load the corpus, reset the peak resident set size, fit and report
    the peak resident memory above the loaded corpus (VmHWM - VmRSS before the fit, with the
    peak reset through /proc/self/clear_refs) and the peak of numpy's allocations
    (tracemalloc), as JSON on stdout."""
    import json

    import scipy.sparse as sp

    X = sp.load_npz(path).tocsr()
    StochasticEMLDA(K, max_iter=1, n_threads=1, random_state=0).fit(X[:50])  # warm imports
    before = _vm_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    tracemalloc.start()
    model = StochasticEMLDA(K, max_iter=sweeps, n_threads=1, random_state=0).fit(X)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak = _vm_kib("VmHWM")
    after = _vm_kib("VmRSS")
    print(json.dumps({"rss_before_kib": before, "rss_peak_kib": peak, "rss_after_kib": after,
                      "tracemalloc_peak_bytes": traced,
                      "fitted_state_bytes": int(sum(v.nbytes for v in vars(model).values()
                                                    if isinstance(v, np.ndarray)))}))


def peak_memory(X, K, sweeps=3):
    """Peak memory of a ``sweeps``-sweep fit at K, in a fresh subprocess (the corpus loaded
    there before the clock), against the issue's budget: the K x V counts twice (double
    buffer), 4 bytes per token and the corpus."""
    import json
    import subprocess
    import tempfile

    import scipy.sparse as sp

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "X.npz")
        sp.save_npz(path, X, compressed=False)
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        out = subprocess.run([sys.executable, __file__, "--memory-child", path, str(K),
                              str(sweeps)], capture_output=True, text=True, env=env, check=True)
    child = json.loads(out.stdout.strip().splitlines()[-1])
    V = X.shape[1]
    n_tokens = int(X.sum())
    corpus = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    budget = 2 * 4 * K * V + 4 * n_tokens + corpus
    fit_rss = 1024 * (child["rss_peak_kib"] - child["rss_before_kib"])
    return {"K": K, "sweeps": sweeps,
            "peak_bytes": int(fit_rss + corpus),
            "fit_peak_rss_above_corpus_bytes": int(fit_rss),
            "tracemalloc_peak_bytes": int(child["tracemalloc_peak_bytes"]),
            "fitted_state_bytes": child["fitted_state_bytes"],
            "budget_bytes": int(budget), "within_budget": bool(fit_rss + corpus <= budget),
            "counts_bytes_x2": 8 * K * V, "tokens": n_tokens, "corpus_bytes": int(corpus)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ks", type=int, nargs="+", default=[100, 400, 1000])
    p.add_argument("--budget", type=float, default=60.0, help="training seconds per method")
    p.add_argument("--methods", nargs="+",
                   default=["sem-1t", "sem-2t", "tomotopy", "lda", "sparselda"])
    p.add_argument("--paper-alpha", action="store_true",
                   help="also run sem-1t and tomotopy with alpha = 50 / K at the largest K")
    p.add_argument("--n-test", type=int, default=1000)
    p.add_argument("--n-train", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--corpus", choices=sorted(CORPORA), default="20newsgroups",
                   help="training and test documents of the held-out runs")
    p.add_argument("--growth", type=float, default=1.5)
    p.add_argument("--fixed-grid", action="store_true",
                   help="score every method at the first step ending after each of the same "
                        "times growth**n (by default growth times its last checkpoint)")
    p.add_argument("--crossover-ks", type=int, nargs="*", default=[8, 16, 32, 48, 64, 100])
    p.add_argument("--quick", action="store_true", help="2000 documents, K = 50, 10 s")
    p.add_argument("--out", default=str(RESULTS / "sem.json"))
    p.add_argument("--summarize", action="store_true",
                   help="only recompute the summary, table and plot of an existing --out JSON")
    p.add_argument("--crossover-only", action="store_true",
                   help="only time the dense and alias paths at --crossover-ks into --out")
    p.add_argument("--crossover-data", choices=["kos", "20newsgroups"], default="kos",
                   help="corpus of --crossover-only (KOS: not the corpus of the reported runs)")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="time source of the budgets, checkpoints and tokens/s (cpu: CPU time "
                        "of this process, for one-thread methods on a loaded machine)")
    p.add_argument("--threads-only", action="store_true",
                   help="only the 1- vs 2-thread wall-clock speed-up at --ks into --out "
                        "(run on an idle machine)")
    p.add_argument("--memory-only", action="store_true",
                   help="only measure peak memory at --ks (fresh subprocess per K) into --out")
    p.add_argument("--memory-child", nargs=3, metavar=("NPZ", "K", "SWEEPS"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.crossover_only:
        from sparseclust.datasets import load_kos

        X = load_kos().data.tocsr() if args.crossover_data == "kos" else \
            newsgroups_heldout_split(seed=args.seed, n_test=args.n_test)[0]
        write_json(args.out, {"environment": environment(), "load": os.getloadavg(),
                              "dataset": args.crossover_data, "n_tokens": int(X.sum()),
                              "crossover": crossover(X, args.crossover_ks)})
        return
    if args.memory_child:
        _memory_child(args.memory_child[0], int(args.memory_child[1]),
                      int(args.memory_child[2]))
        return
    if args.summarize:
        import json

        results = json.loads(Path(args.out).read_text())
        results["summary"] = summarize(results)
        write_json(args.out, results)
        plot(results, Path(args.out).with_suffix(".png"))
        print(markdown_table(results))
        return
    if args.quick:
        args.ks, args.budget, args.n_train, args.n_test = [50], 10.0, 2000, 200
        args.crossover_ks = [8, 32]
    X_train, X_test, _ = CORPORA[args.corpus][1](seed=args.seed, n_test=args.n_test,
                                                 n_train=args.n_train)
    n_tokens = int(X_train.sum())
    print(f"{CORPORA[args.corpus][0]}: {X_train.shape[0]} training documents, "
          f"{X_train.shape[1]} words, {n_tokens} tokens; {X_test.shape[0]} test documents",
          flush=True)
    results = {"environment": environment(), "dataset": args.corpus,
               "n_train": X_train.shape[0], "n_words": X_train.shape[1],
               "n_tokens": n_tokens, "n_test": X_test.shape[0], "beta": BETA,
               "budget_s": args.budget, "seed": args.seed, "load_start": os.getloadavg(),
               "uptime_start": _uptime(), "clock": args.clock,
               "args": {k: v for k, v in vars(args).items() if k != "summarize"}}
    if args.threads_only:
        results["threads"] = [threads_speedup(X_train, K) for K in args.ks]
        write_json(args.out, results)
        return
    results["memory"] = []
    for K in args.ks:
        results["memory"].append(peak_memory(X_train, K))
        print(f"  memory K={K}: {results['memory'][-1]}", flush=True)
    if args.memory_only:
        write_json(args.out, results)
        return
    runs = []
    plan = [(K, 0.5 / K, m) for K in args.ks for m in args.methods]
    if args.paper_alpha:
        K = max(args.ks)
        plan += [(K, 50.0 / K, m) for m in ("sem-1t", "tomotopy")]
    for K, alpha, method in plan:
        scorer = AlphaScorer(X_test, alpha, args.seed, 2)
        rec = Recorder(scorer, args.budget, growth=args.growth, fixed=args.fixed_grid,
                       log=lambda m: print(m, flush=True))
        print(f"K={K} alpha={alpha:g} {method}", flush=True)
        t0 = time.perf_counter()
        clock = CLOCKS[args.clock]
        if method.startswith("sem-"):
            if method != "sem-1t" and args.clock == "cpu":
                raise ValueError("the CPU clock sums the threads: run sem-2t with --clock wall")
            info = run_sem(X_train, K, alpha, args.seed, int(method[4]), rec, args.budget,
                           clock)
        elif method == "tomotopy":
            runner = TomotopyAlpha(X_train, K, args.seed + 1, 1, alpha)
            topics = runner.topics

            def topics_and_rb(runner=runner, topics=topics, scorer=scorer, clock=clock):
                phi, dt = runner.rao_blackwell(clock)
                runner.rb.append((dt, float(scorer(phi))))
                return topics()

            runner.topics = topics_and_rb
            info = timed_stepper(runner, rec, args.budget, n_tokens, runner.sweeps, clock)
            # the same checkpoints with the Rao-Blackwellized topics, at their time plus the
            # estimate's (as StochasticEMLDA's curve is recorded)
            info["curve_rb"] = [(t + dt, sc, u) for (t, _, u), (dt, sc) in
                                zip(rec.curve, runner.rb, strict=True)]
        elif method == "lda":
            runner = LdaPackage(X_train, K, args.seed, 1, alpha)
            info = timed_stepper(runner, rec, args.budget, n_tokens, 1, clock)
        elif method == "sparselda":
            if args.clock == "cpu":
                raise ValueError("the SparseLDA runner times wall-clock seconds")
            opts = argparse.Namespace(max_passes=1000, tol=8e-5, n_batches=5)
            run_sparselda(X_train, K, 8, "memoized", args.seed, 1, rec, args.budget, opts)
            info = {"tokens_per_s": None, "sweeps": None}
        else:
            raise ValueError(method)
        run = {"K": K, "alpha": alpha, "method": method, "curve": rec.curve,
               "wall_s": time.perf_counter() - t0, **info}
        runs.append(run)
        print(f"  -> tokens/s {info['tokens_per_s']}, final {rec.curve[-1][1]:.4f}", flush=True)
        results["runs"] = runs
        write_json(args.out, results)
    results["load_end"] = os.getloadavg()
    results["uptime_end"] = _uptime()
    results["summary"] = summarize(results)
    write_json(args.out, results)
    plot(results, Path(args.out).with_suffix(".png"))
    print(markdown_table(results))


def summarize(results):
    """The issue's targets from the stored runs: tokens/s ratios to tomotopy, held-out score
    against tomotopy at equal time (tomotopy's checkpoints from 30 s on, each method's last
    checkpoint at or before that time), final scores, 2-thread speed-up, memory."""
    out = []
    groups = sorted({(r["K"], r["alpha"]) for r in results["runs"]})
    for K, alpha in groups:
        runs = {r["method"]: r for r in results["runs"] if (r["K"], r["alpha"]) == (K, alpha)}
        tomo = runs.get("tomotopy")
        row = {"K": K, "alpha": alpha}
        for name in ("sem-1t", "sem-2t"):
            r = runs.get(name)
            if r is None or tomo is None:
                continue
            diffs = []
            for t, s_tomo, _ in tomo["curve"]:
                if t < 30.0:
                    continue
                s = score_at(r["curve"], t)
                diffs.append(None if s is None else s - s_tomo)
            row[name] = {
                "tokens_per_s_ratio_to_tomotopy": r["tokens_per_s"] / tomo["tokens_per_s"],
                "heldout_minus_tomotopy_at_tomotopy_checkpoints_from_30s": diffs,
                "ahead_at_every_checkpoint_from_30s": bool(diffs) and all(
                    d is not None and d >= 0 for d in diffs),
                "final_minus_tomotopy_final": r["curve"][-1][1] - tomo["curve"][-1][1],
            }
        if "sem-1t" in runs and "sem-2t" in runs:
            row["two_thread_speedup"] = runs["sem-2t"]["tokens_per_s"] / \
                runs["sem-1t"]["tokens_per_s"]
        out.append(row)
    return out


def score_at(curve, t):
    """Score of the last checkpoint at or before t (None before the first)."""
    s = [c[1] for c in curve if c[0] <= t + 1e-9]
    return s[-1] if s else None


def markdown_table(results):
    lines = ["| K | alpha | method | tokens/s (1 sweep) | sweeps | held-out at 30 s | final "
             "(time) |", "|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        tps = "" if r["tokens_per_s"] is None else f"{r['tokens_per_s'] / 1e6:.2f} M"
        s30 = score_at(r["curve"], 30.0)
        last = r["curve"][-1]
        lines.append(
            f"| {r['K']} | {r['alpha']:g} | {r['method']} | {tps} | {r['sweeps'] or ''} | "
            f"{'' if s30 is None else f'{s30:.4f}'} | {last[1]:.4f} ({last[0]:.0f} s) |"
        )
    return "\n".join(lines)


COLORS = {"sem-1t": "tab:blue", "sem-2t": "tab:cyan", "tomotopy": "tab:orange",
          "lda": "tab:red", "sparselda": "tab:purple"}


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(r["K"], r["alpha"]) for r in results["runs"]})
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False)
    for ax, (K, alpha) in zip(axes[0], groups, strict=True):
        for r in results["runs"]:
            if (r["K"], r["alpha"]) != (K, alpha):
                continue
            c = np.array([(t, s) for t, s, _ in r["curve"]])
            ax.plot(c[:, 0], c[:, 1], marker=".", label=r["method"], color=COLORS.get(r["method"]))
            # the same runs with the other topic estimate (dashed): StochasticEMLDA's sample
            # counts, tomotopy's sample Rao-Blackwellized
            for key, label in (("curve_sample", "sample counts"), ("curve_rb", "+ estimate")):
                if r.get(key):
                    c = np.array([row[:2] for row in r[key]])
                    ax.plot(c[:, 0], c[:, 1], ls="--", lw=0.9, color=COLORS.get(r["method"]),
                            label=f"{r['method']} {label}")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        name = CORPORA.get(results.get("dataset"), ("20 Newsgroups",))[0]
        ax.set_title(f"{name}, K={K}, alpha={alpha:g}")
        ax.set_xlabel("training seconds")
        ax.set_ylabel("held-out document completion (nats/token)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
