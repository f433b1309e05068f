# SPDX-License-Identifier: BSD-3-Clause
"""Covariance prior of the zero-mean patch mixture: train/held-out gap on a *tuning* split.

The default ``covariance_prior`` Psi0 of ``SparseGaussianMixture(zero_mean=True)`` is the
uncentered second moment X^T X / n with ``degrees_of_freedom_prior`` nu0 = D, i.e. a prior
pseudo-scatter of about one data covariance shared by nu0 pseudo-samples. This script scales
Psi0 by ``s`` (and tries nu0 = D + 2, the smallest with a finite prior mean covariance
Psi0 / (nu0 - D - 1)) and records the train and held-out log-likelihood per patch of a finite
fit at K = 100 and of the Dirichlet-process mixture with moves from K = 100.

``--gammas`` / ``--dp-dofs``: instead, the DP mixture with moves for every concentration gamma
and every ``degrees_of_freedom_prior`` nu0 = m D (``--dp-dofs m ...``, the default covariance
prior Psi0 otherwise), started from each of ``--starts`` (K = 50 and 400) with ``--seeds``;
besides the gap it records the number of clusters holding fewer than 20 expected samples.
Writes ``benchmarks/results/gmm_priors_gamma.json`` by default.

Split (the tuning split of ``bench_defaults.py``, not the reporting split of
``bench_gmm_patches.py``): BSDS500 train images 0-99 (fit) and 100-199 (held out).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_priors.py --n-fit 10000 --n-heldout 5000

    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_priors.py --gammas 0.1 1 10 --seeds 0 1
    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_priors.py --dp-dofs 1 1.25 1.5 2 4 \
        --seeds 0 1 --out benchmarks/results/gmm_priors_dp_dof.json
    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_priors.py --dp-dofs 1 1.5 --seeds 0 1 \
        --data 20news-svd --out benchmarks/results/gmm_priors_dp_dof_20news_svd.json
    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_priors.py --dp-dofs 1 1.5 --seeds 0 1 \
        --covariance-type diag --out benchmarks/results/gmm_priors_dp_dof_diag.json
    OMP_NUM_THREADS=1 python benchmarks/bench_gmm_priors.py --finite-dofs 1 1.5 2 \
        --finite-K 50 100 200 --seeds 0 1

Writes ``benchmarks/results/gmm_priors.json``.
"""

import argparse
import itertools
import json
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from sparseclust.datasets import load_image_patches
from sparseclust.mixture import SparseGaussianMixture

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SPARSECLUST_SHARED_DATA", ROOT.parent / "shared" / "data"))


def tuning_split(n_fit, n_ho):
    train = load_image_patches(DATA / "bsds500" / "images" / "train",
                               max_patches=4 * n_fit, random_state=0)
    first = train.image_index < 100
    rng = np.random.RandomState(0)
    fit_idx = np.sort(rng.choice(np.flatnonzero(first), n_fit, replace=False))
    ho_idx = np.sort(rng.choice(np.flatnonzero(~first), n_ho, replace=False))
    return train.data[fit_idx], train.data[ho_idx]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-fit", type=int, default=10000)
    ap.add_argument("--n-heldout", type=int, default=5000)
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--scales", type=float, nargs="+", default=[0.25, 1.0, 4.0, 16.0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gammas", type=float, nargs="+", default=None,
                    help="study the DP concentration instead of the covariance prior")
    ap.add_argument("--dp-dofs", type=float, nargs="+", default=None,
                    help="study the DP mixture's nu0 = m * n_features for these m")
    ap.add_argument("--data", choices=("patches", "20news-svd"), default="patches",
                    help="the DP study's data: the patches' tuning split, or the tuning split "
                    "of bench_defaults.py's 20 Newsgroups SVD vectors (50 dimensions, with "
                    "means)")
    ap.add_argument("--finite-dofs", type=float, nargs="+", default=None,
                    help="instead, finite fits (alpha = 10 / K) at each of --finite-K with "
                    "nu0 = m * n_features for these m")
    ap.add_argument("--finite-K", type=int, nargs="+", default=[50, 100, 200])
    ap.add_argument("--covariance-type", choices=("full", "diag", "spherical"), default="full",
                    help="the DP study's covariance_type")
    ap.add_argument("--starts", type=int, nargs="+", default=[400, 50])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.finite_dofs:
        X, X_ho = tuning_split(args.n_fit, args.n_heldout)
        return finite_dof_study(args, X, X_ho)
    if args.gammas or args.dp_dofs:
        if args.data == "20news-svd":
            from bench_defaults import news_svd_splits

            name, X, X_ho = news_svd_splits(False)[0]
            assert name == "tuning"
        else:
            X, X_ho = tuning_split(args.n_fit, args.n_heldout)
        return dp_prior_study(args, X, X_ho)
    X, X_ho = tuning_split(args.n_fit, args.n_heldout)
    args.out = args.out or str(ROOT / "benchmarks" / "results" / "gmm_priors.json")
    D = X.shape[1]
    second = X.T @ X / X.shape[0]
    # mean-removed patches span a hyperplane: the same floor as the estimator's default prior
    if np.linalg.eigvalsh(second).min() <= 0:
        second = second + 1e-6 * np.eye(D)
    runs = []
    for dp in (False, True):
        for nu0 in (float(D), float(D + 2)):
            for s in args.scales:
                kw = dict(zero_mean=True, covariance_prior=s * second,
                          degrees_of_freedom_prior=nu0, random_state=0,
                          n_threads=args.threads)
                if dp:
                    kw.update(weight_concentration_prior_type="dirichlet_process",
                              weight_concentration_prior=10.0)
                else:
                    kw.update(weight_concentration_prior=10.0 / args.K)
                est = SparseGaussianMixture(args.K, **kw)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    est.fit(X)
                sec = time.perf_counter() - t0
                r = dict(dp=dp, nu0=nu0, scale=s, K_learned=int(est.n_components_),
                         train=float(est.score(X)), heldout=float(est.score(X_ho)),
                         seconds=sec, passes=int(est.n_iter_))
                r["gap"] = r["train"] - r["heldout"]
                runs.append(r)
                print(json.dumps(r), flush=True)
    with open(args.out, "w") as fh:
        json.dump({"config": vars(args) | {"split": "tuning: BSDS500 train images 0-99 fit, "
                                           "100-199 held out", "dim": D},
                   "runs": runs}, fh, indent=1)
    print(f"wrote {args.out}")


def _fit_record(est, X, X_ho, **fields):
    """Fit ``est`` on X (CPU seconds) and record ``fields`` with its scores, the clusters of
    fewer than 20 expected samples and the train/held-out gap; the record is printed."""
    c0 = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X)
    cpu = time.process_time() - c0
    sizes = np.sort(est.weights_)[::-1] * X.shape[0]
    r = dict(fields, small_clusters=int(np.sum(sizes < 20)),
             train=float(est.score(X)), heldout=float(est.score(X_ho)),
             cpu_seconds=cpu, passes=int(est.n_iter_))
    r["gap"] = r["train"] - r["heldout"]
    print(json.dumps(r), flush=True)
    return r


def _write(out, args, X, split, runs):
    with open(out, "w") as fh:
        json.dump({"config": vars(args) | {"out": out, "split": split, "dim": X.shape[1],
                                           "load_average": list(os.getloadavg())},
                   "runs": runs}, fh, indent=1)
    print(f"wrote {out}")


def dp_prior_study(args, X, X_ho):
    """The DP mixture for every gamma, nu0 = m D, start and seed (CPU seconds); the default
    covariance prior Psi0 otherwise."""
    out = args.out or str(ROOT / "benchmarks" / "results" / "gmm_priors_gamma.json")
    D = X.shape[1]
    runs = []
    for K0, gamma, m, seed in itertools.product(args.starts, args.gammas or [10.0],
                                                args.dp_dofs or [1.0], args.seeds):
        est = SparseGaussianMixture(
            K0, zero_mean=args.data == "patches", covariance_type=args.covariance_type,
            weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=gamma, degrees_of_freedom_prior=m * D,
            random_state=seed, n_threads=args.threads)
        r = _fit_record(est, X, X_ho, K_start=K0, gamma=gamma, nu0=m * D, seed=seed)
        r["K_learned"] = int(est.n_components_)
        r["lower_bound_per_sample"] = float(est.lower_bound_ / X.shape[0])
        runs.append(r)
    split = ("tuning: BSDS500 train images 0-99 fit, 100-199 held out"
             if args.data == "patches" else "tuning: bench_defaults.py's 20 Newsgroups "
             "SVD vectors, 4/5 of the train posts fit, 1/5 held out")
    _write(out, args, X, split, runs)


def finite_dof_study(args, X, X_ho):
    """Finite fits (alpha = 10 / K, the default covariance prior Psi0) for every K of
    ``--finite-K``, nu0 = m D of ``--finite-dofs`` and seed (CPU seconds)."""
    out = args.out or str(ROOT / "benchmarks" / "results" / "gmm_priors_finite_dof.json")
    D = X.shape[1]
    runs = []
    for K, m, seed in itertools.product(args.finite_K, args.finite_dofs, args.seeds):
        est = SparseGaussianMixture(
            K, zero_mean=True, covariance_type=args.covariance_type,
            weight_concentration_prior=10.0 / K, degrees_of_freedom_prior=m * D,
            random_state=seed, n_threads=args.threads)
        runs.append(_fit_record(est, X, X_ho, K=K, nu0=m * D, seed=seed))
    _write(out, args, X, "tuning: BSDS500 train images 0-99 fit, 100-199 held out", runs)


if __name__ == "__main__":
    main()
