# SPDX-License-Identifier: BSD-3-Clause
"""Defaults and the stopping rule (``tol``) of SparseGaussianMixture and SparseLDA, measured.

Question: with which ``tol`` (and, for the mixture, which ``L`` and ``algorithm``) does a fit
end within 0.1% of the held-out score of the same fit run to tight convergence, and how much
time does that take?

Method. Every configuration is run once per split with ``tol=0`` for a fixed number of passes,
recording after every pass the elapsed training time (held-out scoring excluded), the ELBO, the
estimator's convergence measure ``elbo_change`` (the ELBO change per sample or per token) and
the held-out score. A fit with a given ``tol`` stops at the first pass whose ``elbo_change`` is
below ``tol`` -- the rule the estimators apply -- so one long run answers for every ``tol``:
its held-out score at that pass is compared with the score after the last pass (the "tight"
fit).

Splits. Choices are made on *tuning* splits and then reported on different *reporting* splits
(other documents or images, other seeds):

- patches: tuning = BSDS500 train images 0-99 (fit, 20,000 patches) / images 100-199 (held
  out, 5,000); reporting = all train images (fit, 20,000, another draw) / val images (5,000).
- 20news-svd: tuning = 4/5 of the 20 Newsgroups train posts (fit) / the other 1/5 (held
  out), TF-IDF and a 50-dim SVD fitted on the fit posts, rows of unit length; reporting =
  all train posts (another order) / 2,262 test posts.
- kos: tuning = the bundled KOS corpus, seed 0, 10% of the documents held out (as the
  command line does); reporting = seeds 1-4.
- 20news: tuning = 10,314 train posts (fit) / 1,000 other train posts; reporting = all 11,314
  train posts / 1,000 test posts.

Mixtures: zero-mean full covariances on patches (K = 100, the image-patch model), full
covariances with means on the document vectors (K = 20). Mixture scores: mean held-out
log-likelihood per sample (``score``). Topic-model scores:
held-out document completion per token (:func:`sparseclust.metrics.document_completion_score`).
One thread everywhere (``--threads``), BLAS limited to it.

Usage::

    python benchmarks/bench_defaults.py                 # everything (~45 min)
    python benchmarks/bench_defaults.py --part lda      # only the topic models
    python benchmarks/bench_defaults.py --quick         # smoke run

Writes ``benchmarks/results/defaults.json``.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    RESULTS,
    SHARED_DATA,
    environment,
    load_20newsgroups,
    vectorize,
    write_json,
)

from sparseclust import SparseGaussianMixture, SparseLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402

TOLS = [1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6]
TARGET = 1e-3  # relative gap to the tightly converged fit's held-out score


# ---------------------------------------------------------------------------------------
# data


def patches_splits(quick):
    from sparseclust.datasets import load_image_patches

    n_fit, n_ho = (4000, 1000) if quick else (20000, 5000)
    folder = SHARED_DATA / "bsds500" / "images"
    train = load_image_patches(folder / "train", max_patches=4 * n_fit, random_state=0)
    first = train.image_index < 100
    rng = np.random.RandomState(0)
    fit_idx = np.sort(rng.choice(np.flatnonzero(first), n_fit, replace=False))
    ho_idx = np.sort(rng.choice(np.flatnonzero(~first), n_ho, replace=False))
    tuning = ("tuning", train.data[fit_idx], train.data[ho_idx])
    fit = load_image_patches(folder / "train", max_patches=n_fit, random_state=1).data
    val = load_image_patches(folder / "val", max_patches=n_ho, random_state=2).data
    return [tuning, ("report", fit, val)]


def news_svd_splits(quick):
    """20 Newsgroups posts as dense vectors: TF-IDF (fitted on the fit documents), a 50-dim
    truncated SVD, rows scaled to unit length -- the usual input of a Gaussian mixture of
    documents."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    texts, _, _ = load_20newsgroups("train")
    test_texts, _, _ = load_20newsgroups("test")
    n = 3000 if quick else len(texts)

    def embed(fit_texts, ho_texts):
        vec = TfidfVectorizer(stop_words="english", min_df=5, sublinear_tf=True)
        A = vec.fit_transform(fit_texts)
        svd = TruncatedSVD(50, random_state=0).fit(A)
        return (normalize(svd.transform(A)), normalize(svd.transform(vec.transform(ho_texts))))

    perm = np.random.RandomState(0).permutation(len(texts))[:n]
    cut = len(perm) // 5
    X_fit, X_ho = embed([texts[i] for i in perm[cut:]], [texts[i] for i in perm[:cut]])
    out = [("tuning", X_fit, X_ho)]
    rng = np.random.RandomState(1)
    perm = rng.permutation(len(texts))[:n]
    ho = rng.permutation(len(test_texts))[: len(perm) // 5]
    X_fit, X_ho = embed([texts[i] for i in perm], [test_texts[i] for i in ho])
    out.append(("report", X_fit, X_ho))
    return out


def kos_splits(quick):
    from sparseclust.datasets import load_kos

    X = sp.csr_matrix(load_kos().data)
    out = []
    for seed in (0, 1) if quick else (0, 1, 2, 3, 4):
        perm = np.random.RandomState(seed).permutation(X.shape[0])
        n_test = int(round(0.1 * X.shape[0]))
        name = "tuning" if seed == 0 else f"report seed {seed}"
        out.append((name, X[np.sort(perm[n_test:])], X[np.sort(perm[:n_test])]))
    return out


def news_splits(quick):
    texts, _, _ = load_20newsgroups("train")
    test_texts, _, _ = load_20newsgroups("test")
    n_ho = 300 if quick else 1000
    rng = np.random.RandomState(0)
    perm = rng.permutation(len(texts))
    if quick:
        perm = perm[:3000]
    fit_t = [texts[i] for i in perm[n_ho:]]
    ho_t = [texts[i] for i in perm[:n_ho]]
    X_fit, X_ho, _ = vectorize(fit_t, ho_t)
    tuning = ("tuning", X_fit, X_ho)
    rng = np.random.RandomState(1)
    perm = rng.permutation(len(texts))
    if quick:
        perm = perm[:3000]
    X_fit, X_test, _ = vectorize([texts[i] for i in perm], test_texts)
    test_idx = np.sort(rng.permutation(X_test.shape[0])[:n_ho])
    return [tuning, ("report", X_fit, X_test[test_idx])]


# ---------------------------------------------------------------------------------------
# runs


def run_gmm(X, X_ho, K, L, algorithm, passes, threads, zero_mean):
    est = SparseGaussianMixture(
        K, L=L, algorithm=algorithm, zero_mean=zero_mean, max_iter=passes, tol=0,
        random_state=0, n_threads=threads,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est._fit(X, X_heldout=X_ho)
    return [
        {"pass": e["pass"], "elapsed": e["elapsed"], "elbo": e["elbo"],
         "elbo_change": e["elbo_change"], "heldout": e["heldout"]}
        for e in est.trace_
    ]


def run_lda(X, X_ho, K, passes, threads, **params):
    passes_out = []

    def callback(info):
        lam = info["components"]
        score = document_completion_score(
            lam / lam.sum(axis=1, keepdims=True), X_ho, random_state=0,
            doc_topic_prior=0.5 / K, n_threads=threads,
        )
        passes_out.append({"pass": info["pass"], "elapsed": info["elapsed"],
                           "elbo": info["elbo"], "elbo_change": info["elbo_change"],
                           "heldout": score})
        return False

    est = SparseLDA(K, max_iter=passes, tol=0, random_state=0, n_threads=threads, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, callback=callback)
    return passes_out


def stops(passes, tols=TOLS):
    """For each tol: the pass the estimator would stop at, its time and held-out score, and the
    relative gap to the score after the last pass."""
    tight = passes[-1]["heldout"]
    out = {}
    for tol in tols:
        stop = next((p for p in passes if p["elbo_change"] < tol), passes[-1])
        out[repr(tol)] = {
            "pass": stop["pass"],
            "elapsed": stop["elapsed"],
            "heldout": stop["heldout"],
            "rel_gap": (stop["heldout"] - tight) / abs(tight),
            "reached": stop["elbo_change"] < tol,
        }
    return {"tight_heldout": tight, "tight_pass": passes[-1]["pass"],
            "tight_elbo_change": passes[-1]["elbo_change"], "by_tol": out}


def old_rule_stop(passes, rel_tol):
    """Where the previous rule, the relative ELBO change |L_t - L_{t-1}| / |L_t| < rel_tol,
    stopped the same run, and the relative gap of its held-out score to the tight one."""
    tight = passes[-1]["heldout"]
    stop = passes[-1]
    for prev, cur in zip(passes, passes[1:], strict=False):
        if abs(cur["elbo"] - prev["elbo"]) / max(abs(cur["elbo"]), abs(prev["elbo"])) < rel_tol:
            stop = cur
            break
    return {"rel_tol": rel_tol, "pass": stop["pass"], "elapsed": stop["elapsed"],
            "heldout": stop["heldout"], "rel_gap": (stop["heldout"] - tight) / abs(tight)}


def _tol_ok(record, tol, target, margin, ref=None):
    """The stop at ``tol`` is within ``margin * target`` (relative) of the record's own tight
    score and, if ``ref`` is given, at most ``target`` below that reference score."""
    st = record["stops"]["by_tol"][repr(tol)]
    ok = abs(st["rel_gap"]) <= margin * target
    if ref is not None:
        ok &= (ref - st["heldout"]) <= target * abs(ref)
    return ok


def choose_tol(records, target=TARGET, margin=0.5, refs=None):
    """Largest tol whose stopping pass is within ``margin * target`` of the tight score on
    every (tuning) record -- half the allowed gap, the other half kept for the reporting
    splits -- and, with ``refs`` ({data: score}), not more than ``target`` below the
    reference score of its data set."""
    for tol in TOLS:  # decreasing
        if all(_tol_ok(r, tol, target, margin, None if refs is None else refs[r["data"]])
               for r in records):
            return tol
    return None


def choose_gmm(runs, target=TARGET):
    """Defaults of the mixture from the tuning runs: for every (algorithm, L) its largest tol
    that passes :func:`choose_tol` against the tight score of exact dense coordinate ascent
    (batch, L = K) of each data set, then the configuration with the least total time to its
    stop. Returns the choice, the per-configuration table and the reporting rows."""
    tuning = [r for r in runs if r["split"] == "tuning"]
    refs = {r["data"]: r["stops"]["tight_heldout"] for r in tuning
            if r["algorithm"] == "batch" and r["L"] == "K"}
    table = {}
    for key in sorted({(r["algorithm"], str(r["L"])) for r in tuning}):
        recs = [r for r in tuning if (r["algorithm"], str(r["L"])) == key]
        tol = choose_tol(recs, target, refs=refs)
        entry = {"tol": tol, "time": None, "per_data": {}}
        if tol is not None:
            entry["time"] = sum(r["stops"]["by_tol"][repr(tol)]["elapsed"] for r in recs)
            for r in recs:
                st = r["stops"]["by_tol"][repr(tol)]
                entry["per_data"][r["data"]] = {
                    "pass": st["pass"], "time": st["elapsed"], "heldout": st["heldout"],
                    "rel_gap_own_tight": st["rel_gap"],
                    "rel_gap_dense_batch_tight": (st["heldout"] - refs[r["data"]])
                    / abs(refs[r["data"]]),
                }
        table[f"{key[0]} L={key[1]}"] = entry
    ok = {k: v for k, v in table.items() if v["tol"] is not None}
    choice = min(ok, key=lambda k: ok[k]["time"]) if ok else None
    reporting = []
    if choice is not None:
        alg, L = choice.split(" L=")
        tol = table[choice]["tol"]
        rep_refs = {r["data"]: r["stops"]["tight_heldout"] for r in runs
                    if r["split"] != "tuning" and r["algorithm"] == "batch" and r["L"] == "K"}
        for r in runs:
            if r["split"] == "tuning" or r["algorithm"] != alg or str(r["L"]) != L:
                continue
            st = r["stops"]["by_tol"][repr(tol)]
            reporting.append({
                "data": r["data"], "split": r["split"], "algorithm": alg, "L": L,
                **{k: st[k] for k in ("pass", "elapsed", "heldout", "rel_gap", "reached")},
                "previous_rule": old_rule_stop(r["passes"], 1e-3),
                "tight_heldout": r["stops"]["tight_heldout"],
                "rel_gap_dense_batch_tight": (st["heldout"] - rep_refs[r["data"]])
                / abs(rep_refs[r["data"]]),
            })
    return {"configuration": choice, "tol": table[choice]["tol"] if choice else None,
            "tuning_table": table, "reporting": reporting}


def choose_lda(runs, target=TARGET):
    tuning = [r for r in runs if r["split"] == "tuning"]
    tol = choose_tol(tuning, target)
    return {
        "tol": tol,
        "tuning": [{"data": r["data"], **r["stops"]["by_tol"][repr(tol)]} for r in tuning],
        "reporting": [
            {"data": r["data"], "split": r["split"],
             **{k: r["stops"]["by_tol"][repr(tol)][k] for k in ("pass", "elapsed", "heldout",
                                                             "rel_gap", "reached")},
             "tight_heldout": r["stops"]["tight_heldout"], "tight_pass": r["stops"]["tight_pass"],
             "previous_rule": old_rule_stop(r["passes"], 1e-4)}
            for r in runs if r["split"] != "tuning"
        ],
    }


# ---------------------------------------------------------------------------------------


def gmm_part(args, results):
    datasets = [("patches", patches_splits(args.quick), 50 if args.quick else 100, True),
                ("20news-svd", news_svd_splits(args.quick), 20, False)]
    passes = {"patches": 30 if args.quick else 150, "20news-svd": 60 if args.quick else 200}
    Ls = [1, 2, 4, 8, None]
    runs = []
    for name, splits, K, zero_mean in datasets:
        for split, X, X_ho in splits:
            for algorithm in ("batch", "memoized"):
                for L in Ls:
                    t0 = time.perf_counter()
                    p = run_gmm(X, X_ho, K, L, algorithm, passes[name], args.threads, zero_mean)
                    rec = {"data": name, "split": split, "K": K, "L": "K" if L is None else L,
                           "algorithm": algorithm, "n_fit": X.shape[0],
                           "n_heldout": X_ho.shape[0], "passes": p, "stops": stops(p)}
                    runs.append(rec)
                    print(f"gmm {name:10s} {split:14s} {algorithm:8s} L={rec['L']!s:>2s} "
                          f"last heldout {p[-1]['heldout']:.4f} change {p[-1]['elbo_change']:.2e}"
                          f"  ({time.perf_counter() - t0:.0f}s)", flush=True)
    results["gmm_runs"] = runs
    results["gmm_choice"] = choose_gmm(runs)
    c = results["gmm_choice"]
    print(f"gmm: configuration {c['configuration']}, tol {c['tol']}", flush=True)


def lda_part(args, results):
    datasets = [("kos", kos_splits(args.quick), 20, 20 if args.quick else 100),
                ("20news", news_splits(args.quick), 20 if args.quick else 100,
                 15 if args.quick else 60)]
    runs = []
    for name, splits, K, passes in datasets:
        for split, X, X_ho in splits:
            t0 = time.perf_counter()
            p = run_lda(X, X_ho, K, passes, args.threads)
            rec = {"data": name, "split": split, "K": K, "n_fit": X.shape[0],
                   "n_heldout": X_ho.shape[0], "passes": p, "stops": stops(p),
                   "params": "SparseLDA defaults (memoized, L = 8, n_batches = 10)"}
            runs.append(rec)
            print(f"lda {name:7s} {split:14s} last heldout {p[-1]['heldout']:.4f} change "
                  f"{p[-1]['elbo_change']:.2e}  ({time.perf_counter() - t0:.0f}s)", flush=True)
    results["lda_runs"] = runs
    results["lda_choice"] = choose_lda(runs)
    print(f"lda: tol {results['lda_choice']['tol']}", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=("gmm", "lda", "all"), default="all")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=str(RESULTS / "defaults.json"))
    ap.add_argument("--analyze", metavar="JSON", default=None,
                    help="only recompute the choices from the runs stored in JSON")
    args = ap.parse_args(argv)
    if args.analyze:
        import json

        path = Path(args.analyze)
        results = json.loads(path.read_text())
        results["gmm_choice"] = choose_gmm(results["gmm_runs"])
        results["lda_choice"] = choose_lda(results["lda_runs"])
        write_json(path, results)
        print(json.dumps({k: results[k] for k in ("gmm_choice", "lda_choice")}, indent=1))
        return
    out = Path(args.out)
    results = {}
    if out.exists() and args.part != "all":
        import json

        results = json.loads(out.read_text())
    results["config"] = {"tols": TOLS, "target_rel_gap": TARGET, "threads": args.threads,
                         "quick": args.quick}
    results["environment"] = environment()
    t0 = time.perf_counter()
    with threadpool_limits(limits=args.threads, user_api="blas"):
        if args.part in ("gmm", "all"):
            gmm_part(args, results)
        if args.part in ("lda", "all"):
            lda_part(args, results)
    results[f"seconds_{args.part}"] = time.perf_counter() - t0
    write_json(out, results)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
