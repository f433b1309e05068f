# SPDX-License-Identifier: BSD-3-Clause
"""The hybrid SVI-Gibbs local step of SparseLDA (Mimno, Hoffman & Blei 2012) against the
variational local step and tomotopy's collapsed Gibbs sampler.

Two experiments, one thread each, CPU time of this process (``time.process_time``):

``heldout``
    20 Newsgroups (the split of ``bench_lda_heldout.py``) or IMDB (``--corpus imdb``, the
    split of ``_common.imdb_heldout_split``: 1,000 test reviews), K in ``--ks``: SparseLDA with the
    variational local step (memoized), the Gibbs local step (memoized and stochastic) and
    tomotopy ``LDAModel`` (collapsed Gibbs, ``optim_interval = 0``), all with alpha = 0.5 / K
    and topic-word prior 0.1, scored by held-out document completion
    (:func:`sparseclust.metrics.document_completion_score`, the same test documents, alpha and
    seed for all) at checkpoints spaced geometrically in training time, until ``--budget``
    seconds (per K, ``--budgets``) of training CPU time. Initialisation is inside the clock,
    scoring outside. Also ``sem-variational`` (the variational step from ``--init-sweeps``
    stochastic EM sweeps, ``SparseLDA(init=StochasticEMLDA(...))``) and ``sem``
    (StochasticEMLDA alone, its Rao-Blackwellized topics scored).
    With ``--left-to-right R``, the checkpoints from ``--l2r-from`` seconds on (and always the
    last one) are also scored by the left-to-right estimator
    (:func:`sparseclust.metrics.left_to_right_score`, Wallach et al. 2009, the estimator Mimno,
    Hoffman & Blei 2012 report) with R particles, on the same test documents, with the same
    alpha and particle streams for every method: the run's ``l2r_curve`` holds
    ``(seconds, score, standard error)`` and its ``left_to_right`` the last checkpoint's
    estimate with the per-document log-likelihoods, so that ``compare`` can difference two
    methods document by document.
``compare``
    Left-to-right and document completion of the runs of several results files (``--files``,
    e.g. one per method run side by side) at the same K and seed: each method's last
    checkpoint, and each pair's difference with its standard error from the per-document
    differences (the documents and particle streams are the same, so the pair's error is
    smaller than either score's). Written to ``--out``.
``particles``
    The left-to-right estimator's dependence on its number of particles: each method of
    ``--methods`` is trained for ``--budgets`` CPU seconds (one checkpoint, at the end) and its
    final topics are scored with every R of ``--particles``; each pair's paired difference is
    reported per R, so one can see whether a ranking at R = 3 holds with more particles.
``validation``
    Memoized Gibbs (``gibbs-memoized``, each batch's chain kept between visits) and the
    variational step, scored on documents the reported test split does not use:
    ``--val-docs test`` (default) fits all training posts and scores 1,000 test posts
    disjoint from the reported ones (the validation set of ``bench_lda_stochastic.py``);
    ``--val-docs train`` fits the shuffled training posts but the last ``--n-val`` and scores
    those (many quote training posts of the same period, which favours sharper topics).
    Restarted memoized Gibbs with other word weights: ``gibbs-memoized-mean`` (posterior mean
    E[phi] instead of exp(E[log phi])), ``gibbs-memoized-exclude`` (the batch's own previous
    statistics taken out of lambda) and ``gibbs-memoized-mean-exclude`` (both).
    Settings of the Gibbs step (``--n-burnin``, ``--n-saved-sweeps``, ``--batch-size``,
    ``--kappa``) apply to every method of a run; ``--suffix`` names the runs after them, so
    several settings sit side by side in one results file.
``step_cost``
    CPU seconds per token of a stochastic step (local + global step, the trace's
    ``time_local + time_global`` of the second pass of ``algorithm='stochastic'`` on
    ``--step-docs`` documents, minibatches of 256, in CPU time) at K = 100 and K = 1000, both
    local steps,
    median of ``--repeats`` runs; the ratio K = 1000 / K = 100 is the target's measure.
    Corpus: IMDB (``--step-corpus imdb``) or 20 Newsgroups.

Every run writes the JSON (``--out``) again when it finishes, so a partial run keeps its
results; ``heldout`` also saves each run's curve at every checkpoint (``"complete": false``
until its budget is spent). Usage::

    python benchmarks/bench_lda_hybrid.py heldout --ks 100 --budgets 60
    python benchmarks/bench_lda_hybrid.py validation --ks 400 --budgets 400 \
        --val-methods gibbs-stochastic --batch-size 4096 --n-burnin 5 --n-saved-sweeps 5 \
        --suffix @b4096-B5S5
    python benchmarks/bench_lda_hybrid.py step_cost --step-corpus imdb
    python benchmarks/bench_lda_hybrid.py heldout --ks 400 --budgets 400 \
        --methods tomotopy --left-to-right 3 --out tomotopy_l2r.json
    python benchmarks/bench_lda_hybrid.py compare --files a.json b.json --out cmp.json
    python benchmarks/bench_lda_hybrid.py particles --ks 100 --budgets 60 \
        --methods gibbs-stochastic variational-memoized --particles 1 3 10 --out p.json
    python benchmarks/bench_lda_hybrid.py plot
"""

import argparse
import json
import os
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
    imdb_heldout_split,
    load_imdb,
    newsgroups_heldout_split,
    vectorize,
    write_json,
)
from bench_lda_heldout import (  # noqa: E402
    TOPIC_WORD_PRIOR,
    Recorder,
    Scorer,
    Tomotopy,
    doc_topic_prior,
)
from bench_lda_stochastic import load as load_validation  # noqa: E402

from sparseclust.metrics import left_to_right_score  # noqa: E402
from sparseclust.topics import SparseLDA, StochasticEMLDA  # noqa: E402
from sparseclust.topics._gibbs import gibbs_local_step  # noqa: E402
from sparseclust.topics._sparse_lda import SuffStats, _GibbsLDAModel  # noqa: E402

OUT = RESULTS / "lda_hybrid.json"
CORPUS_NAMES = {"20ng": "20 Newsgroups", "imdb": "IMDB"}

METHODS = {
    "variational-memoized": dict(local_step="variational", algorithm="memoized"),
    "gibbs-memoized": dict(local_step="gibbs", algorithm="memoized"),
    "gibbs-stochastic": dict(local_step="gibbs", algorithm="stochastic"),
    "variational-stochastic": dict(local_step="variational", algorithm="stochastic"),
    # the variational step (memoized) started from --init-sweeps stochastic EM sweeps
    # (SparseLDA(init=StochasticEMLDA(...)); the sweeps inside the clock)
    "sem-variational": dict(local_step="variational", algorithm="memoized", init="sem"),
}


def _load(path):
    if Path(path).exists():
        return json.loads(Path(path).read_text())
    return {"heldout": {}, "step_cost": None}


def _save(path, res):
    res["environment"] = environment()
    res["loadavg"] = os.getloadavg()
    write_json(path, res)


def _gibbs_settings(opts):
    d = SparseLDA()
    return {"n_burnin": d.n_burnin if opts.n_burnin is None else opts.n_burnin,
            "n_saved_sweeps": (d.n_saved_sweeps if opts.n_saved_sweeps is None
                               else opts.n_saved_sweeps)}


def _kappa(opts):
    """The stochastic step-size decay of a run: ``--kappa`` or SparseLDA's default."""
    return SparseLDA().kappa if opts.kappa is None else opts.kappa


def _on_record(recorder):
    hook = getattr(recorder, "on_record", None)
    if hook is not None:
        hook()


def run_sparselda(X, K, spec, seed, recorder, budget, opts, cls=SparseLDA):
    if spec.get("init") == "sem":
        spec = {**spec, "init": StochasticEMLDA(n_components=K, max_iter=opts.init_sweeps,
                                                random_state=seed, n_threads=1)}
    if spec.get("local_step") == "gibbs":
        spec = {**spec, **{k: v for k, v in (("n_burnin", opts.n_burnin),
                                             ("n_saved_sweeps", opts.n_saved_sweeps))
                           if v is not None}}
    if opts.kappa is not None and spec.get("algorithm") == "stochastic":
        spec = {**spec, "kappa": opts.kappa}
    model = cls(
        n_components=K,
        doc_topic_prior=doc_topic_prior(K),
        topic_word_prior=TOPIC_WORD_PRIOR,
        max_iter=10_000,
        tol=0,
        random_state=seed,
        n_threads=1,
        n_batches=opts.n_batches,
        batch_size=opts.batch_size,
        **spec,
    )
    sw = Stopwatch(clock=time.process_time)

    def callback(info):
        t = sw.pause()
        stop = t >= budget
        if recorder.due(t) or stop:
            recorder.record(t, np.asarray(info["components"]), info.get("pass"))
            _on_record(recorder)
        sw.resume()
        return stop

    model.fit(X, callback=callback)
    return sw.pause()


def run_sem(X, K, seed, recorder, budget):
    """StochasticEMLDA alone (its defaults: live document counts, Rao-Blackwellized topics,
    which the checkpoints score; the estimate is computed outside the clock)."""
    model = StochasticEMLDA(n_components=K, doc_topic_prior=doc_topic_prior(K),
                            topic_word_prior=TOPIC_WORD_PRIOR, max_iter=1_000_000,
                            random_state=seed, n_threads=1)
    sw = Stopwatch(clock=time.process_time)
    sweeps = [0]

    def callback(info):
        t = sw.pause()
        sweeps[0] += 1
        stop = t >= budget
        if recorder.due(t) or stop:
            counts = np.asarray(info["topic_estimate"]())
            recorder.record(t, counts.T + TOPIC_WORD_PRIOR, sweeps[0])
            _on_record(recorder)
        sw.resume()
        return stop

    model.fit(X, callback=callback)
    return sw.pause()


def run_tomotopy(X, K, seed, recorder, budget):
    runner = Tomotopy(X, K, seed, 1)
    sw = Stopwatch(clock=time.process_time)
    runner.start()
    while True:
        runner.step()
        t = sw.pause()
        if recorder.due(t) or t >= budget:
            recorder.record(t, runner.topics(), runner.total)
            _on_record(recorder)
        if t >= budget:
            break
        sw.resume()
    return t


class _LeftToRight:
    """Left-to-right scores of a run's checkpoints (outside the clock): those at or after
    ``start`` seconds and the last one; every method is scored on the same documents with the
    same alpha, particles and seed."""

    def __init__(self, X_test, K, seed, n_particles, start, n_threads):
        self.X_test, self.alpha, self.seed = X_test, doc_topic_prior(K), seed
        self.n_particles, self.start, self.n_threads = n_particles, start, n_threads
        self.curve = []     # (seconds, score, standard error)
        self.last = None    # the last scored checkpoint, with its per-document estimates
        self.seconds = 0.0

    def __call__(self, t, topic_word, final=False):
        if not self.n_particles or (t < self.start and not final):
            return
        if self.curve and self.curve[-1][0] == t:
            return
        t0 = time.perf_counter()
        score, se, det = left_to_right_score(
            topic_word, self.X_test, doc_topic_prior=self.alpha,
            n_particles=self.n_particles, random_state=self.seed, n_threads=self.n_threads,
            return_std=True, return_details=True)
        self.seconds += time.perf_counter() - t0
        self.curve.append((float(t), float(score), float(se)))
        self.last = dict(seconds=float(t), score=float(score), std_error=float(se),
                         n_particles=self.n_particles, n_docs=int(self.X_test.shape[0]),
                         doc_loglik=[float(v) for v in det["doc_loglik"]],
                         doc_tokens=[int(v) for v in det["doc_tokens"]])
        print(f"    t={t:8.2f}s  left-to-right={score: .5f} +- {se:.5f} "
              f"({self.n_particles} particles)", flush=True)


def _split(opts):
    """The train/test split of ``--corpus`` for ``--seed``."""
    split = imdb_heldout_split if opts.corpus == "imdb" else newsgroups_heldout_split
    return split(seed=opts.seed)


def _run(name, X, K, rec, budget, opts):
    """Train method ``name`` for ``budget`` CPU seconds, checkpoints by ``rec``; returns the
    training CPU seconds."""
    with threadpool_limits(1):
        if name == "tomotopy":
            return run_tomotopy(X, K, opts.seed, rec, budget)
        if name == "sem":
            return run_sem(X, K, opts.seed, rec, budget)
        return run_sparselda(X, K, _spec(name), opts.seed, rec, budget, opts,
                             cls=_VALIDATION_CLASSES.get(name, SparseLDA))


class _KeepTopics(Scorer):
    """The benchmark's document-completion scorer, also keeping the topics it last scored."""

    def __call__(self, topic_word):
        self.topics = np.array(topic_word, dtype=np.float64)
        return super().__call__(topic_word)


def heldout(opts):
    res = _load(opts.out)
    X, X_test, _ = _split(opts)
    print(f"{CORPUS_NAMES[opts.corpus]}: train {X.shape}, test {X_test.shape}", flush=True)
    res["settings"] = {
        "corpus": opts.corpus, "seed": opts.seed, "n_batches": opts.n_batches,
        "batch_size": opts.batch_size,
        "clock": "process_time (CPU seconds, one thread)",
        "alpha": "0.5 / K", "topic_word_prior": TOPIC_WORD_PRIOR,
        "gibbs": _gibbs_settings(opts),
        "kappa": _kappa(opts),
        "init_sweeps": opts.init_sweeps,
        "left_to_right": ({"n_particles": opts.left_to_right, "from_seconds": opts.l2r_from,
                           "documents": "all test documents"} if opts.left_to_right else None),
        "note": opts.note,
    }
    for K, budget in zip(opts.ks, opts.budgets, strict=True):
        runs = res["heldout"].setdefault(str(K), {})
        for name in opts.methods:
            print(f"K={K} {name} (budget {budget} s CPU)", flush=True)
            scorer = _KeepTopics(X_test, K, opts.seed, opts.score_threads)
            rec = Recorder(scorer, budget, first=2.0, growth=opts.growth,
                           log=lambda m: print(m, flush=True))
            l2r = _LeftToRight(X_test, K, opts.seed, opts.left_to_right, opts.l2r_from,
                               opts.score_threads)

            def entry(t, rec=rec, budget=budget, done=True, l2r=l2r):
                out = {
                    "budget_cpu_seconds": budget,
                    "train_cpu_seconds": t,
                    "curve": [list(c) for c in rec.curve],
                    "final_score": rec.curve[-1][1],
                    "loadavg": os.getloadavg(),
                    "complete": done,
                }
                if l2r.n_particles:
                    out["l2r_curve"] = [list(c) for c in l2r.curve]
                    out["left_to_right"] = l2r.last
                    out["l2r_seconds"] = l2r.seconds
                return out

            def checkpoint(rec=rec, runs=runs, name=name, entry=entry, l2r=l2r,
                           scorer=scorer):
                # the curve so far is saved at every checkpoint ("complete": False until the
                # budget is spent), so a run stopped early keeps what it measured
                l2r(rec.curve[-1][0], scorer.topics)
                runs[name] = entry(rec.curve[-1][0], done=False)
                _save(opts.out, res)

            rec.on_record = checkpoint
            t = _run(name, X, K, rec, budget, opts)
            l2r(rec.curve[-1][0], scorer.topics, final=True)
            runs[name] = entry(t)
            _save(opts.out, res)


class _WeightsModel(_GibbsLDAModel):
    """Restarted memoized Gibbs with other word weights: ``mean`` samples with the posterior
    mean E[phi_kv] = lambda_kv / sum_u lambda_ku instead of exp(E[log phi_kv]); ``exclude``
    takes the batch's own previous statistics S_b out of lambda (lambda^{-b} = tau +
    max(S - S_b, 0)), as a collapsed sampler takes out the token it draws."""

    mean = exclude = False

    def visit(self, X, params, batch):
        return self._weighted(X, params, batch if self.n_fixed >= 2 else None)

    def local_step(self, X, params):
        return self._weighted(X, params, None)

    def _weighted(self, X, params, batch):
        # the weights of _CountParams (SparseLDA's Gibbs parameters) with this variant's
        # exclusion and weighting, for every visit
        old = self.last_stats.get(batch) if self.exclude and batch is not None else None

        def log_weights(cols):
            return params.log_weights(cols, exclude=old, mean=self.mean)

        res = gibbs_local_step(X, log_weights, self.alpha, n_burnin=self.n_burnin,
                               n_samples=self.n_saved, seed=self.seed, sweep=self.calls,
                               n_threads=self.n_threads)
        if batch is not None:
            self.last_stats[batch] = res.topic_word_csr
        self.calls += 1
        self.counters["local_iters"] += (self.n_saved + 1 + self.n_burnin) * X.shape[0]
        return SuffStats(S=res.topic_word_csr, elbo_local=res.elbo_local)


def _weights_variant(mean, exclude):
    model_cls = type("_Model", (_WeightsModel,), {"mean": mean, "exclude": exclude})

    class _VariantLDA(SparseLDA):
        def _model(self, chains=False):
            return model_cls(self._alpha(), self.topic_word_prior, self.n_burnin,
                             self._n_samples(), self._gibbs_seed, self.n_threads,
                             getattr(self, "_gibbs_calls", 0), chains=False)

    _VariantLDA.__name__ = "SparseLDA"
    return _VariantLDA


#: validation methods: the class that runs them
_VALIDATION_CLASSES = {"gibbs-memoized-mean": _weights_variant(True, False),
                       "gibbs-memoized-exclude": _weights_variant(False, True),
                       "gibbs-memoized-mean-exclude": _weights_variant(True, True)}


def _spec(name):
    """The SparseLDA settings of a method or of a variant of the Gibbs local step (named
    after its algorithm)."""
    if name in METHODS:
        return METHODS[name]
    return METHODS["gibbs-stochastic" if "stochastic" in name else "gibbs-memoized"]


def validation(opts):
    """The methods of ``--val-methods`` (memoized Gibbs and the variational step by
    default), scored on the documents of ``--val-docs`` (see the module
    docstring); K = first of ``--ks``, budget first of ``--budgets``."""
    res = _load(opts.out)
    if opts.val_docs == "test":
        # test posts disjoint from the reported ones, all training posts fitted (the
        # validation set of bench_lda_stochastic.py)
        X_tr, X_val, _ = load_validation("validation", opts.n_val, seed=opts.seed)
        documents = (f"train on all {X_tr.shape[0]} 20 Newsgroups training posts, score "
                     f"document completion on {X_val.shape[0]} test posts disjoint from the "
                     f"reported ones (bench_lda_stochastic.py's validation set)")
    else:
        X, _, _ = newsgroups_heldout_split(seed=opts.seed)
        X_tr, X_val = X[: -opts.n_val], X[-opts.n_val :]
        documents = (f"train on the first {X_tr.shape[0]} shuffled 20 Newsgroups training "
                     f"posts, score document completion on the last {X_val.shape[0]}")
    K, budget = opts.ks[0], opts.budgets[0]
    runs = res.setdefault("validation", {}).setdefault(str(K), {})
    for name in opts.val_methods:
        print(f"validation K={K} {name} (budget {budget} s CPU)", flush=True)
        rec = Recorder(Scorer(X_val, K, opts.seed, opts.score_threads), budget, first=4.0,
                       growth=1.6, log=lambda m: print(m, flush=True))
        cls = _VALIDATION_CLASSES.get(name, SparseLDA)
        with threadpool_limits(1):
            t = run_sparselda(X_tr, K, _spec(name), opts.seed, rec, budget, opts, cls=cls)
        key = name + opts.suffix
        runs[key] = {"budget_cpu_seconds": budget, "train_cpu_seconds": t,
                     "curve": [list(c) for c in rec.curve], "final_score": rec.curve[-1][1],
                     "loadavg": os.getloadavg(), "batch_size": opts.batch_size,
                     "kappa": _kappa(opts)}
        res["validation_settings"] = {
            "documents": documents,
            "seed": opts.seed, "n_batches": opts.n_batches,
            "clock": "process_time (CPU seconds, one thread)"}
        runs[key]["gibbs"] = _gibbs_settings(opts)
        _save(opts.out, res)


def step_cost(opts):
    res = _load(opts.out)
    if opts.step_corpus == "imdb":
        texts, _ = load_imdb(("train",))[:2]
        texts = list(texts)[: opts.step_docs]
        X, _, _ = vectorize(texts, min_df=5)
    else:
        X, _, _ = newsgroups_heldout_split(seed=opts.seed)
        X = X[: opts.step_docs]
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    n_tok = float(X.sum())
    # the engine's per-pass timings (time_local, time_global) in CPU time of this process:
    # wall time on a shared machine measures the load, not the step
    import types

    import sparseclust._engine as engine

    engine.time = types.SimpleNamespace(perf_counter=time.process_time)
    print(f"{opts.step_corpus}: {X.shape}, {n_tok:.0f} tokens", flush=True)
    rows = {}
    for local in ("gibbs", "variational"):
        for K in (100, 1000):
            per = []
            for r in range(opts.repeats):
                m = SparseLDA(K, local_step=local, algorithm="stochastic", batch_size=256,
                              max_iter=2, tol=0, init=opts.step_init, random_state=r,
                              n_threads=1,
                              doc_topic_prior=doc_topic_prior(K),
                              topic_word_prior=TOPIC_WORD_PRIOR)
                c0 = time.process_time()
                with threadpool_limits(1):
                    m.fit(X)
                wall_fit = time.process_time() - c0
                e = m.trace_[-1]
                per.append({"seconds_per_token": (e["time_local"] + e["time_global"]) / n_tok,
                            "time_local": e["time_local"], "time_global": e["time_global"],
                            "fit_cpu_seconds": wall_fit})
                print(f"  {local} K={K} run {r}: {per[-1]}", flush=True)
            rows[f"{local}-K{K}"] = {
                "runs": per,
                "median_seconds_per_token": float(np.median([p["seconds_per_token"]
                                                             for p in per])),
            }
    for local in ("gibbs", "variational"):
        rows[f"{local}-ratio_K1000_K100"] = (rows[f"{local}-K1000"]["median_seconds_per_token"]
                                             / rows[f"{local}-K100"]["median_seconds_per_token"])
    res["step_cost"] = {
        "corpus": opts.step_corpus, "n_docs": X.shape[0], "n_features": X.shape[1],
        "n_tokens": n_tok, "batch_size": 256, "init": opts.step_init,
        "clock": "time_local + time_global of the second stochastic pass, CPU time "
                 "(time.process_time), one thread",
        "rows": rows,
    }
    _save(opts.out, res)


def _paired(a, b):
    """Difference of two left-to-right estimates on the same documents, and its standard
    error from the per-document differences (ratio estimator, as the score's own)."""
    La, Lb = np.asarray(a["doc_loglik"]), np.asarray(b["doc_loglik"])
    N = np.asarray(a["doc_tokens"], dtype=np.float64)
    if not np.array_equal(N, np.asarray(b["doc_tokens"], dtype=np.float64)):
        raise ValueError("the two estimates are not on the same documents")
    m = N > 0
    d, N = (La - Lb)[m], N[m]
    diff = d.sum() / N.sum()
    se = np.sqrt(m.sum() / (m.sum() - 1) * np.sum((d - diff * N) ** 2)) / N.sum()
    return float(diff), float(se)


def _pairs(estimates):
    """``{(a, b): (a minus b, standard error)}`` for every pair of names a < b of
    ``estimates``, a dict name -> left-to-right estimate with per-document values."""
    names = sorted(estimates)
    return {(a, b): _paired(estimates[a], estimates[b])
            for i, a in enumerate(names) for b in names[i + 1:]}


def compare(opts):
    """Each method's last left-to-right and document-completion scores across ``--files``,
    grouped by (seed, K), and every pair's paired difference."""
    groups = {}
    for f in opts.files:
        res = json.loads(Path(f).read_text())
        seed = res["settings"]["seed"]
        corpus = CORPUS_NAMES[res["settings"].get("corpus", "20ng")]
        for K, runs in res["heldout"].items():
            for name, run in runs.items():
                if run.get("left_to_right") and run.get("complete"):
                    groups.setdefault(f"{corpus}, seed {seed}, K = {K}", {})[name] = dict(
                        run, file=Path(f).name)
    out = {}
    for key, runs in groups.items():
        names = sorted(runs)
        rows = {n: dict(file=r["file"], train_cpu_seconds=r["train_cpu_seconds"],
                        document_completion=r["final_score"],
                        left_to_right=r["left_to_right"]["score"],
                        left_to_right_se=r["left_to_right"]["std_error"],
                        n_particles=r["left_to_right"]["n_particles"])
                for n, r in runs.items()}
        pairs = {}
        for (a, b), (diff, se) in _pairs({n: r["left_to_right"] for n, r in runs.items()}).items():
            pairs[f"{a} - {b}"] = dict(
                left_to_right=diff, se=se,
                document_completion=runs[a]["final_score"] - runs[b]["final_score"])
        out[key] = dict(methods=rows, pairs=pairs)
        print(key)
        for n in names:
            r = rows[n]
            print(f"  {n:24s} completion {r['document_completion']: .4f}  left-to-right "
                  f"{r['left_to_right']: .4f} +- {r['left_to_right_se']:.4f}")
        for k, v in pairs.items():
            print(f"  {k:48s} left-to-right {v['left_to_right']:+.4f} +- {v['se']:.4f}  "
                  f"completion {v['document_completion']:+.4f}")
    write_json(opts.out, dict(environment=environment(), files=[Path(f).name for f in opts.files],
                              comparisons=out))


def particles(opts):
    """Left-to-right of each method's final topics with several particle counts (see the
    module docstring)."""
    X, X_test, _ = _split(opts)
    res = {"settings": {"corpus": opts.corpus, "seed": opts.seed, "particles": opts.particles,
                        "gibbs": _gibbs_settings(opts), "kappa": _kappa(opts),
                        "alpha": "0.5 / K", "topic_word_prior": TOPIC_WORD_PRIOR,
                        "note": opts.note},
           "runs": {}, "pairs": {}}
    for K, budget in zip(opts.ks, opts.budgets, strict=True):
        runs = res["runs"].setdefault(str(K), {})
        for name in opts.methods:
            print(f"K={K} {name} (budget {budget} s CPU)", flush=True)
            scorer = _KeepTopics(X_test, K, opts.seed, opts.score_threads)
            rec = Recorder(scorer, budget, first=budget, log=lambda m: print(m, flush=True))
            t = _run(name, X, K, rec, budget, opts)
            runs[name] = {"train_cpu_seconds": t, "document_completion": rec.curve[-1][1],
                          "left_to_right": {}}
            for R in opts.particles:
                l2r = _LeftToRight(X_test, K, opts.seed, R, 0.0, opts.score_threads)
                l2r(t, scorer.topics, final=True)
                runs[name]["left_to_right"][str(R)] = l2r.last
            _save(opts.out, res)
        pairs = res["pairs"].setdefault(str(K), {})
        for R in opts.particles:
            by_r = {n: r["left_to_right"][str(R)] for n, r in runs.items()}
            for (a, b), (diff, se) in _pairs(by_r).items():
                pairs.setdefault(f"{a} - {b}", {})[str(R)] = {"left_to_right": diff, "se": se}
                print(f"K={K} R={R:3d} {a} - {b}: {diff:+.4f} +- {se:.4f}", flush=True)
        _save(opts.out, res)


def plot(opts):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = _load(opts.out)
    Ks = sorted(res["heldout"], key=int)
    corpus = CORPUS_NAMES[res.get("settings", {}).get("corpus", "20ng")]
    # a second row with the left-to-right curves if any run has one
    l2r = any(run.get("l2r_curve") for K in Ks for run in res["heldout"][K].values())
    fig, axes = plt.subplots(1 + l2r, len(Ks), figsize=(5.5 * len(Ks), 4 * (1 + l2r)),
                             squeeze=False)
    for j, K in enumerate(Ks):
        ax = axes[0, j]
        for name, run in res["heldout"][K].items():
            c = np.asarray([(t, s) for t, s, _ in run["curve"]])
            ax.plot(c[:, 0], c[:, 1], marker="o", ms=3, label=name)
            if l2r and run.get("l2r_curve"):
                c = np.asarray(run["l2r_curve"])
                # no error bars: the documents' spread, which every method shares, would hide
                # the differences (``compare`` gives each pair's paired standard error)
                axes[1, j].plot(c[:, 0], c[:, 1], marker="o", ms=3, label=name)
        ax.set_ylabel("held-out document completion (nats/token)")
        ax.set_title(f"{corpus}, K = {K}")
        for a in axes[:, j]:
            a.set_xscale("log")
            a.set_xlabel("training CPU seconds (one thread)")
            a.legend(fontsize=8)
        if l2r:
            axes[1, j].set_ylabel("held-out left-to-right (nats/token)")
            axes[1, j].set_title(f"{corpus}, K = {K}: left-to-right")
    fig.tight_layout()
    fig.savefig(Path(opts.out).with_suffix(".png"), dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=["heldout", "validation", "step_cost", "plot", "compare",
                                     "particles"])
    p.add_argument("--ks", type=int, nargs="+", default=[100, 400])
    p.add_argument("--budgets", type=float, nargs="+", default=[400.0, 400.0])
    p.add_argument("--methods", nargs="+",
                   default=["gibbs-memoized", "gibbs-stochastic", "variational-memoized",
                            "tomotopy"])
    p.add_argument("--val-methods", nargs="+",
                   default=["gibbs-memoized", "variational-memoized"])
    p.add_argument("--n-val", type=int, default=1000)
    p.add_argument("--val-docs", choices=["test", "train"], default="test",
                   help="validation documents: test posts disjoint from the reported ones "
                        "(default), or the last --n-val shuffled training posts (held out of "
                        "training; many quote training posts of the same period)")
    p.add_argument("--n-burnin", type=int, default=None,
                   help="Gibbs local step burn-in sweeps (default: SparseLDA's)")
    p.add_argument("--n-saved-sweeps", type=int, default=None,
                   help="Gibbs local step saved sweeps (default: SparseLDA's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init-sweeps", type=int, default=1200,
                   help="sem-variational: stochastic EM sweeps before the variational step "
                        "(1200: the validation study of benchmarks/README.md)")
    p.add_argument("--kappa", type=float, default=None,
                   help="stochastic step-size decay (default: SparseLDA's)")
    p.add_argument("--suffix", default="",
                   help="validation: appended to each method's name in the results, so runs "
                        "with other settings sit beside each other in one file")
    p.add_argument("--n-batches", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=None,
                   help="stochastic minibatch size (default: SparseLDA's, batch_size=None)")
    p.add_argument("--growth", type=float, default=1.5)
    p.add_argument("--score-threads", type=int, default=1)
    p.add_argument("--left-to-right", type=int, default=0, metavar="R",
                   help="heldout: also score checkpoints by the left-to-right estimator with R "
                        "particles (0: off)")
    p.add_argument("--l2r-from", type=float, default=50.0,
                   help="heldout: the first training second whose checkpoints are scored by "
                        "left-to-right (the last checkpoint always is)")
    p.add_argument("--particles", type=int, nargs="+", default=[1, 3, 10],
                   help="particles: the particle counts R to score the final topics with")
    p.add_argument("--files", nargs="+", default=[],
                   help="compare: results files of heldout runs with --left-to-right")
    p.add_argument("--corpus", choices=["20ng", "imdb"], default="20ng",
                   help="heldout: the corpus (20 Newsgroups or IMDB)")
    p.add_argument("--step-corpus", choices=["imdb", "20ng"], default="imdb")
    p.add_argument("--step-docs", type=int, default=10240)
    p.add_argument("--step-init", choices=["random", "kmeans++"], default="random",
                   help="step_cost: the initial topics (random: every (k, v) entry of the "
                        "statistics positive; kmeans++, SparseLDA's default: the documents' "
                        "words only)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--note", default="")
    p.add_argument("--out", default=str(OUT))
    opts = p.parse_args()
    {"heldout": heldout, "validation": validation, "step_cost": step_cost,
     "plot": plot, "compare": compare, "particles": particles}[opts.what](opts)


if __name__ == "__main__":
    main()
