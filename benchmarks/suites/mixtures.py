# SPDX-License-Identifier: BSD-3-Clause
"""Mixtures against scikit-learn: image patches, finite and Dirichlet-process mixtures."""

import re
import warnings

import numpy as np

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
  (a density in 64 dimensions, so it can exceed zero).
- "DP" is `weight_concentration_prior_type='dirichlet_process'` with the merge, delete and
  birth moves on (the default `moves='all'`), started from `n_components` clusters or from
  `n_samples // (4 nu0)` where fewer ("used"); "learned K" counts the clusters left. At each
  training size (patches drawn from the train images) it is compared with the finite fits
  of a K grid and timed against one finite fit at the K it learned.
- `tol`: a fit with the default `tol` against a tightly converged fit (`tight_tol`,
  `tight_max_iter`) of the same seed; the gap is the tight fit's report score minus the
  default's, relative to the tight score's size. Data: the patches above (K = 25);
  scikit-learn's bundled handwritten digits (1,797 × 64; a fixed random 60/20/20 split into
  fit, validation and report); IMDB reviews as 50-dimensional LSA features (TF-IDF of the
  fitted documents, `TruncatedSVD(50)`), fit / validation / report as in the topic suites."""

FULL = {
    "patches": dict(n_fit=50000, K=[25, 100], seeds=[0, 1],
                    methods=["sgmm", "sgmm-dense", "sklearn"], peer_max_K={"sklearn": 25}),
    "dp": dict(sizes=[10000, 50000, 200000], grid=[10, 25, 50, 100, 200], starts=[25, 200],
               seeds=[0, 1, 2]),
    "tol": dict(datasets={"patches": 25, "digits": 10, "imdb_lsa": 20}, seeds=[0, 1, 2],
                tight_tol=1e-7, tight_max_iter=3000),
}
QUICK = {
    "patches": dict(n_fit=5000, n_report=2000, K=[10], seeds=[0],
                    methods=["sgmm", "sgmm-dense", "sklearn"]),
    "dp": dict(sizes=[2000, 5000], n_report=2000, grid=[5, 10], starts=[5, 10], seeds=[0],
               max_iter=12),
    "tol": dict(datasets={"digits": 5}, seeds=[0], tight_tol=1e-5, tight_max_iter=300),
}
LABELS = {"sgmm": "SparseGaussianMixture (defaults, L = 4)",
          "sgmm-dense": "SparseGaussianMixture, L = K (dense)",
          "sklearn": "scikit-learn GaussianMixture", "dp": "DP mixture with moves",
          "finite": "finite (defaults)"}


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


def _tol_data(name):
    """fit / validation / report rows of one of the `tol` part's data sets."""
    if name == "patches":
        return patch_split(50000)
    if name == "digits":
        from sklearn.datasets import load_digits

        X = load_digits().data.astype(np.float64)
        order = np.random.RandomState(0).permutation(len(X))
        a, b = int(0.6 * len(X)), int(0.8 * len(X))
        return {"fit": X[order[:a]], "validation": X[order[a:b]], "report": X[order[b:]]}
    if name == "imdb_lsa":
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfTransformer

        from .._common import topic_corpus

        corpus = topic_corpus("imdb")
        tfidf = TfidfTransformer().fit(corpus["fit"])
        svd = TruncatedSVD(50, random_state=0).fit(tfidf.transform(corpus["fit"]))
        return {k: svd.transform(tfidf.transform(corpus[k]))
                for k in ("fit", "validation", "report")}
    raise ValueError(name)


def _tol(params, log):
    from sparseclust.mixture import SparseGaussianMixture

    records = []
    for name, K in params["datasets"].items():
        data = _tol_data(name)
        for seed in params["seeds"]:
            fits = {}
            for kind, extra in (("default", {}), ("tight", dict(
                    tol=params["tight_tol"], max_iter=params["tight_max_iter"]))):
                model = SparseGaussianMixture(n_components=K, random_state=seed, n_threads=1,
                                              **extra)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with Clock() as clock:
                        model.fit(data["fit"])
                fits[kind] = dict(cpu_s=clock.cpu, n_iter=int(model.n_iter_),
                                  report=float(model.score(data["report"])),
                                  validation=float(model.score(data["validation"])))
            d, t = fits["default"], fits["tight"]
            rec = dict(dataset=name, K=K, seed=seed, default=d, tight=t, **{
                f"gap_{s}_pct": 100 * (t[s] - d[s]) / abs(t[s]) for s in ("report", "validation")})
            log(f"  tol {name} K={K} seed={seed}: gap {rec['gap_report_pct']:.3f}% "
                f"(validation {rec['gap_validation_pct']:.3f}%), passes {d['n_iter']} vs "
                f"{t['n_iter']}")
            records.append(rec)
    return {"data": "per data set, see the method", "records": records}


def run(part, params, log):
    if part == "tol":
        return _tol(params, log)
    if part == "dp":
        return _dp(params, log)
    data = patch_split(params["n_fit"], n_report=params.get("n_report"),
                       n_validation=params.get("n_report"))
    records = []
    for seed in params["seeds"]:
        for K in params["K"]:
            for method in params["methods"]:
                if K <= params.get("peer_max_K", {}).get(method, K):
                    records.append(_one(method, K, seed, data, params, log))
    return {"data": data["description"], "n_fit": int(len(data["fit"])), "records": records}


def _one(method, K, seed, data, params, log, **fields):
    """Fit one model on ``data['fit']`` and score it: a record."""
    extra = {"max_iter": params["max_iter"]} if "max_iter" in params else {}
    X = data["fit"]
    model, clock = _fit(method, X, K, seed, extra if method != "sklearn" else {})
    rec = dict(method=method, K=K, seed=seed, n_fit=int(len(X)), cpu_s=clock.cpu,
               n_iter=int(model.n_iter_), report=float(model.score(data["report"])),
               validation=float(model.score(data["validation"])),
               train=float(model.score(X)), **fields)
    if method == "dp":
        rec["learned_K"] = int(model.n_components_)
        # the clusters the fit started from: n_components, or fewer where the data are few
        rec["start_used"] = int(model.trace_[0]["n_components"])
    log(f"  {method:10s} n={len(X)} K={K} seed={seed} cpu={clock.cpu:.1f}s "
        f"report={rec['report']:.3f} {fields}")
    return rec


def _dp(params, log):
    """At each training size: the finite grid, the DP mixture from each start, and a finite
    fit at each K the DP learned (its time is the yardstick of the DP's)."""
    records, descriptions = [], []
    for n in params["sizes"]:
        data = patch_split(n, n_report=params.get("n_report"),
                           n_validation=params.get("n_report"))
        descriptions.append(data["description"])
        for seed in params["seeds"]:
            finite = {K: _one("finite", K, seed, data, params, log) for K in params["grid"]}
            for start in params["starts"]:
                rec = _one("dp", start, seed, data, params, log, start=start)
                records.append(rec)
                K = rec["learned_K"]
                if K not in finite:
                    finite[K] = _one("finite", K, seed, data, params, log, at_learned=True)
            records.extend(finite.values())
    return {"data": "; ".join(descriptions), "records": records}


def _one_split(data):
    """The descriptions of a part's splits ("; "-separated), said once when they differ only
    in the number of training patches."""
    parts = data.split("; ")
    found = [re.match(r"(.*?: )(\d+)( from .*)", p) for p in parts]
    if len(parts) < 2 or not all(found) or len({m.group(1) + m.group(3) for m in found}) > 1:
        return data
    sizes = ", ".join(f"{int(m.group(2)):,}" for m in found)
    return f"{found[0].group(1)}{sizes}{found[0].group(3)}"


def _by(records, key):
    out = {}
    for r in records:
        out.setdefault(key(r), []).append(r)
    return out


def _tol_table(result):
    lines = [f"**tol** (commit `{result['commit']}`): the default `tol` against "
             f"`tol={result['parameters']['tight_tol']}`.", "",
             "| data | K | gap on report data (%) | gap on validation data (%) | passes: "
             "default, tight | CPU s: default, tight | seeds |", "|---|---|---|---|---|---|---|"]
    for (name, K), rs in _by(result["records"], lambda r: (r["dataset"], r["K"])).items():
        lines.append(
            f"| {name} | {K} | {fmt(mean([r['gap_report_pct'] for r in rs]), 3)} (max "
            f"{fmt(max(r['gap_report_pct'] for r in rs), 3)}) | "
            f"{fmt(mean([r['gap_validation_pct'] for r in rs]), 3)} | "
            f"{fmt(median([r['default']['n_iter'] for r in rs]), 0)}, "
            f"{fmt(median([r['tight']['n_iter'] for r in rs]), 0)} | "
            f"{fmt(median([r['default']['cpu_s'] for r in rs]), 1)}, "
            f"{fmt(median([r['tight']['cpu_s'] for r in rs]), 1)} | {len(rs)} |")
    return lines + [""]


def table(results):
    lines = []
    for result in sorted(results, key=lambda r: r["part"], reverse=True):
        recs = result["records"]
        if result["part"] == "tol":
            lines += _tol_table(result)
            continue
        lines += [f"**{result['part']}** (commit `{result['commit']}`): "
                  f"{_one_split(result['data'])}.", ""]
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
            lines += _dp_table(result)
        lines.append("")
    return "\n".join(lines)


def _best_finite(recs):
    """(K, mean report score) of the best finite fit of the grid among ``recs``."""
    grid = _by([r for r in recs if r["method"] == "finite" and not r.get("at_learned")],
               lambda r: r["K"])
    if not grid:
        return None, None
    best = max(grid, key=lambda K: mean([r["report"] for r in grid[K]]))
    return best, mean([r["report"] for r in grid[best]])


def _dp_table(result):
    recs = result["records"]
    lines = ["| training patches | model | K (start → learned) | report score | Δ vs best "
             "finite (%) | train − report | CPU s | CPU ÷ finite at learned K |",
             "|---|---|---|---|---|---|---|---|"]
    for n, rs in _by(recs, lambda r: r.get("n_fit", result.get("n_fit"))).items():
        best, best_score = _best_finite(rs)
        finite = {(r["K"], r["seed"]): r for r in rs if r["method"] == "finite"}
        for (method, K), group in _by(rs, lambda r: (r["method"], r["K"])).items():
            if method == "finite" and group[0].get("at_learned"):
                continue
            used = sorted({r.get("start_used", K) for r in group})
            start = K if used == [K] else f"{K} (used {', '.join(map(str, used))})"
            ks = (f"{start} → {', '.join(str(r['learned_K']) for r in group)}"
                  if method == "dp" else f"{K}{' (best)' if K == best else ''}")
            score = mean([r["report"] for r in group])
            delta = "" if best_score is None else signed(
                100 * (score - best_score) / abs(best_score), 2)
            ratio = ""
            if method == "dp":
                pairs = [(r, finite.get((r["learned_K"], r["seed"]))) for r in group]
                ratio = fmt(median([a["cpu_s"] / b["cpu_s"] for a, b in pairs if b]), 2)
            lines.append(
                f"| {n:,} | {LABELS[method]} | {ks} | {fmt(score, 2)} | {delta} | "
                f"{fmt(mean([r['train'] - r['report'] for r in group]), 2)} | "
                f"{fmt(median([r['cpu_s'] for r in group]), 1)} | {ratio} |")
    return lines


def headline(results):
    rows = []
    for result in results:
        recs = result["records"]
        if result["part"] == "tol":
            continue
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
            for n, rs in _by(recs, lambda r: r.get("n_fit", result.get("n_fit"))).items():
                best, best_score = _best_finite(rs)
                dp = [r for r in rs if r["method"] == "dp"]
                if best is None or not dp:
                    continue
                rows.append(dict(
                    ours=f"DP mixture with moves, {n:,} patches (learned K "
                         f"{min(r['learned_K'] for r in dp)}–{max(r['learned_K'] for r in dp)})",
                    peer=f"best finite K of a grid (K = {best})", data="BSDS500 8×8 patches",
                    metric="held-out log-density per patch",
                    figure=f"{mean([r['report'] for r in dp]):.2f}",
                    ratio=f"Δ {mean([r['report'] for r in dp]) - best_score:+.2f}"))
    return rows
