# SPDX-License-Identifier: BSD-3-Clause
"""Speed of the local step from fixed weights (analogue of Hughes & Sudderth 2016, Fig. 1b and 1c).

Fig. 1b: responsibilities from a fixed weight matrix W (N x K) for L in {1, 4, 16, K}.
Fig. 1c: the summary statistics N_k, Sx_k, Sxx_k (Eq. 7, full second moment, D = 64) from
those responsibilities.  Everything is timed side by side in one process; reported numbers
are medians of repeats and ratios between them.

Baselines
---------
- responsibilities: our dense path (L = K), ``scipy.special.softmax(W, axis=1)``, and a
  memory floor: one pass computing each row's maximum (``W.max(axis=1)`` and our kernel).
- summary: the best dense numpy we know (``N = R.sum(0)``, ``Sx = R.T @ X``,
  ``Sxx_k = (X * R[:, k, None]).T @ X`` for each k, BLAS gemm) and our own kernel at L = K.

Usage: ``python benchmarks/bench_responsibilities.py [--quick] [--repeats 5] [--threads 1]
[--out benchmarks/results/responsibilities.json]``
"""

import argparse
import json
import os
import platform
import time

import numpy as np
import scipy.special
from threadpoolctl import threadpool_limits

from sparseclust import posteriors as P
from sparseclust._kernels import _topl

N_ROWS = 36816
KS = [50, 100, 200, 400, 800, 1600, 3200]
LS = [1, 4, 16]
D = 64
DENSE_SXX_MAX_K = 400  # dense O(N K D^2) second moment beyond this takes minutes per repeat


METHOD_CODES = (
    ("select", _topl.SELECT),
    ("scan", _topl.SCAN),  # the dispatch used by method="auto" for L <= 32
    ("insert", _topl.INSERT),
    ("buffer", _topl.BUFFER),
)


def timeit(f, repeats):
    f()  # warm-up (page faults, lazy init)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def dense_summary_numpy(R, X):
    """Best dense statistics we know in numpy: BLAS for Sx and one gemm per cluster for Sxx."""
    Sxx = np.empty((R.shape[1], X.shape[1], X.shape[1]))
    for k in range(R.shape[1]):
        np.matmul((X * R[:, k, None]).T, X, out=Sxx[k])
    return R.sum(0), R.T @ X, Sxx


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small subset, smoke test")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(__file__), "results", "responsibilities.json"),
    )
    ap.add_argument("--crossover", action="store_true", help="also time select vs scan, L<=128")
    ap.add_argument("--ks", type=str, default=None, help="comma-separated K subset")
    args = ap.parse_args(argv)
    nt = args.threads
    N, Ks, repeats = N_ROWS, KS, args.repeats
    if args.ks:
        Ks = [int(k) for k in args.ks.split(",")]
    if args.quick:
        N, Ks, repeats = 4000, [50, 400], min(repeats, 2)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    rows = []
    with threadpool_limits(limits=nt):  # numpy/scipy BLAS get the same thread budget
        for K in Ks:
            W = rng.standard_normal((N, K)) * 2.0  # Gaussian log-weights
            r = {"K": K, "N": N, "threads": nt}
            r["rowmax_numpy"] = timeit(lambda: W.max(axis=1), repeats)
            r["rowmax_kernel"] = timeit(lambda: _topl.row_max(W, nt), repeats)
            r["softmax_scipy"] = timeit(lambda: scipy.special.softmax(W, axis=1), repeats)
            r["dense"] = timeit(lambda: P.dense_responsibilities(W, n_threads=nt), repeats)
            for L in LS:
                for name, code in METHOD_CODES:
                    r[f"L{L}_{name}"] = timeit(
                        lambda: _topl.top_l(W, L, code, True, nt), repeats
                    )
                r[f"L{L}"] = timeit(lambda: P.responsibilities(W, L, n_threads=nt), repeats)
            if args.crossover:
                for L in (32, 64, 128):
                    if L < K:
                        for name, code in METHOD_CODES:
                            r[f"L{L}_{name}"] = timeit(
                                lambda: _topl.top_l(W, L, code, True, nt), repeats
                            )
            # summary statistics (full second moment), D = 64
            for L in LS:
                v, idx = P.responsibilities(W, L, n_threads=nt)
                r[f"stats_L{L}"] = timeit(
                    lambda: P.summary_statistics(v, idx, X, K, n_threads=nt), repeats
                )
            if K <= DENSE_SXX_MAX_K:
                R = P.dense_responsibilities(W, n_threads=nt)
                idx = np.broadcast_to(np.arange(K, dtype=np.int32), R.shape)
                rep = max(1, min(repeats, 3)) if K >= 200 else repeats
                r["stats_dense_kernel"] = timeit(
                    lambda: P.summary_statistics(R, idx, X, K, n_threads=nt), rep
                )
                r["stats_dense_numpy"] = timeit(lambda: dense_summary_numpy(R, X), rep)
                r["stats_dense_repeats"] = rep
                R = idx = None
            rows.append(r)
            print(json.dumps({k: (round(x, 5) if isinstance(x, float) else x)
                              for k, x in r.items()}), flush=True)
            W = None  # release before the next K
    meta = {
        "N": N,
        "D": D,
        "Ls": LS,
        "repeats": repeats,
        "threads": nt,
        "dense_sxx_max_K": DENSE_SXX_MAX_K,
        "machine": platform.processor() or platform.machine(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }
    out = {"meta": meta, "rows": rows}
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        existing = {}
        if os.path.exists(args.out) and not args.quick:
            with open(args.out) as fh:
                existing = json.load(fh)
        existing[f"threads={nt}"] = out
        with open(args.out, "w") as fh:
            json.dump(existing, fh, indent=1)
    print(markdown(rows))


def markdown(rows):
    lines = [
        "| K | dense ms | softmax/dense | L | top-L ms | dense/top-L | top-L/rowmax(np) | "
        "top-L/rowmax(kernel) | select ms | insert ms | buffer ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for L in LS:
            t = r[f"L{L}"]
            lines.append(
                f"| {r['K']} | {1e3 * r['dense']:.1f} | {r['softmax_scipy'] / r['dense']:.2f} | "
                f"{L} | {1e3 * t:.1f} | {r['dense'] / t:.1f} | {t / r['rowmax_numpy']:.1f} | "
                f"{t / r['rowmax_kernel']:.1f} | {1e3 * r[f'L{L}_select']:.1f} | "
                f"{1e3 * r[f'L{L}_insert']:.1f} | {1e3 * r[f'L{L}_buffer']:.1f} |"
            )
    lines += [
        "",
        "| K | stats L=1 ms | L=4 ms | L=16 ms | dense kernel (L=K) ms | dense numpy ms | "
        "numpy dense / L=4 | kernel dense / L=4 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        dk, dn = r.get("stats_dense_kernel"), r.get("stats_dense_numpy")
        s4 = r["stats_L4"]
        lines.append(
            f"| {r['K']} | {1e3 * r['stats_L1']:.1f} | {1e3 * s4:.1f} | "
            f"{1e3 * r['stats_L16']:.1f} | "
            + (f"{1e3 * dk:.0f} | {1e3 * dn:.0f} | {dn / s4:.0f} | {dk / s4:.0f} |"
               if dk else "skipped | skipped | | |")
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
