# SPDX-License-Identifier: BSD-3-Clause
"""Kernels: the sparse code paths against our own dense ones, on real data."""

import time
import warnings

import numpy as np

from .._common import patch_split, topic_corpus
from .._topics import Clock, fmt, median

NAME = "kernels"
TITLE = "Kernels: sparse against dense"
MEASURES = """\
What keeping posteriors sparse saves in the inner loops, each against our own dense code on
the same input: top-L responsibilities and their summary statistics (mixtures), the
L-sparse document local step (`SparseLDA.transform`), and the stochastic-EM sampler's alias
path against its dense path."""
METHOD = """\
- One thread, process CPU seconds, the median of `repeats` calls after one warm-up call.
- Responsibilities: the log-weights W (N × K) of the report patches under K Gaussians
  centred on fitted patches with the data's covariance; `sparseclust.posteriors.responsibilities`
  with L ∈ {1, 4, 16} against `dense_responsibilities` and `scipy.special.softmax`; then
  `summary_statistics` (full second moments) of those responsibilities.
- Local step: a SparseLDA fitted briefly (3 passes), then `transform` of all its fitted
  documents with L = 8 against L = K (set on the fitted model); each call includes building
  the K × V weight table once, which a small document set would make dominate.
- Sampler: StochasticEMLDA sweeps with `sampler='alias'` against `sampler='dense'` (CPU per
  sweep, sweeps 2 to the last)."""

FULL = {
    "responsibilities": dict(n=20000, K=[200, 800], L=[1, 4, 16], repeats=5),
    "local_step": dict(corpus="20newsgroups", K=[100, 400], L=8, repeats=3),
    "sampler": dict(corpus="20newsgroups", K=[100, 1000], sweeps=4),
}
QUICK = {
    "responsibilities": dict(n=2000, K=[50], L=[1, 4], repeats=2),
    "local_step": dict(corpus="kos", K=[20], L=4, repeats=2),
    "sampler": dict(corpus="kos", K=[50], sweeps=3),
}


def _cpu(fn, repeats):
    fn()
    times = []
    with Clock():
        for _ in range(repeats):
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
    return float(np.median(times))


def _responsibilities(params, log):
    from scipy.special import softmax

    from sparseclust.posteriors import (
        dense_responsibilities,
        responsibilities,
        summary_statistics,
    )

    data = patch_split(max(params["n"], 1000), n_validation=params["n"], n_report=params["n"])
    X, fit = data["report"], data["fit"]
    chol = np.linalg.cholesky(np.cov(fit.T) + 1e-6 * np.eye(fit.shape[1]))
    records = []
    for K in params["K"]:
        centres = fit[np.random.RandomState(0).choice(len(fit), K, replace=False)]
        Z = np.linalg.solve(chol, X.T).T
        C = np.linalg.solve(chol, centres.T).T
        W = -0.5 * ((Z**2).sum(1)[:, None] - 2 * Z @ C.T + (C**2).sum(1)[None, :])
        W = np.ascontiguousarray(W)
        rep = params["repeats"]
        dense = _cpu(lambda W=W: dense_responsibilities(W, n_threads=1), rep)
        scipy_s = _cpu(lambda W=W: softmax(W, axis=1), rep)
        full = dense_responsibilities(W, n_threads=1)
        idx_all = np.tile(np.arange(K), (len(X), 1))
        stats_dense = _cpu(lambda: summary_statistics(full, idx_all, X, K, n_threads=1),
                           max(1, rep // 2))
        for L in params["L"]:
            v, i = responsibilities(W, L, n_threads=1)
            rec = dict(kind="responsibilities", K=K, L=L, N=len(X),
                       sparse_s=_cpu(lambda W=W, L=L: responsibilities(W, L, n_threads=1), rep),
                       dense_s=dense, scipy_softmax_s=scipy_s,
                       stats_sparse_s=_cpu(lambda v=v, i=i: summary_statistics(
                           v, i, X, K, n_threads=1), rep),
                       stats_dense_s=stats_dense)
            log(f"  K={K} L={L}: responsibilities {rec['sparse_s']:.4f}s vs dense "
                f"{dense:.4f}s; statistics {rec['stats_sparse_s']:.4f}s vs {stats_dense:.4f}s")
            records.append(rec)
    return {"data": data["description"], "records": records}


def _local_step(params, log):
    from sparseclust.topics import SparseLDA

    data = topic_corpus(params["corpus"])
    records = []
    for K in params["K"]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 3 passes: a fixture, not a converged model
            model = SparseLDA(n_components=K, L=params["L"], max_iter=3, random_state=0,
                              n_threads=1).fit(data["fit"])
        X = data["fit"]
        sparse = _cpu(lambda m=model: m.transform(X), params["repeats"])
        model.set_params(L=K)
        dense = _cpu(lambda m=model: m.transform(X), params["repeats"])
        rec = dict(kind="local_step", K=K, L=params["L"], n_documents=X.shape[0],
                   n_tokens=int(X.sum()), sparse_s=sparse, dense_s=dense)
        log(f"  K={K}: transform L={params['L']} {sparse:.3f}s vs L=K {dense:.3f}s")
        records.append(rec)
    return {"data": data["description"], "records": records}


def _sampler(params, log):
    from .._topics import fit_ours

    data = topic_corpus(params["corpus"])
    records = []
    for K in params["K"]:
        rec = dict(kind="sampler", K=K, n_tokens=data["n_tokens"])
        for sampler in ("alias", "dense"):
            marks = []
            model, clock = fit_ours("sem", data["fit"], K, 0,
                                    dict(max_iter=params["sweeps"], tol=0.0, sampler=sampler),
                                    callback=lambda info: marks.append(time.process_time()))
            rec[f"{sampler}_sweep_s"] = median(np.diff(marks).tolist())
        log(f"  K={K}: sweep alias {rec['alias_sweep_s']:.3f}s vs dense "
            f"{rec['dense_sweep_s']:.3f}s")
        records.append(rec)
    return {"data": data["description"], "records": records}


def run(part, params, log):
    return {"responsibilities": _responsibilities, "local_step": _local_step,
            "sampler": _sampler}[part](params, log)


def table(results):
    lines = []
    by_part = {r["part"]: r for r in results}
    if "responsibilities" in by_part:
        r = by_part["responsibilities"]
        lines += [f"**Responsibilities** (commit `{r['commit']}`, N = "
                  f"{r['records'][0]['N']:,} patches): CPU seconds.", "",
                  "| K | L | top-L | dense (ours) | scipy softmax | speed-up vs dense | "
                  "statistics top-L | statistics dense | speed-up |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for x in r["records"]:
            lines.append(f"| {x['K']} | {x['L']} | {x['sparse_s']:.4f} | {x['dense_s']:.4f} | "
                         f"{x['scipy_softmax_s']:.4f} | {x['dense_s'] / x['sparse_s']:.1f} | "
                         f"{x['stats_sparse_s']:.4f} | {x['stats_dense_s']:.4f} | "
                         f"{x['stats_dense_s'] / x['stats_sparse_s']:.1f} |")
        lines.append("")
    if "local_step" in by_part:
        r = by_part["local_step"]
        lines += [f"**Document local step** (commit `{r['commit']}`): {r['data']}; "
                  "`transform` of the fitted documents, CPU seconds.", "",
                  "| K | L | L-sparse | L = K | speed-up |", "|---|---|---|---|---|"]
        for x in r["records"]:
            lines.append(f"| {x['K']} | {x['L']} | {x['sparse_s']:.3f} | {x['dense_s']:.3f} | "
                         f"{x['dense_s'] / x['sparse_s']:.1f} |")
        lines.append("")
    if "sampler" in by_part:
        r = by_part["sampler"]
        lines += [f"**Sampler** (commit `{r['commit']}`): {r['data']}; CPU seconds per sweep.",
                  "", "| K | alias | dense | speed-up |", "|---|---|---|---|"]
        for x in r["records"]:
            lines.append(f"| {x['K']} | {fmt(x['alias_sweep_s'])} | {fmt(x['dense_sweep_s'])} "
                         f"| {x['dense_sweep_s'] / x['alias_sweep_s']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def headline(results):
    rows = []
    for r in results:
        if r["part"] == "responsibilities" and r["records"]:
            x = max(r["records"], key=lambda x: (x["K"], x["L"] == 4))
            sparse = x["sparse_s"] + x["stats_sparse_s"]
            dense = x["dense_s"] + x["stats_dense_s"]
            rows.append(dict(ours=f"top-L responsibilities + statistics, K = {x['K']}, "
                                  f"L = {x['L']}", peer="our dense code (L = K)",
                             data="BSDS500 8×8 patches", metric="CPU s",
                             figure=f"{sparse:.3f}", ratio=f"× {dense / sparse:.1f} faster"))
    return rows
