# SPDX-License-Identifier: BSD-3-Clause
"""Mixtures against scikit-learn: image patches, finite and Dirichlet-process mixtures."""

import warnings

from .._common import patch_split
from .._topics import Clock, fmt, mean, median, signed

NAME = "mixtures"
TITLE = "Mixtures against scikit-learn"
MEASURES = """\
SparseGaussianMixture on natural-image patches (the sparse-posteriors paper's setting,
Hughes & Sudderth 2016): its defaults (L = 4 responsibilities per patch, memoized training),
our own dense code (L = K), and scikit-learn's `GaussianMixture`, at equal K; and the
Dirichlet-process mixture with moves against the finite fits of a K grid."""
METHOD = """\
- Full covariances, float64, one thread (BLAS included), process CPU seconds with the
  initialisation inside the clock. Ours: defaults apart from `n_components`, `L` and the
  weight prior; scikit-learn: its defaults (k-means initialisation, `tol=1e-3`,
  `max_iter=100`).
- Score: each estimator's `score` on the report patches, the mean log-density per patch
  (a density of 64-dimensional data, so it can exceed zero).
- "DP" is `weight_concentration_prior_type='dirichlet_process'` with the merge, delete and
  birth moves on (the default `moves='all'`), started from `n_components` clusters; "learned
  K" counts the clusters left."""

FULL = {
    "patches": dict(n_fit=50000, K=[25, 100], seeds=[0, 1],
                    methods=["sgmm", "sgmm-dense", "sklearn"], peer_max_K={"sklearn": 25}),
    "dp": dict(n_fit=50000, grid=[10, 25, 50, 100], starts=[25, 200], seeds=[0]),
}
QUICK = {
    "patches": dict(n_fit=5000, n_report=2000, K=[10], seeds=[0],
                    methods=["sgmm", "sgmm-dense", "sklearn"]),
    "dp": dict(n_fit=5000, n_report=2000, grid=[5, 10], starts=[10], seeds=[0], max_iter=10),
}
LABELS = {"sgmm": "SparseGaussianMixture (defaults, L = 4)",
          "sgmm-dense": "SparseGaussianMixture, L = K (dense)",
          "sklearn": "scikit-learn GaussianMixture", "dp": "DP mixture with moves",
          "finite": "SparseGaussianMixture (defaults)"}


def _fit(method, X, K, seed, extra):
    from sklearn.mixture import GaussianMixture

    from sparseclust.mixture import SparseGaussianMixture

    if method == "sklearn":
        model = GaussianMixture(n_components=K, covariance_type="full", random_state=seed)
    else:
        kw = dict(n_components=K, random_state=seed, n_threads=1, **extra)
        if method == "sgmm-dense":
            kw["L"] = K
        if method == "dp":
            kw["weight_concentration_prior_type"] = "dirichlet_process"
        model = SparseGaussianMixture(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Clock() as clock:
            model.fit(X)
    return model, clock


def run(part, params, log):
    data = patch_split(params["n_fit"], n_report=params.get("n_report"),
                       n_validation=params.get("n_report"))
    X = data["fit"]
    extra = {"max_iter": params["max_iter"]} if "max_iter" in params else {}
    records = []

    def one(method, K, seed, **fields):
        model, clock = _fit(method, X, K, seed, extra if method != "sklearn" else {})
        rec = dict(method=method, K=K, seed=seed, cpu_s=clock.cpu,
                   n_iter=int(model.n_iter_), report=float(model.score(data["report"])),
                   validation=float(model.score(data["validation"])),
                   train=float(model.score(X)), **fields)
        if method == "dp":
            rec["learned_K"] = int(model.n_components_)
        log(f"  {method:10s} K={K} seed={seed} cpu={clock.cpu:.1f}s "
            f"report={rec['report']:.3f} {fields}")
        records.append(rec)

    for seed in params["seeds"]:
        if part == "patches":
            for K in params["K"]:
                for method in params["methods"]:
                    if K <= params.get("peer_max_K", {}).get(method, K):
                        one(method, K, seed)
        else:
            for K in params["grid"]:
                one("finite", K, seed)
            for start in params["starts"]:
                one("dp", start, seed, start=start)
    return {"data": data["description"], "n_fit": int(len(X)), "records": records}


def _by(records, key):
    out = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def table(results):
    lines = []
    for result in sorted(results, key=lambda r: r["part"], reverse=True):
        recs = result["records"]
        lines += [f"**{result['part']}** (commit `{result['commit']}`): {result['data']}.", ""]
        if result["part"] == "patches":
            lines += ["| K | method | report score | Δ vs scikit-learn | CPU s | "
                      "CPU ratio vs scikit-learn | iterations | seeds |",
                      "|---|---|---|---|---|---|---|---|"]
            for (K, method), rs in _by(recs, lambda r: (r["K"], r["method"])).items():
                peer = {r["seed"]: r for r in recs if r["K"] == K and r["method"] == "sklearn"}
                pairs = [(r, peer[r["seed"]]) for r in rs if r["seed"] in peer]
                lines.append(
                    f"| {K} | {LABELS[method]} | {fmt(mean([r['report'] for r in rs]), 2)} | "
                    f"{signed(mean([a['report'] - b['report'] for a, b in pairs]), 2)} | "
                    f"{fmt(median([r['cpu_s'] for r in rs]), 1)} | "
                    f"{fmt(median([a['cpu_s'] / b['cpu_s'] for a, b in pairs]), 2)} | "
                    f"{fmt(median([r['n_iter'] for r in rs]), 0)} | {len(rs)} |")
        else:
            lines += ["| model | K (start → learned) | report score | train − report | "
                      "CPU s | seeds |", "|---|---|---|---|---|---|"]
            for (method, K), rs in _by(recs, lambda r: (r["method"], r["K"])).items():
                ks = (f"{K} → {', '.join(str(r['learned_K']) for r in rs)}"
                      if method == "dp" else str(K))
                lines.append(
                    f"| {LABELS[method]} | {ks} | {fmt(mean([r['report'] for r in rs]), 2)} | "
                    f"{fmt(mean([r['train'] - r['report'] for r in rs]), 2)} | "
                    f"{fmt(median([r['cpu_s'] for r in rs]), 1)} | {len(rs)} |")
        lines.append("")
    return "\n".join(lines)


def headline(results):
    rows = []
    for result in results:
        recs = result["records"]
        if result["part"] == "patches":
            for K in sorted({r["K"] for r in recs}):
                peer = {r["seed"]: r for r in recs if r["K"] == K and r["method"] == "sklearn"}
                rs = [r for r in recs if r["K"] == K and r["method"] == "sgmm"
                      and r["seed"] in peer]
                if not rs:
                    continue
                rows.append(dict(
                    ours=f"SparseGaussianMixture (defaults), K = {K}",
                    peer="scikit-learn GaussianMixture", data="BSDS500 8×8 patches",
                    metric="held-out log-density per patch; CPU s",
                    figure=f"{mean([r['report'] for r in rs]):.2f}; "
                           f"{median([r['cpu_s'] for r in rs]):.0f} s",
                    ratio=f"Δ {mean([r['report'] - peer[r['seed']]['report'] for r in rs]):+.2f}"
                          f"; CPU × "
                          f"{median([r['cpu_s'] / peer[r['seed']]['cpu_s'] for r in rs]):.2f}"))
        else:
            finite = _by([r for r in recs if r["method"] == "finite"], lambda r: r["K"])
            dp = [r for r in recs if r["method"] == "dp"]
            if not finite or not dp:
                continue
            best = max(finite, key=lambda K: mean([r["report"] for r in finite[K]]))
            best_score = mean([r["report"] for r in finite[best]])
            rows.append(dict(
                ours=f"DP mixture with moves (learned K "
                     f"{min(r['learned_K'] for r in dp)}–{max(r['learned_K'] for r in dp)})",
                peer=f"best finite K of a grid (K = {best})", data="BSDS500 8×8 patches",
                metric="held-out log-density per patch",
                figure=f"{mean([r['report'] for r in dp]):.2f}",
                ratio=f"Δ {mean([r['report'] for r in dp]) - best_score:+.2f}"))
    return rows
