# SPDX-License-Identifier: BSD-3-Clause
"""Speed of the L-sparse LDA document local step against the dense one (Hughes & Sudderth 2016,
Fig. 3b/3c).

Setup: IMDB reviews read straight from ``aclImdb_v1_text.tar.gz`` (no unpacking);
``CountVectorizer(stop_words="english", min_df=5)`` fitted on ``--n-fit`` reviews; one SparseLDA
with ``max(K)`` topics trained for ``--train-passes`` memoized passes (L = 8) on those reviews;
smaller K use the first K of its topics (lambda rows). Timed: the local step (per-document
iterations and restart proposals) and the summary step (statistics) separately, on
``--n-docs`` other reviews, with alpha = 0.5 / K, ``--local-iters`` iterations per document
(tol = 0 by default: exactly that many, as in the paper's figure) and ``--restarts`` restart
proposals per document. L = K is the dense routine (exp(E[log phi]) dot products over all K
topics). Every cell is the median of ``--repeats`` runs, and ratios are taken against L = K
measured in the same process.

Usage::

    python benchmarks/bench_lda_local_step.py [--quick] [--repeats 3] [--threads 1,2]
        [--out benchmarks/results/lda_local_step.json]
"""

import argparse
import io
import json
import os
import platform
import sys
import tarfile
import time

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer

from sparseclust import SparseLDA
from sparseclust._kernels import _lda_local
from sparseclust.topics._local import (
    EPS_REL,
    RESTART_MIN,
    TopicTables,
    _check_alpha,
    _check_counts,
    _columns,
)

DATA = os.environ.get(
    "SPARSECLUST_SHARED_DATA",
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"),
)


def read_imdb(n, path):
    """First n reviews (train/test pos/neg, then unsup) in archive order."""
    texts = []
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.endswith(".txt"):
                continue
            parts = member.name.split("/")
            if len(parts) != 4 or parts[2] not in ("pos", "neg", "unsup"):
                continue
            with tar.extractfile(member) as fh:
                texts.append(io.TextIOWrapper(fh, encoding="utf-8").read().replace("<br />", " "))
            if len(texts) >= n:
                break
    return texts


def time_local_step(X, tables, alpha, L, iters, tol, restarts, n_threads):
    """(local seconds, summary seconds, result dict) for one call of each phase."""
    K = tables.n_topics
    indptr, indices, data, _ = _check_counts(X, tables.n_words)
    alpha = _check_alpha(alpha, K)
    dense = L >= K
    if dense:
        ET, rowmax = tables.dense_tables()
    else:
        ET, rowmax = np.empty((0, K)), np.empty(0)
    t0 = time.perf_counter()
    out = _lda_local.lda_local_docs(
        indptr, indices, data, tables.CT, ET, rowmax, alpha, 0 if dense else L, iters, tol,
        5, 10, restarts, 5, RESTART_MIN, EPS_REL, n_threads,
    )
    t1 = time.perf_counter()
    col_ptr, col_pos, col_doc = _columns(indptr, indices, tables.n_words)
    ST = np.zeros((tables.n_words, K))
    sum_elogpi = np.zeros(K)
    _lda_local.lda_summary(
        col_ptr, col_pos, col_doc, data, out["N"], out["expP"], out["zs"], out["r"], out["idx"],
        ET, alpha, out["psi_sum"], out["underflow"], ST, sum_elogpi, int(dense), n_threads,
    )
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small run: K in {100, 400}, 300 docs")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", default="1", help="comma-separated thread counts")
    p.add_argument("--ks", default="100,200,400,800")
    p.add_argument("--ls", default="1,2,4,8,16", help="sparsity levels besides L = K")
    p.add_argument("--n-fit", type=int, default=12000)
    p.add_argument("--n-docs", type=int, default=1000)
    p.add_argument("--train-passes", type=int, default=2)
    p.add_argument("--local-iters", type=int, default=100)
    p.add_argument("--tol", type=float, default=0.0)
    p.add_argument("--restarts", type=int, default=4)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                 "lda_local_step.json"))
    args = p.parse_args(argv)
    ks = [int(k) for k in args.ks.split(",")]
    if args.quick:
        ks = [100, 400]
        args.n_fit, args.n_docs, args.train_passes = 4000, 300, 1
    ls = [int(v) for v in args.ls.split(",")]
    threads = [int(t) for t in args.threads.split(",")]

    path = os.path.join(DATA, "imdb", "aclImdb_v1_text.tar.gz")
    t = time.perf_counter()
    texts = read_imdb(args.n_fit + args.n_docs, path)
    vec = CountVectorizer(stop_words="english", min_df=5)
    X_fit = sp.csr_array(vec.fit_transform(texts[: args.n_fit]), dtype=np.float64)
    X = sp.csr_array(vec.transform(texts[args.n_fit :]), dtype=np.float64)
    print(f"IMDB: {X_fit.shape[0]} fit docs, vocabulary {X_fit.shape[1]}, {X.shape[0]} timed "
          f"docs ({X.sum():.0f} tokens, {X.nnz} word types) [{time.perf_counter() - t:.1f}s]",
          file=sys.stderr)

    t = time.perf_counter()
    kmax = max(ks)
    model = SparseLDA(n_components=kmax, L=8, max_iter=args.train_passes, n_batches=5,
                      random_state=0).fit(X_fit)
    print(f"trained K={kmax} in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    lam = model.components_

    rows = []
    for K in ks:
        lamK = lam[:K]
        from scipy.special import psi

        tables = TopicTables(psi(lamK) - psi(lamK.sum(1))[:, None])
        tables.dense_tables()
        alpha = 0.5 / K
        for nt in threads:
            cells = {}
            for L in [v for v in ls if v < K] + [K]:
                loc, summ = [], []
                for _ in range(args.repeats):
                    a, b, out = time_local_step(X, tables, alpha, L, args.local_iters, args.tol,
                                                args.restarts, nt)
                    loc.append(a)
                    summ.append(b)
                cells[L] = dict(
                    local=float(np.median(loc)), summary=float(np.median(summ)),
                    local_all=loc, summary_all=summ,
                    restarts_tried=int(out["tried"].sum()),
                    restarts_accepted=int(out["accepted"].sum()),
                    iters=int(out["n_iter"].sum()),
                    mean_active_topics=float(np.mean(np.sum(out["N"] > 0, axis=1))),
                )
            for L, c in cells.items():
                row = dict(K=K, L=L, threads=nt, **c,
                           local_speedup_vs_dense=cells[K]["local"] / c["local"],
                           summary_speedup_vs_dense=cells[K]["summary"] / c["summary"])
                rows.append(row)
                print(f"K={K:4d} L={L:4d} threads={nt}  local {c['local']:8.3f}s "
                      f"(x{row['local_speedup_vs_dense']:6.2f} vs L=K)  summary "
                      f"{c['summary']:7.4f}s (x{row['summary_speedup_vs_dense']:6.2f})  "
                      f"restarts {c['restarts_accepted']}/{c['restarts_tried']}",
                      file=sys.stderr, flush=True)
    result = dict(
        benchmark="lda_local_step",
        description=__doc__.strip().split("\n")[0],
        settings=dict(vars(args), vocabulary=X.shape[1], n_tokens=float(X.sum()),
                      nnz=int(X.nnz), alpha="0.5/K", topics=f"first K of a K={kmax} "
                      f"SparseLDA(L=8) trained {args.train_passes} memoized passes"),
        machine=dict(platform=platform.platform(), cpus=os.cpu_count(),
                     python=platform.python_version()),
        rows=rows,
    )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
