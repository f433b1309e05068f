# SPDX-License-Identifier: BSD-3-Clause
"""L-sparse Gaussian mixtures of natural-image patches (Hughes & Sudderth 2016, Fig. 1a and Fig.
2).

Data: grayscale 8x8 patches on a stride-4 grid, each patch's mean removed, from the BSDS500
``images/train`` folder (training) and ``images/val`` (held out), subsampled uniformly.

Models, all from the same initial hard assignment (k-means++ seeds, nearest seed) and run for the
same number of passes/iterations:

- ``SparseGaussianMixture(zero_mean=True, covariance_type='full')`` with ``alpha = 10``
  (``weight_concentration_prior = 10 / K``), memoized and stochastic, ``L in {1, 4, 16, K}``;
- scikit-learn ``GaussianMixture`` (EM, full covariance, with means) and
  ``BayesianGaussianMixture`` (full covariance, Dirichlet-distribution prior ``10 / K``),
  one E step + one M step per iteration.

Every model is scored after every pass by the same function, the mean held-out
``log sum_k pi_k N(x | mu_k, Sigma_k)`` per patch with each model's point estimates
(``weights_``, ``means_``, ``covariances_``); scoring time is excluded from the elapsed times.
Our local step is timed per sub-step (weights / responsibilities / summary statistics) by the
model, the global step by the engine.

Usage::

    python benchmarks/bench_gmm_patches.py --threads 1   # full run, float64 (~40 min)
    python benchmarks/bench_gmm_patches.py --quick        # smoke run (~1 min)

The learned-K comparison (the Dirichlet-process mixture with moves from K = 50 and K = 400
against finite K in {50, 100, 200, 400}, scikit-learn's DP ``BayesianGaussianMixture`` and
``GaussianMixture`` at K = 100, each to convergence at its defaults, initialization inside the
clock) runs in two groups that may run side by side, then is merged::

    python benchmarks/bench_gmm_patches.py --learned-k ours --n-train 10000 --n-heldout 5000 \
        --threads 1 --out benchmarks/results/gmm_patches_learned_k_ours
    python benchmarks/bench_gmm_patches.py --learned-k sklearn --n-train 10000 \
        --n-heldout 5000 --threads 1 --out benchmarks/results/gmm_patches_learned_k_sklearn
    python benchmarks/bench_gmm_patches.py --learned-k-report \
        benchmarks/results/gmm_patches_learned_k_ours.json \
        benchmarks/results/gmm_patches_learned_k_sklearn.json \
        --out benchmarks/results/gmm_patches_learned_k

The 'ours' group splits into ``--learned-k dp`` (the DP fits; ``--dp-K`` picks the
truncations) and ``--learned-k finite`` (the finite grid), which may run as separate processes;
their JSONs are listed after the earlier ones in ``--learned-k-report``, where a later file's
runs replace an earlier file's of the same method, K and seed. Our fits record wall and CPU
seconds (``time.process_time``), held-out scoring excluded, and the CPU seconds at the end of
every pass (``curve[i]["cpu"]``). The report's ``summary["time_to_target"]`` gives, per DP
fit, the CPU seconds until its held-out score first reaches the target (the best finite K of
the grid minus 0.1%) beside the whole-fit CPU seconds of the finite fit of the same seed at
the K nearest the learned one (``--finite-K 10`` adds the K the DP learns on the patches).

The default pass against L = K (the defaults: L = 4 with ``n_candidates='auto'`` and
``candidate_refresh='auto'``; beside them L = 4 without candidate sets and L = K), per-pass CPU
time of single-threaded fits from the same k-means++ seeds, and held-out scores after a fixed
number of passes, is a separate run that writes its own JSON::

    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_patches.py --default-pass \
        --n-train 20000 --n-heldout 5000 --passes 20 --K 200 400 --threads 1 \
        --out benchmarks/results/gmm_default_pass

With ``--seeds 0 1 2 3 4`` every seed gets its own k-means++ labels and ``random_state`` (all
runs of a seed start from the same labels), and the summary adds the held-out difference to
L = K per seed, its mean and median (``results/gmm_default_pass_seeds.json``). ``--noise-floor``
adds exact L = K once more with the memoized batches drawn from another ``random_state``, from
the same labels: the spread of two equally exact fits after the same passes, against which the
per-seed differences of L = 4 are read (``results/gmm_default_pass_noise_floor.json``).

Both libraries get the same dtype (``--dtype``, float64 by default: scikit-learn's mixtures
compute in the dtype they are given, and float64 is their usual setting).

Outputs ``benchmarks/results/gmm_patches.json`` and ``.png`` (``--out`` changes the stem).
"""

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.special import logsumexp
from sklearn.cluster import kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture, GaussianMixture
from threadpoolctl import threadpool_info, threadpool_limits

from sparseclust.datasets import load_image_patches
from sparseclust.mixture import SparseGaussianMixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARSECLUST_SHARED_DATA", ROOT.parent / "shared" / "data"))


def point_loglik(X, weights, means, precisions_cholesky, block=4096):
    """Mean of ``log sum_k w_k N(x | m_k, (C_k C_k^T)^-1)`` over the rows of X (float64)."""
    X = np.asarray(X, dtype=np.float64)
    K, D = means.shape
    C = np.asarray(precisions_cholesky, dtype=np.float64)
    const = (
        np.log(weights)
        - 0.5 * D * np.log(2 * np.pi)
        + np.log(np.diagonal(C, axis1=1, axis2=2)).sum(1)
    )
    total = 0.0
    for s in range(0, X.shape[0], block):
        Xb = X[s : s + block]
        lp = np.empty((Xb.shape[0], K))
        for k in range(K):
            y = (Xb - means[k]) @ C[k]
            lp[:, k] = const[k] - 0.5 * np.einsum("nd,nd->n", y, y)
        total += logsumexp(lp, axis=1).sum()
    return total / X.shape[0]


def initial_labels(X, K, seed):
    """k-means++ seeds (scikit-learn), then each patch to its nearest seed."""
    centers, _ = kmeans_plusplus(X, K, random_state=seed)
    c2 = (centers.astype(np.float64) ** 2).sum(1)
    labels = np.empty(X.shape[0], dtype=np.int64)
    for s in range(0, X.shape[0], 8192):
        labels[s : s + 8192] = (c2 - 2.0 * (X[s : s + 8192] @ centers.T)).argmin(1)
    return labels


def run_ours(X, X_ho, labels, K, L, algorithm, args, n_candidates=None, candidate_refresh=5):
    est = SparseGaussianMixture(
        K,
        L=L,
        zero_mean=True,
        covariance_type="full",
        weight_concentration_prior=10.0 / K,
        algorithm=algorithm,
        n_batches=args.n_batches,
        n_candidates=n_candidates,
        candidate_refresh=candidate_refresh,
        batch_size=int(np.ceil(X.shape[0] / args.n_batches)),
        kappa=0.6,
        delta=1.0,
        max_iter=args.passes,
        tol=0,
        init_params=labels,
        random_state=0,
        n_threads=args.threads,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est._fit(X, X_heldout=X_ho)
    passes = []
    prev = 0.0
    for e in est.trace_:
        dt = e["elapsed"] - prev
        prev = e["elapsed"]
        local = e["time_local"]
        passes.append(
            {
                "pass": e["pass"],
                "elapsed": e["elapsed"],
                "heldout": e["heldout"],
                "elbo": e["elbo"],
                "time_pass": dt,
                "time_weights": e["time_weights"],
                "time_responsibilities": e["time_responsibilities"],
                "time_summary": e["time_summary"],
                "time_global": e["time_global"],
                "time_other": max(0.0, dt - local - e["time_global"]),
            }
        )
    check = point_loglik(X_ho, est.weights_, est.means_, est.precisions_cholesky_)
    assert abs(check - passes[-1]["heldout"]) < 1e-3 * abs(check), (check, passes[-1]["heldout"])
    return passes


class _FromResp:
    """Start a scikit-learn mixture from given responsibilities and run E/M steps by hand,
    timing each iteration without scikit-learn's extra final E step."""

    def __init__(self, model, X, resp):
        self.m = model
        X = np.asarray(X)
        if isinstance(model, BayesianGaussianMixture):
            model._check_parameters(X)
        model._initialize(X, resp)
        self.X = X

    def iterate(self):
        t0 = time.perf_counter()
        _, log_resp = self.m._e_step(self.X)
        t1 = time.perf_counter()
        self.m._m_step(self.X, log_resp)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1


def run_sklearn(cls, X, X_ho, labels, K, args):
    kw = dict(n_components=K, covariance_type="full", reg_covar=1e-6, random_state=0)
    if cls is BayesianGaussianMixture:
        kw.update(
            weight_concentration_prior_type="dirichlet_distribution",
            weight_concentration_prior=10.0 / K,
        )
    resp = np.zeros((X.shape[0], K), dtype=X.dtype)
    resp[np.arange(X.shape[0]), labels] = 1.0
    runner = _FromResp(cls(**kw), X, resp)
    del resp
    passes, elapsed = [], 0.0
    for p in range(args.passes):
        t_e, t_m = runner.iterate()
        elapsed += t_e + t_m
        m = runner.m
        weights = (
            m.weights_
            if cls is GaussianMixture
            else (m.weight_concentration_ / m.weight_concentration_.sum())
        )
        passes.append(
            {
                "pass": p + 1,
                "elapsed": elapsed,
                "heldout": point_loglik(X_ho, weights, m.means_, m.precisions_cholesky_),
                "time_pass": t_e + t_m,
                "time_e_step": t_e,
                "time_m_step": t_m,
            }
        )
    return passes


def summarize(passes, keys):
    # the first pass of memoized training is a full batch sweep, like every later pass, so the
    # median over all passes is the per-pass cost
    return {k: statistics.median(p[k] for p in passes) for k in keys if k in passes[0]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="repeat every timed run and report medians of per-pass times (--learned-k: the "
        "repeat of median CPU time)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for our kernels and BLAS (default: all available)",
    )
    ap.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "gmm_patches"),
        help="output path stem (.json and .png are appended)",
    )
    ap.add_argument(
        "--dtype",
        choices=("float64", "float32"),
        default="float64",
        help="dtype of the patches given to every model, ours and scikit-learn's",
    )
    ap.add_argument("--n-train", type=int, default=None)
    ap.add_argument("--n-heldout", type=int, default=None)
    ap.add_argument("--passes", type=int, default=None)
    ap.add_argument("--K", type=int, nargs="+", default=None)
    ap.add_argument(
        "--sklearn-K",
        type=int,
        nargs="*",
        default=None,
        help="values of K at which to run the scikit-learn baselines",
    )
    ap.add_argument("--n-batches", type=int, default=10)
    ap.add_argument(
        "--candidates",
        type=int,
        default=None,
        metavar="C",
        help="only run the candidate-set comparison (memoized L=4 and L=K, and L=4 and L=1 "
        "with n_candidates=C) at each --K, and add it to the existing JSON at --out",
    )
    ap.add_argument("--candidate-refresh", type=int, default=5)
    ap.add_argument(
        "--default-pass",
        action="store_true",
        help="only compare the default pass (L=4, candidate sets 'auto') with L=4 dense and "
        "L=K, CPU time per pass and held-out score, at each --K (its own JSON at --out)",
    )
    ap.add_argument(
        "--noise-floor",
        action="store_true",
        help="with --default-pass: also run L = K with the memoized batches drawn from another "
        "random_state (same initial labels), the spread of two exact fits",
    )
    ap.add_argument(
        "--learned-k",
        choices=("ours", "sklearn", "all", "dp", "finite"),
        default=None,
        help="only run the learned-K comparison (Dirichlet-process mixture with moves from "
        "K = 50 and K = 400, finite K in {50, 100, 200, 400}, scikit-learn's DP "
        "BayesianGaussianMixture and GaussianMixture at K = 100), or the named group of it "
        "('ours' = 'dp' + 'finite' + the pass ratio; 'dp' and 'finite' may run side by side "
        "and be merged with an earlier run's JSONs by --learned-k-report, where a later file's "
        "runs replace the earlier ones of the same method, K and seed)",
    )
    ap.add_argument("--dp-K", type=int, nargs="+", default=[50, 400],
                    help="truncations the DP mixture starts from (--learned-k dp/ours)")
    ap.add_argument("--finite-K", type=int, nargs="+", default=[50, 100, 200, 400],
                    help="the finite grid (--learned-k finite/ours)")
    ap.add_argument("--dp-dof", type=float, default=None, metavar="M",
                    help="the DP fits with degrees_of_freedom_prior = M * n_features (default: "
                    "the estimator's, n_features), reported as their own method")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--sklearn-max-iter", type=int, default=100)
    ap.add_argument("--gamma", type=float, default=10.0,
                    help="stick-breaking concentration of both DP mixtures")
    ap.add_argument("--ratio-passes", type=int, default=3)
    ap.add_argument(
        "--learned-k-report",
        nargs="+",
        metavar="JSON",
        default=None,
        help="merge learned-K JSONs into --out (.json and .png) and print the summary",
    )
    ap.add_argument(
        "--default-pass-report",
        nargs="+",
        metavar="JSON",
        default=None,
        help="pool --default-pass JSONs over seeds into --out: per K, the held-out difference "
        "to L = K with its mean, 95%% t-interval and spread, beside the noise floor",
    )
    ap.add_argument(
        "--replot",
        metavar="JSON",
        default=None,
        help="only redraw the figure of an earlier run's JSON (written next to it)",
    )
    args = ap.parse_args(argv)
    if args.learned_k_report:
        learned_k_report(args.learned_k_report, args.out)
        return
    if args.default_pass_report:
        default_pass_report(args.default_pass_report, args.out)
        return
    if args.replot:
        with open(args.replot) as fh:
            results = json.load(fh)
        plot(results, Path(args.replot).with_suffix(".png"))
        return
    if args.quick:
        defaults = dict(n_train=10_000, n_heldout=3_000, passes=3, K=[50], sklearn_K=[50])
    else:
        defaults = dict(
            n_train=50_000, n_heldout=10_000, passes=10, K=[100, 200, 400], sklearn_K=[100, 200]
        )
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)

    t0 = time.perf_counter()
    train = load_image_patches(
        DATA / "bsds500" / "images" / "train",
        dtype=args.dtype,
        max_patches=args.n_train,
        random_state=0,
    )
    val = load_image_patches(
        DATA / "bsds500" / "images" / "val",
        dtype=args.dtype,
        max_patches=args.n_heldout,
        random_state=1,
    )
    X, X_ho = train.data, val.data
    print(
        f"patches: train {X.shape} from {len(train.filenames)} images, held-out {X_ho.shape} "
        f"from {len(val.filenames)} images ({time.perf_counter() - t0:.1f}s)",
        flush=True,
    )

    limits = threadpool_limits(limits=args.threads, user_api="blas") if args.threads else None
    if args.learned_k is not None:
        run_learned_k(X, X_ho, args, t0)
        if limits is not None:
            limits.restore_original_limits()
        return
    if args.default_pass:
        run_default_pass(X, X_ho, args, t0)
        if limits is not None:
            limits.restore_original_limits()
        return
    if args.candidates is not None:
        run_candidates(X, X_ho, args, t0)
        if limits is not None:
            limits.restore_original_limits()
        return
    results = {
        "config": {
            "n_train": int(X.shape[0]),
            "n_heldout": int(X_ho.shape[0]),
            "dim": int(X.shape[1]),
            "passes": args.passes,
            "K": args.K,
            "sklearn_K": args.sklearn_K,
            "L": ["1", "4", "16", "K"],
            "alpha": 10.0,
            "n_batches": args.n_batches,
            "stochastic_batch_size": int(np.ceil(X.shape[0] / args.n_batches)),
            "kappa": 0.6,
            "delta": 1.0,
            "repeats": args.repeats,
            "threads": args.threads,
            "dtype": args.dtype,
            "reg_covar": 1e-6,
            "data": "BSDS500 images/train (fit) and images/val (held out), 8x8 grayscale, "
            "stride 4, patch mean removed, uniform subsample",
        },
        "environment": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sparseclust": importlib.metadata.version("sparseclust"),
            "blas": [
                {k: i.get(k) for k in ("internal_api", "num_threads", "version")}
                for i in threadpool_info()
            ],
        },
        "runs": [],
    }
    keys_ours = [
        "time_pass",
        "time_weights",
        "time_responsibilities",
        "time_summary",
        "time_global",
        "time_other",
    ]
    keys_sk = ["time_pass", "time_e_step", "time_m_step"]
    for K in args.K:
        t = time.perf_counter()
        labels = initial_labels(X, K, seed=0)
        print(f"K={K}: k-means++ initialization {time.perf_counter() - t:.1f}s", flush=True)
        configs = [("ours", alg, L) for alg in ("memoized", "stochastic") for L in (1, 4, 16, K)]
        if K in args.sklearn_K:
            configs += [("GaussianMixture", "EM", K), ("BayesianGaussianMixture", "VB", K)]
        # repeats are interleaved (every configuration once, then again) so that slow phases
        # of a shared machine spread over all configurations instead of hitting one
        reps = {c: [] for c in configs}
        for rep in range(args.repeats):
            for name, alg, L in configs:
                if name == "ours":
                    passes = run_ours(X, X_ho, labels, K, L, alg, args)
                else:
                    cls = GaussianMixture if name == "GaussianMixture" else BayesianGaussianMixture
                    passes = run_sklearn(cls, X, X_ho, labels, K, args)
                reps[(name, alg, L)].append(passes)
                keys = keys_ours if name == "ours" else keys_sk
                med = summarize(passes, keys)
                label = f"{name:24s} {alg:10s} K={K:4d} L={'K' if L == K else str(L):>3s}"
                print(
                    f"[repeat {rep + 1}/{args.repeats}] {label}  pass {med['time_pass']:7.2f}s  "
                    f"heldout {passes[-1]['heldout']:.4f}  "
                    + "  ".join(f"{k[5:]} {v:.2f}" for k, v in med.items() if k != "time_pass"),
                    flush=True,
                )
        for name, alg, L in configs:
            runs = reps[(name, alg, L)]
            keys = keys_ours if name == "ours" else keys_sk
            per_rep = [summarize(p, keys) for p in runs]
            med = {k: statistics.median(s[k] for s in per_rep) for k in per_rep[0]}
            results["runs"].append(
                {
                    "method": name,
                    "algorithm": alg,
                    "K": K,
                    "L": L,
                    "L_label": "K" if L == K else str(L),
                    "median_pass": med,
                    "passes": runs[0],
                    "final_heldout": runs[0][-1]["heldout"],
                    "pass_times_all_repeats": [[p["time_pass"] for p in rp] for rp in runs],
                }
            )
    if limits is not None:
        limits.restore_original_limits()

    results["summary"] = targets(results)
    results["total_seconds"] = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_suffix(".json"), "w") as fh:
        json.dump(results, fh, indent=1)
    plot(results, out.with_suffix(".png"))
    print(json.dumps(results["summary"], indent=1))
    print(
        f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')} "
        f"({results['total_seconds']:.0f}s total)"
    )


# ----------------------------------------------------------------------------- learned K
def _timed_fit(est, X, X_ho, marks=None):
    """Fit ``est`` (ours) with held-out scoring after every pass; returns the wall and the
    CPU seconds (``time.process_time``) of the fit without the scoring (initialization
    included). ``marks``, a list, receives the CPU seconds of the fit so far at every
    held-out scoring (the end of every pass)."""
    spent = [0.0, 0.0]
    inner = est._score_samples_params

    def scored(*a, **kw):
        t, c = time.perf_counter(), time.process_time()
        if marks is not None:
            marks.append(c - c0 - spent[1])
        out = inner(*a, **kw)
        spent[0] += time.perf_counter() - t
        spent[1] += time.process_time() - c
        return out

    est._score_samples_params = scored
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est._fit(X, X_heldout=X_ho)
    total = time.perf_counter() - t0 - spent[0]
    cpu = time.process_time() - c0 - spent[1]
    del est._score_samples_params
    return total, cpu


def run_dp_one(X, X_ho, K, dp, args, seed):
    kw = dict(zero_mean=True, covariance_type="full", max_iter=args.max_iter,
              random_state=seed, n_threads=args.threads)
    method = "ours finite"
    if dp:
        kw.update(weight_concentration_prior_type="dirichlet_process",
                  weight_concentration_prior=args.gamma)
        method = "ours DP+moves"
        if args.dp_dof is not None:
            kw["degrees_of_freedom_prior"] = args.dp_dof * X.shape[1]
            method += f" (nu0={args.dp_dof:g}D)"
    else:
        kw.update(weight_concentration_prior=10.0 / K)
    est = SparseGaussianMixture(K, **kw)
    marks = []
    seconds, cpu = _timed_fit(est, X, X_ho, marks)
    offset = seconds - est.trace_[-1]["elapsed"]  # initialization
    if len(marks) != len(est.trace_):  # one held-out score per pass
        marks = [None] * len(est.trace_)
    curve = [
        {"elapsed": offset + e["elapsed"], "cpu": c, "heldout": e["heldout"],
         "n_components": e["n_components"],
         "merges_accepted": e.get("merges_accepted", 0),
         "deletes_accepted": e.get("deletes_accepted", 0),
         "births_accepted": e.get("births_accepted", 0)}
        for e, c in zip(est.trace_, marks, strict=True)
    ]
    return {
        "method": method,
        "K_start": K,
        "K_learned": int(est.n_components_),
        "seed": seed,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "passes": int(est.n_iter_),
        "converged": bool(est.converged_),
        "heldout": float(est.score(X_ho)),
        "train": float(est.score(X)),
        "lower_bound_per_sample": float(est.lower_bound_) / X.shape[0],
        # expected samples per live cluster, largest first
        "cluster_sizes": sorted((est.weights_ * X.shape[0]).round(2).tolist(), reverse=True),
        "curve": curve,
    }


def run_dp_sklearn(X, X_ho, K, name, args, seed):
    if name == "BayesianGaussianMixture":
        est = BayesianGaussianMixture(
            n_components=K, covariance_type="full",
            weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=args.gamma, max_iter=args.sklearn_max_iter,
            random_state=seed,
        )
    else:
        est = GaussianMixture(n_components=K, covariance_type="full",
                              max_iter=args.sklearn_max_iter, random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X)
    seconds = time.perf_counter() - t0
    used = int(np.count_nonzero(est.weights_ > 1.0 / X.shape[0]))
    return {
        "method": name,
        "K_start": K,
        "K_learned": used,
        "seed": seed,
        "seconds": seconds,
        "passes": int(est.n_iter_),
        "converged": bool(est.converged_),
        "heldout": float(est.score(X_ho)),
        "train": float(est.score(X)),
    }


def run_pass_ratio(X, K, args):
    """Median pass time (passes 2..n) of the defaults (L = 4) and of L = K, side by side."""
    out = {}
    for L in (4, None):
        est = SparseGaussianMixture(K, L=L, zero_mean=True, max_iter=args.ratio_passes, tol=0,
                                    random_state=0, n_threads=args.threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            est.fit(X)
        steps = [e["elapsed"] for e in est.trace_]
        times = np.diff([0.0] + steps)[1:]
        out["L4" if L == 4 else "LK"] = float(np.median(times))
    out["ratio_LK_over_L4"] = out["LK"] / out["L4"]
    return out


def run_learned_k(X, X_ho, args, t0):
    """The Dirichlet-process mixture with moves from K = 50 and K = 400 beside finite K and
    scikit-learn's mixtures, each fit to convergence at its defaults."""
    results = {
        "config": {
            "n_train": int(X.shape[0]), "n_heldout": int(X_ho.shape[0]),
            "dim": int(X.shape[1]), "dtype": args.dtype, "threads": args.threads,
            "group": args.learned_k, "seeds": args.seeds, "max_iter": args.max_iter,
            "load_average_start": os.getloadavg(),
            "sklearn_max_iter": args.sklearn_max_iter, "gamma": args.gamma,
            "dp_dof": args.dp_dof, "finite_alpha": 10.0,
            "data": "BSDS500 images/train (fit) and images/val (held out), 8x8 grayscale, "
            "stride 4, patch mean removed, uniform subsample",
            "ours": "SparseGaussianMixture(zero_mean=True, covariance_type='full'), defaults "
            "otherwise (memoized, L=4, tol=1e-3, kmeans++ init inside the clock)",
        },
        "environment": environment(),
        "runs": [],
    }

    def repeated(K, dp, seed):
        # the fits are deterministic; only their CPU seconds vary with the machine's load:
        # with --repeats, the repeat of median CPU time is kept and every repeat's time stored
        reps = [run_dp_one(X, X_ho, K, dp, args, seed) for _ in range(max(args.repeats, 1))]
        reps.sort(key=lambda r: r["cpu_seconds"])
        r = reps[(len(reps) - 1) // 2]
        if len(reps) > 1:
            r["cpu_seconds_repeats"] = [x["cpu_seconds"] for x in reps]
            r["repeats_identical"] = len(
                {(x["heldout"], x["passes"], x["K_learned"]) for x in reps}) == 1
            if not r["repeats_identical"]:
                print(f"warning: the repeats of K={K} seed {seed} differ", flush=True)
        return r

    results["config"]["repeats"] = args.repeats
    for seed in args.seeds:
        if args.learned_k in ("ours", "all", "dp"):
            for K in args.dp_K:
                r = repeated(K, True, seed)
                results["runs"].append(r)
                print(f"DP from K={K} seed {seed}: learned K={r['K_learned']} heldout "
                      f"{r['heldout']:.3f} train {r['train']:.3f} {r['seconds']:.0f}s "
                      f"(CPU {r['cpu_seconds']:.0f}s)", flush=True)
        if args.learned_k in ("ours", "all", "finite"):
            for K in args.finite_K:
                r = repeated(K, False, seed)
                results["runs"].append(r)
                print(f"finite K={K} seed {seed}: heldout {r['heldout']:.3f} train "
                      f"{r['train']:.3f} {r['seconds']:.0f}s", flush=True)
        if args.learned_k in ("sklearn", "all"):
            for name in ("BayesianGaussianMixture", "GaussianMixture"):
                r = run_dp_sklearn(X, X_ho, 100, name, args, seed)
                results["runs"].append(r)
                print(f"{name} K=100 seed {seed}: heldout {r['heldout']:.3f} train "
                      f"{r['train']:.3f} {r['seconds']:.0f}s", flush=True)
    if args.learned_k in ("ours", "all"):
        results["pass_ratio"] = {str(K): run_pass_ratio(X, K, args) for K in (200, 400)}
        print("pass ratio", results["pass_ratio"], flush=True)
    results["total_seconds"] = time.perf_counter() - t0
    out = Path(args.out)
    with open(out.with_suffix(".json"), "w") as fh:
        json.dump(results, fh, indent=1)
    print(f"wrote {out.with_suffix('.json')}")


def learned_k_report(paths, out):
    """Merge the JSONs of ``--learned-k`` runs, write the summary and the plot."""
    merged = None
    for p in paths:
        with open(p) as fh:
            r = json.load(fh)
        if merged is None:
            merged = r
            merged["parts"] = [dict(r["config"], environment=r.get("environment"))]
        else:
            # a later file's runs replace the earlier ones of the same method, K and seed
            new = {(x["method"], x["K_start"], x["seed"]) for x in r["runs"]}
            merged["runs"] = [x for x in merged["runs"]
                              if (x["method"], x["K_start"], x["seed"]) not in new]
            merged["runs"] += r["runs"]
            merged["parts"].append(dict(r["config"], environment=r.get("environment")))
            if "pass_ratio" in r:
                merged["pass_ratio"] = r["pass_ratio"]
    runs = merged["runs"]

    def med(method, K, key):
        vals = [r[key] for r in runs
                if r["method"] == method and r["K_start"] == K and r.get(key) is not None]
        return statistics.median(vals) if vals else None

    table = []
    dp_methods = sorted({r["method"] for r in runs if r["method"].startswith("ours DP+moves")})
    for method, Ks in ([(m, (50, 400)) for m in dp_methods]
                       + [("ours finite", (50, 100, 200, 400)),
                          ("BayesianGaussianMixture", (100,)), ("GaussianMixture", (100,))]):
        for K in Ks:
            h = med(method, K, "heldout")
            if h is None:
                continue
            table.append({"method": method, "K_start": K, "heldout": h,
                          "train": med(method, K, "train"),
                          "gap": med(method, K, "train") - h,
                          "K_learned": med(method, K, "K_learned"),
                          "seconds": med(method, K, "seconds"),
                          "cpu_seconds": med(method, K, "cpu_seconds"),
                          "passes": med(method, K, "passes")})
    merged["table"] = table
    finite = [t for t in table if t["method"] == "ours finite"]
    best = max(finite, key=lambda t: t["heldout"]) if finite else None
    bgm = next((t for t in table if t["method"] == "BayesianGaussianMixture"), None)
    summary = {}
    for t in table:
        if not t["method"].startswith("ours DP+moves") or best is None:
            continue
        # the finite fit nearest the learned K prices "one finite fit at the K it learns"
        near = min(finite, key=lambda f: abs(f["K_start"] - t["K_learned"]))
        entry = {
            "heldout": t["heldout"], "best_finite_K": best["K_start"],
            "best_finite_heldout": best["heldout"],
            "rel_to_best_finite": (t["heldout"] - best["heldout"]) / abs(best["heldout"]),
            "K_learned": t["K_learned"], "seconds": t["seconds"],
            "finite_fit_nearest_learned_K": near["K_start"],
            "time_ratio_to_that_finite_fit": t["seconds"] / near["seconds"],
            "cpu_seconds": t["cpu_seconds"],
            "cpu_time_ratio_to_that_finite_fit": (
                t["cpu_seconds"] / near["cpu_seconds"]
                if t["cpu_seconds"] and near["cpu_seconds"] else None),
            "train_heldout_gap": t["gap"],
        }
        if bgm is not None:
            entry["rel_to_BayesianGaussianMixture"] = (
                (t["heldout"] - bgm["heldout"]) / abs(bgm["heldout"]))
        variant = t["method"][len("ours DP+moves"):]  # "" or " (nu0=...)"
        summary[f"DP{variant} from K={t['K_start']}"] = entry
    if best is not None:
        summary["time_to_target"] = _time_to_target(runs, best["heldout"])
    merged["summary"] = summary
    with open(Path(out).with_suffix(".json"), "w") as fh:
        json.dump(merged, fh, indent=1)
    plot_learned_k(merged, Path(out).with_suffix(".png"))
    print(json.dumps({"table": table, "summary": summary}, indent=1))


def _time_to_target(runs, best_heldout, rel=1e-3):
    """Per DP fit (method, start K, seed): the CPU seconds (initialization included, scoring
    excluded) at the end of the first pass whose held-out score reaches the target's
    ``best_heldout - rel |best_heldout|``, beside the whole-fit CPU seconds of the finite fit
    of the same seed at the finite K nearest the K the DP fit learned (any finite run in
    ``runs``, e.g. K = 10), and their ratio. Fits whose curve has no CPU marks are skipped."""
    target = best_heldout - rel * abs(best_heldout)
    finite = [r for r in runs if r["method"] == "ours finite"]
    rows = []
    for r in runs:
        if not r["method"].startswith("ours DP+moves") or not r.get("curve"):
            continue
        if any(c.get("cpu") is None for c in r["curve"]):
            continue
        hit = next((c for c in r["curve"] if c["heldout"] >= target), None)
        same = [f for f in finite if f["seed"] == r["seed"]]
        near = min(same, key=lambda f: abs(f["K_start"] - r["K_learned"])) if same else None
        row = {"method": r["method"], "K_start": r["K_start"], "seed": r["seed"],
               "target": target, "K_learned": r["K_learned"],
               "cpu_to_target": hit["cpu"] if hit else None,
               "passes_to_target": r["curve"].index(hit) + 1 if hit else None,
               "finite_K": near["K_start"] if near else None,
               "finite_cpu_seconds": near["cpu_seconds"] if near else None}
        row["ratio"] = (row["cpu_to_target"] / row["finite_cpu_seconds"]
                        if hit and near and near["cpu_seconds"] else None)
        rows.append(row)
    return rows


def plot_learned_k(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = {10: "tab:orange", 50: "tab:blue", 100: "tab:green", 200: "tab:purple",
              400: "tab:red"}
    # CPU seconds for the curves that have them (runs since the CPU marks), else wall seconds
    seen = set()
    for r in results["runs"]:
        cpu = all(c.get("cpu") is not None for c in r.get("curve", []))
        label = f"{r['method']} K={r['K_start']}" + ("" if cpu else " (wall s)")
        first = label not in seen
        seen.add(label)
        if "curve" in r:
            t = [c["cpu"] if cpu else c["elapsed"] for c in r["curve"]]
            h = [c["heldout"] for c in r["curve"]]
            style = (("-." if "nu0" in r["method"] else "-")
                     if r["method"].startswith("ours DP") else "--")
            ax.plot(t, h, style, marker="." if style == "-" else None, ms=3,
                    color=colors[r["K_start"]], lw=1.4 if style == "-" else 0.9,
                    label=(f"{label} (learned {r['K_learned']})" if style == "-" else label)
                    if first else None)
        else:
            # scikit-learn's stored fits have wall seconds only (an earlier, loaded run)
            ax.plot([r["seconds"]], [r["heldout"]], "x" if "Bayes" in r["method"] else "+",
                    color="k", ms=9,
                    label=f"sklearn {r['method']} K=100 (wall s)" if first else None)
    ax.set_xscale("log")
    ax.set_xlabel("CPU seconds of training incl. initialization (wall seconds where marked; "
                  "log scale)")
    ax.set_ylabel("held-out log-likelihood per patch")
    lo = min(r["heldout"] for r in results["runs"])
    hi = max(r["heldout"] for r in results["runs"])
    ax.set_ylim(lo - 0.15 * (hi - lo) - 1, hi + 0.1 * (hi - lo) + 0.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    c = results["config"]
    ax.set_title(f"DP mixture with moves vs finite K, {c['n_train']} BSDS500 patches "
                 f"({c['n_heldout']} held out)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _pass_split(passes, refresh):
    """Median pass times of passes 2..n: all, refresh passes (1 + j * refresh) and the rest."""
    later = passes[1:]
    ref = [p["time_pass"] for p in later if (p["pass"] - 1) % refresh == 0]
    non = [p for p in later if (p["pass"] - 1) % refresh != 0]
    return {
        "pass_2_to_n": statistics.median(p["time_pass"] for p in later),
        "refresh_pass": statistics.median(ref) if ref else None,
        "non_refresh_pass": statistics.median(p["time_pass"] for p in non) if non else None,
        "non_refresh_weights": statistics.median(p["time_weights"] for p in non) if non else None,
        "weights_2_to_n": statistics.median(p["time_weights"] for p in later),
    }


def run_candidates(X, X_ho, args, t0):
    """Memoized runs with cached candidate sets beside L = 4 and L = K without them, measured
    in the same process and interleaved per repeat; added to the JSON at ``--out`` under
    ``candidate_runs`` / ``candidate_summary`` (the earlier runs are kept)."""
    out = Path(args.out)
    path = out.with_suffix(".json")
    results = json.load(open(path)) if path.exists() else {"runs": []}
    C, refresh = args.candidates, args.candidate_refresh
    block = {
        "config": {
            "n_train": int(X.shape[0]),
            "n_heldout": int(X_ho.shape[0]),
            "passes": args.passes,
            "K": args.K,
            "n_candidates": C,
            "candidate_refresh": refresh,
            "n_batches": args.n_batches,
            "threads": args.threads,
            "repeats": args.repeats,
            "dtype": args.dtype,
            "note": "pass times are medians over passes 2..n; refresh passes (1 + j * refresh) "
            "compute the full W, the others only the candidate pairs",
        },
        "runs": [],
    }
    summary = {}
    for K in args.K:
        labels = initial_labels(X, K, seed=0)
        configs = [(4, None), (K, None), (4, C), (1, C)]
        reps = {c: [] for c in configs}
        for rep in range(args.repeats):
            for L, cands in configs:
                passes = run_ours(
                    X,
                    X_ho,
                    labels,
                    K,
                    L,
                    "memoized",
                    args,
                    n_candidates=cands,
                    candidate_refresh=refresh,
                )
                reps[(L, cands)].append(passes)
                sp = _pass_split(passes, refresh)

                def fmt(v):
                    return "   -  " if v is None or not cands else f"{v:.3f}s"

                print(
                    f"[repeat {rep + 1}/{args.repeats}] K={K:4d} "
                    f"L={'K' if L == K else str(L):>3s} C={cands!s:>4s}  "
                    f"pass(2-n) {sp['pass_2_to_n']:.3f}s  refresh {fmt(sp['refresh_pass'])}  "
                    f"non-refresh {fmt(sp['non_refresh_pass'])}  "
                    f"weights(2-n) {sp['weights_2_to_n']:.3f}s  "
                    f"heldout {passes[-1]['heldout']:.4f}",
                    flush=True,
                )
        rows = {}
        for L, cands in configs:
            runs = reps[(L, cands)]
            splits = [_pass_split(p, refresh) for p in runs]
            med = {
                k: (statistics.median(s[k] for s in splits) if splits[0][k] is not None else None)
                for k in splits[0]
            }
            row = {
                "K": K,
                "L": L,
                "L_label": "K" if L == K else str(L),
                "n_candidates": cands,
                "candidate_refresh": refresh if cands else None,
                "pass_times": med,
                "final_heldout": runs[0][-1]["heldout"],
                "passes": runs[0],
            }
            rows[(L, cands)] = row
            block["runs"].append(row)
        dense = rows[(K, None)]["pass_times"]["pass_2_to_n"]
        bgm = _find(results.get("runs", []), method="BayesianGaussianMixture", K=K)
        entry = {}
        for (_L, cands), row in rows.items():
            name = f"L={row['L_label']}" + (f" C={cands}" if cands else "")
            pt = row["pass_times"]
            e = {
                "pass_2_to_n": pt["pass_2_to_n"],
                "speedup_vs_LK": dense / pt["pass_2_to_n"],
                "heldout": row["final_heldout"],
                "heldout_minus_LK": row["final_heldout"] - rows[(K, None)]["final_heldout"],
            }
            if cands:
                e["refresh_pass"] = pt["refresh_pass"]
                e["non_refresh_pass"] = pt["non_refresh_pass"]
                if pt["non_refresh_pass"] is not None:
                    e["non_refresh_speedup_vs_LK"] = dense / pt["non_refresh_pass"]
                if pt["refresh_pass"] is not None and pt["non_refresh_pass"] is not None:
                    # one refresh cycle = one full pass + (refresh - 1) restricted passes
                    cycle = (pt["refresh_pass"] + (refresh - 1) * pt["non_refresh_pass"]) / refresh
                    e["refresh_cycle_average_pass"] = cycle
                    e["refresh_cycle_speedup_vs_LK"] = dense / cycle
            if bgm is not None:
                e["speedup_vs_BayesianGaussianMixture_iteration_earlier_run"] = (
                    bgm["median_pass"]["time_pass"] / pt["pass_2_to_n"]
                )
            entry[name] = e
        summary[f"K={K} memoized"] = entry
    block["summary"] = summary
    block["total_seconds"] = time.perf_counter() - t0
    results["candidate_runs"] = block
    with open(path, "w") as fh:
        json.dump(results, fh, indent=1)
    print(json.dumps(summary, indent=1))
    print(f"added candidate_runs to {path} ({block['total_seconds']:.0f}s)")


def _cpu_fit(X, X_ho, labels, K, L, args, seed=0, **kw):
    """One memoized fit of ``args.passes`` passes from hard initial labels: CPU seconds of
    every pass (``time.process_time`` at each pass's end, single-threaded process) and the
    held-out score at the end."""
    est = SparseGaussianMixture(K, L=L, zero_mean=True, max_iter=args.passes, tol=0,
                                init_params=labels, random_state=seed, n_threads=args.threads,
                                n_batches=args.n_batches, **kw)
    stamps = []

    def cb(info):
        stamps.append(time.process_time())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        t0 = time.process_time()
        est._fit(X, callback=cb)
    per_pass = np.diff([t0] + stamps)
    return {
        "cpu_per_pass": per_pass.tolist(),
        "cpu_total": float(stamps[-1] - t0),
        "median_pass_2_to_n": float(np.median(per_pass[1:])),
        "heldout": point_loglik(X_ho, est.weights_, est.means_, est.precisions_cholesky_),
        "train_elbo_per_sample": float(est.lower_bound_) / X.shape[0],
    }


def run_default_pass(X, X_ho, args, t0):
    """The default pass (L = 4, candidate sets 'auto' with adaptive refresh) beside L = 4
    without candidate sets and L = K, interleaved per repeat, from the same initial labels."""
    configs = {
        "default (L=4, candidates auto)": (4, {}),
        "L=4 dense": (4, {"n_candidates": None}),
        "L=K": (None, {}),
    }
    if args.noise_floor:
        # exact L = K again from the same labels, only the memoized batches drawn with another
        # random_state: how far two equally exact fits end apart after the same passes
        configs["L=K, other batches"] = (None, {"batch_seed": 10_000})
    out = {"config": {
        "n_train": int(X.shape[0]), "n_heldout": int(X_ho.shape[0]), "passes": args.passes,
        "K": args.K, "n_batches": args.n_batches, "threads": args.threads,
        "repeats": args.repeats, "dtype": args.dtype,
        "clock": "time.process_time of a single-threaded process (OMP_NUM_THREADS=1)",
        "data": "BSDS500 images/train (fit) and images/val (held out), 8x8 grayscale, "
                "stride 4, patch mean removed, uniform subsample",
        "model": "SparseGaussianMixture(zero_mean=True, covariance_type='full'), memoized, "
                 "tol=0, k-means++ labels as init",
        "load_average_start": os.getloadavg(),
    }, "environment": {"numpy": np.__version__, "python": platform.python_version()},
        "runs": {}, "summary": {}}
    out["config"]["seeds"] = list(args.seeds)
    for K in args.K:
        reps = {name: [] for name in configs}
        for seed in args.seeds:
            # each seed: its own k-means++ labels and random_state, every config from them
            labels = initial_labels(X, K, seed=seed)
            for rep in range(args.repeats):
                for name, (L, kw) in configs.items():
                    kw = dict(kw)
                    rs = seed + kw.pop("batch_seed", 0)
                    r = _cpu_fit(X, X_ho, labels, K, L, args, seed=rs, **kw)
                    r["seed"] = int(seed)
                    reps[name].append(r)
                    print(f"[seed {seed} {rep + 1}/{args.repeats}] K={K} {name:32s} median "
                          f"pass {r['median_pass_2_to_n']:.3f}s total {r['cpu_total']:.1f}s "
                          f"heldout {r['heldout']:.4f}", flush=True)
        out["runs"][str(K)] = reps
        med = {name: statistics.median(r["median_pass_2_to_n"] for r in rs)
               for name, rs in reps.items()}
        tot = {name: statistics.median(r["cpu_total"] for r in rs) for name, rs in reps.items()}
        # held-out of the first repeat of every seed (repeats of one seed are the same fit)
        first = {name: {r["seed"]: r["heldout"] for r in reversed(rs)}
                 for name, rs in reps.items()}
        ho_lk = first["L=K"]
        summ = {}
        for name in reps:
            ho = first[name]
            diffs = [(ho[s] - ho_lk[s]) / abs(ho_lk[s]) for s in args.seeds]
            summ[name] = {
                "median_pass_2_to_n": med[name],
                "pass_speedup_vs_LK": med["L=K"] / med[name],
                "total_cpu": tot[name],
                "total_speedup_vs_LK": tot["L=K"] / tot[name],
                "heldout": ho[args.seeds[0]],
                "heldout_rel_diff_vs_LK": diffs[0],
                "heldout_per_seed": [ho[s] for s in args.seeds],
                "heldout_rel_diff_vs_LK_per_seed": diffs,
                "heldout_rel_diff_vs_LK_mean": float(np.mean(diffs)),
                "heldout_rel_diff_vs_LK_median": float(np.median(diffs)),
            }
        out["summary"][str(K)] = summ
    out["config"]["load_average_end"] = os.getloadavg()
    out["total_seconds"] = time.perf_counter() - t0
    path = Path(args.out).with_suffix(".json")
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
    print(json.dumps(out["summary"], indent=1))
    print(f"wrote {path}")


def default_pass_report(paths, out):
    """Pool ``--default-pass`` JSONs over seeds (a later file's run replaces an earlier one's
    of the same K, configuration and seed) and summarize, per K and configuration, the
    held-out difference to L = K of the same seed: its mean with a 95% t-interval, standard
    deviation, median, and how many seeds end within 0.05% (and no more than 0.05% below).
    Beside the default, "L=K, other batches" (``--noise-floor``) is the spread of two exact
    fits, the yardstick for a per-seed difference. Speed ratios are kept per source file
    (each file's runs share a machine and a load; the files may not)."""
    from scipy import stats as sstats

    pooled, sources = {}, []
    for path in paths:
        with open(path) as fh:
            r = json.load(fh)
        sources.append({"file": Path(path).name, "seeds": r["config"]["seeds"],
                        "load_average_start": r["config"].get("load_average_start"),
                        "pass_speedup_vs_LK": {
                            K: {name: v["pass_speedup_vs_LK"] for name, v in s.items()}
                            for K, s in r["summary"].items()}})
        for K, reps in r["runs"].items():
            for name, rs in reps.items():
                first = {}
                for run in rs:  # the first repeat of a seed is its fit
                    first.setdefault(run["seed"], run["heldout"])
                # a later file's seeds replace an earlier file's
                pooled.setdefault(K, {}).setdefault(name, {}).update(first)
    summary = {}
    for K, reps in pooled.items():
        lk = reps["L=K"]
        summary[K] = {}
        for name, ho in reps.items():
            if name == "L=K":
                continue
            seeds = sorted(s for s in ho if s in lk)
            d = np.array([100.0 * (ho[s] - lk[s]) / abs(lk[s]) for s in seeds])
            n = d.size
            sd = float(d.std(ddof=1)) if n > 1 else float("nan")
            half = float(sstats.t.ppf(0.975, n - 1) * sd / np.sqrt(n)) if n > 1 else float("nan")
            summary[K][name] = {
                "seeds": seeds,
                "heldout_rel_diff_vs_LK_percent_per_seed": d.tolist(),
                "n_seeds": n,
                "mean_percent": float(d.mean()),
                "mean_95ci_percent": [float(d.mean()) - half, float(d.mean()) + half],
                "sd_percent": sd,
                "median_percent": float(np.median(d)),
                "mean_abs_percent": float(np.abs(d).mean()),
                "seeds_within_0.05_percent": int(np.sum(np.abs(d) <= 0.05)),
                "seeds_not_below_minus_0.05_percent": int(np.sum(d >= -0.05)),
            }
    result = {"sources": sources, "summary": summary}
    path = Path(out).with_suffix(".json")
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)
    for K, s in summary.items():
        for name, v in s.items():
            lo, hi = v["mean_95ci_percent"]
            print(f"K={K} {name:32s} n={v['n_seeds']:2d} mean {v['mean_percent']:+.3f}% "
                  f"[{lo:+.3f}, {hi:+.3f}] sd {v['sd_percent']:.3f} median "
                  f"{v['median_percent']:+.3f}% |d| {v['mean_abs_percent']:.3f} within 0.05%: "
                  f"{v['seeds_within_0.05_percent']}/{v['n_seeds']}, not below -0.05%: "
                  f"{v['seeds_not_below_minus_0.05_percent']}/{v['n_seeds']}")
    print(f"wrote {path}")


def _find(runs, **kw):
    for r in runs:
        if all(r[k] == v for k, v in kw.items()):
            return r
    return None


def targets(results):
    """Side-by-side ratios of the paper's claims, per K (and algorithm) where all runs exist."""
    out = {}
    runs = results["runs"]
    for K in results["config"]["K"]:
        for alg in ("memoized", "stochastic"):
            sparse = _find(runs, method="ours", algorithm=alg, K=K, L=4)
            dense = _find(runs, method="ours", algorithm=alg, K=K, L=K)
            if sparse is None or dense is None:
                continue
            entry = {
                "pass_seconds_L4": sparse["median_pass"]["time_pass"],
                "pass_seconds_LK": dense["median_pass"]["time_pass"],
                "speedup_L4_vs_LK": dense["median_pass"]["time_pass"]
                / sparse["median_pass"]["time_pass"],
                "weights_share_of_pass_L4": sparse["median_pass"]["time_weights"]
                / sparse["median_pass"]["time_pass"],
                "weights_share_of_pass_LK": dense["median_pass"]["time_weights"]
                / dense["median_pass"]["time_pass"],
                "heldout_L4": sparse["final_heldout"],
                "heldout_LK": dense["final_heldout"],
                "heldout_rel_diff_L4_vs_LK": (sparse["final_heldout"] - dense["final_heldout"])
                / abs(dense["final_heldout"]),
            }
            # the weights step does the same work for every L: its spread across L measures
            # the timing noise of the shared machine
            w = {
                r["L_label"]: r["median_pass"]["time_weights"]
                for r in runs
                if r["method"] == "ours" and r["algorithm"] == alg and r["K"] == K
            }
            entry["weights_step_seconds_by_L"] = w
            entry["weights_step_spread_max_over_min"] = max(w.values()) / min(w.values())
            entry["summary_seconds_L4"] = sparse["median_pass"]["time_summary"]
            entry["summary_seconds_LK"] = dense["median_pass"]["time_summary"]
            for name in ("GaussianMixture", "BayesianGaussianMixture"):
                sk = _find(runs, method=name, K=K)
                if sk is not None:
                    # L = K beside L = 4: what our implementation buys without sparsity, and
                    # what sparsity adds on top of it
                    entry[f"speedup_L4_vs_{name}_iteration"] = (
                        sk["median_pass"]["time_pass"] / sparse["median_pass"]["time_pass"]
                    )
                    entry[f"speedup_LK_vs_{name}_iteration"] = (
                        sk["median_pass"]["time_pass"] / dense["median_pass"]["time_pass"]
                    )
                    entry[f"heldout_{name}"] = sk["final_heldout"]
            out[f"K={K} {alg}"] = entry
    return out


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    Ks = results["config"]["K"]
    fig, axes = plt.subplots(1, len(Ks) + 1, figsize=(5 * (len(Ks) + 1), 4.2))
    colors = {"1": "tab:blue", "4": "tab:orange", "16": "tab:green", "K": "tab:red"}
    for ax, K in zip(axes, Ks, strict=False):
        for r in results["runs"]:
            if r["K"] != K:
                continue
            t = [p["elapsed"] for p in r["passes"]]
            h = [p["heldout"] for p in r["passes"]]
            if r["method"] == "ours":
                style = "-" if r["algorithm"] == "memoized" else "--"
                ax.plot(
                    t,
                    h,
                    style,
                    marker=".",
                    color=colors[r["L_label"]],
                    label=f"{'MVI' if r['algorithm'] == 'memoized' else 'SVI'} L={r['L_label']}",
                )
            else:
                ax.plot(
                    t,
                    h,
                    ":",
                    marker="x",
                    color="k" if r["method"] == "GaussianMixture" else "gray",
                    label="sklearn GM (EM)" if r["method"] == "GaussianMixture" else "sklearn BGM",
                )
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("training time (s, log scale)")
        ax.set_ylabel("held-out log-likelihood per patch")
        ax.set_title(f"K = {K}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    # Fig. 1a: per-pass cost breakdown at the middle K
    K = Ks[len(Ks) // 2]
    ax = axes[-1]
    names, parts = (
        [],
        {"weights": [], "responsibilities": [], "summary": [], "global": [], "other": []},
    )
    for r in results["runs"]:
        if r["K"] != K:
            continue
        m = r["median_pass"]
        if r["method"] == "ours":
            names.append(f"{'MVI' if r['algorithm'] == 'memoized' else 'SVI'} L={r['L_label']}")
            for k in parts:
                parts[k].append(m[f"time_{k}"])
        else:
            names.append("GM (E+M)" if r["method"] == "GaussianMixture" else "BGM (E+M)")
            parts["weights"].append(m["time_e_step"])
            parts["summary"].append(m["time_m_step"])
            for k in ("responsibilities", "global", "other"):
                parts[k].append(0.0)
    bottom = np.zeros(len(names))
    for k, v in parts.items():
        ax.barh(
            names, v, left=bottom, label=k if k != "weights" else "weights W (sklearn: E step)"
        )
        bottom += np.asarray(v)
    ax.set_xlabel(f"seconds per pass, K = {K} (sklearn M step shown as 'summary')")
    ax.legend(fontsize=7)
    fig.suptitle(
        f"Zero-mean full-covariance GMM, {results['config']['n_train']} BSDS500 8x8 patches, "
        f"{results['config']['n_heldout']} held out"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
