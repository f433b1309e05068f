# SPDX-License-Identifier: BSD-3-Clause
"""The ``mixture`` command: fit SparseGaussianMixture to the rows of a matrix, print the
cluster sizes and write the labels and the model asked for."""

import time
import warnings
from pathlib import Path

import numpy as np

from ._common import CLIError, _check_writable, _progress, _say
from ._corpus import _load_matrix


def _run_mixture(args):
    X = _load_matrix(args.data)
    n, D = X.shape
    K = args.n_components
    if K > n:
        raise CLIError(f"--n-components {K} exceeds the number of rows ({n})")
    _check_writable(args.labels, args.save_model)
    if args.labels and Path(args.labels).suffix.lower() not in (".csv", ".txt", ".npy"):
        raise CLIError(f"--labels {args.labels}: expected a file ending in .csv, .txt or .npy")
    from sklearn.exceptions import ConvergenceWarning

    from sparseclust import SparseGaussianMixture

    L = min(args.L if args.L is not None else 4, K)
    model = SparseGaussianMixture(
        K, L=L, covariance_type=args.covariance_type, algorithm=args.algorithm,
        max_iter=args.max_iter, random_state=args.seed, n_threads=args.threads,
        n_batches=min(10, n),
    )
    _say(args, f"data: {args.data}: {n} rows, {D} columns; fitting SparseGaussianMixture: "
               f"K={K}, L={L}, covariance {args.covariance_type}, algorithm {args.algorithm}")
    progress = _progress(args, "SparseGaussianMixture", args.max_iter)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            labels = model.fit(X, callback=progress).predict(X)
    except ValueError as exc:
        raise CLIError(f"cannot fit: {exc}") from None
    finally:
        if progress is not None:
            progress.close()
    t_fit = time.perf_counter() - t0
    sizes = np.bincount(labels, minlength=K)
    how = "converged" if model.converged_ else "stopped without converging"
    print(f"{how} after {model.n_iter_} passes ({t_fit:.2f}s); lower bound "
          f"{model.lower_bound_:.6g}")
    print("rows per component: " + " ".join(f"{k}:{int(c)}" for k, c in enumerate(sizes)))
    if args.labels:
        try:
            if Path(args.labels).suffix.lower() == ".npy":
                np.save(args.labels, labels.astype(np.int64))
            else:
                np.savetxt(args.labels, labels, fmt="%d", header="label", comments="")
        except OSError as exc:
            raise CLIError(f"cannot write {args.labels}: {exc}") from None
        _say(args, f"wrote the {n} labels to {args.labels}")
    if args.save_model:
        from .._persist import save
        from .._saved import slim_copy

        try:
            save(slim_copy(model), args.save_model)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save_model}: {exc}") from None
        _say(args, f"saved the model to {args.save_model}")
    return 0
