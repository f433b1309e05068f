# SPDX-License-Identifier: BSD-3-Clause
"""Topic-model quality against the peers: held-out document completion and CPU time."""

from .._common import topic_corpus
from .._topics import (
    doc_topic_prior,
    fit_gensim,
    fit_ours,
    fit_sklearn,
    fit_tomotopy,
    fmt,
    heldout,
    mean,
    median,
    signed,
)

NAME = "quality"
TITLE = "Topic-model quality against the peers"
MEASURES = """\
How good a model each method's **defaults** give, and at what CPU cost: SparseLDA with its
defaults (the Gibbs local step, memoized training, 25 passes), the same run four times longer
(100 passes), and with `local_step='variational'` (the L-sparse variational step),
StochasticEMLDA with its defaults (200 sweeps) and four times longer (800 sweeps), against
tomotopy's collapsed Gibbs sampler at 200 sweeps, gensim's online variational Bayes and
scikit-learn's batch variational Bayes. The score is held-out document completion (nats per
held-out token, higher is better) on documents no method saw."""
METHOD = """\
- Priors: alpha = 0.5 / K per topic, topic-word prior 0.1, for every method (tomotopy's
  hyperparameter optimisation off).
- One thread everywhere (BLAS included); process CPU seconds, initialisation inside the clock;
  converting the counts to a peer's input format is outside it.
- Ours run with their defaults apart from the priors and `n_threads=1`; tomotopy runs 200
  sweeps; gensim runs `passes` passes with its default chunks; scikit-learn runs its default
  batch schedule.
- Score: `sparseclust.metrics.document_completion_score` on the report documents (20% of each
  document's tokens held out, split seed 0, the same alpha for every method). The validation
  documents' score is stored too: defaults are chosen on those, never on the report set.
- Seeds: every method runs once per seed; the table shows the mean score and the median CPU
  time over seeds, the Δ and ratio columns compare with tomotopy on the same seeds."""

_PEERS = ["tomotopy", "gensim", "sklearn"]
_OURS = ["sparselda", "sparselda-4x", "sparselda-variational", "sem", "sem-4x"]

FULL = {
    "20newsgroups": dict(corpus="20newsgroups", K=[100], seeds=[0, 1],
                         methods=_OURS + _PEERS, tomotopy_sweeps=200, gensim_passes=5,
                         sklearn_max_iter=10),
    "20newsgroups-k400": dict(corpus="20newsgroups", K=[400], seeds=[0],
                              methods=_OURS + ["tomotopy"], tomotopy_sweeps=200),
    "imdb": dict(corpus="imdb", K=[100], seeds=[0],
                 methods=_OURS + ["tomotopy"], tomotopy_sweeps=200),
    "imdb-k400": dict(corpus="imdb", K=[400], seeds=[0],
                      methods=_OURS + ["tomotopy"], tomotopy_sweeps=200),
    "imdb-films": dict(corpus="imdb-films", K=[100], seeds=[0],
                       methods=["sparselda", "sparselda-4x", "sem", "sem-4x", "tomotopy"],
                       tomotopy_sweeps=200),
    "kos": dict(corpus="kos", K=[50, 100], seeds=[0, 1], methods=_OURS + _PEERS,
                tomotopy_sweeps=200, gensim_passes=5, sklearn_max_iter=10),
}
QUICK = {
    "kos": dict(corpus="kos", K=[20], seeds=[0], methods=_OURS + _PEERS,
                ours_params={"sparselda": {"max_iter": 5}, "sparselda-4x": {"max_iter": 20},
                             "sparselda-variational": {"max_iter": 5}, "sem": {"max_iter": 20},
                             "sem-4x": {"max_iter": 80}},
                tomotopy_sweeps=20, gensim_passes=1, sklearn_max_iter=2),
}

LABELS = {
    "sparselda": "SparseLDA (defaults)",
    "sparselda-4x": "SparseLDA (defaults, 4x the passes)",
    "sparselda-variational": "SparseLDA, local_step='variational'",
    "sparselda-gibbs": "SparseLDA, local_step='gibbs'",
    "sem": "StochasticEMLDA (defaults)",
    "sem-4x": "StochasticEMLDA (defaults, 4x the sweeps)",
    "tomotopy": "tomotopy LDAModel",
    "gensim": "gensim LdaModel",
    "sklearn": "scikit-learn LatentDirichletAllocation",
}
CORPORA = {"20newsgroups": "20 Newsgroups", "20newsgroups-k400": "20 Newsgroups, K = 400",
           "imdb": "IMDB", "imdb-k400": "IMDB, K = 400", "kos": "KOS",
           "imdb-films": "IMDB films (long documents)"}


def _default_passes():
    """{'<method>-4x': the default number of passes (sweeps) of <method>}."""
    from sparseclust.topics._sem import BATCH_MAX_ITER
    from sparseclust.topics._sparse_lda import GIBBS_MAX_ITER

    return {"sparselda-4x": GIBBS_MAX_ITER, "sem-4x": BATCH_MAX_ITER}


def _fit(method, X, K, seed, params):
    """``(topic_word, clock, n_iter)`` of one method."""
    longer = _default_passes()
    if method in longer:
        base = method.removesuffix("-4x")
        extra = params.get("ours_params", {}).get(method) or {"max_iter": 4 * longer[method]}
        model, clock = fit_ours(base, X, K, seed, extra)
        return model.topic_word_distribution_, clock, int(model.n_iter_)
    if method in _OURS:
        model, clock = fit_ours(method, X, K, seed, params.get("ours_params", {}).get(method))
        return model.topic_word_distribution_, clock, int(model.n_iter_)
    if method == "tomotopy":
        phi, clock = fit_tomotopy(X, K, seed, params["tomotopy_sweeps"])
        return phi, clock, params["tomotopy_sweeps"]
    if method == "gensim":
        phi, clock = fit_gensim(X, K, seed, params["gensim_passes"])
        return phi, clock, params["gensim_passes"]
    if method == "sklearn":
        phi, clock = fit_sklearn(X, K, seed, params["sklearn_max_iter"])
        return phi, clock, params["sklearn_max_iter"]
    raise ValueError(method)


def run(part, params, log):
    data = topic_corpus(params["corpus"])
    X = data["fit"]
    records = []
    for K in params["K"]:
        for seed in params["seeds"]:
            for method in params["methods"]:
                if K > params.get("peer_max_K", {}).get(method, K):
                    continue
                phi, clock, n_iter = _fit(method, X, K, seed, params)
                alpha = doc_topic_prior(K)
                rec = dict(method=method, K=K, seed=seed, cpu_s=round(clock.cpu, 3),
                           wall_s=round(clock.wall, 3), n_iter=n_iter,
                           validation=heldout(phi, data["validation"], alpha),
                           report=heldout(phi, data["report"], alpha))
                log(f"  K={K} seed={seed} {method:16s} cpu={rec['cpu_s']:9.2f}s "
                    f"report={rec['report']:.4f} validation={rec['validation']:.4f}")
                records.append(rec)
    return {"data": data["description"], "n_documents": int(X.shape[0]),
            "n_words": int(X.shape[1]), "n_tokens": data["n_tokens"], "records": records}


def _summaries(result):
    """{(K, method): (mean report, median cpu, mean validation, n seeds, Δ, ratio)}."""
    out = {}
    recs = result["records"]
    for K in sorted({r["K"] for r in recs}):
        ref = {r["seed"]: r for r in recs if r["K"] == K and r["method"] == "tomotopy"}
        for method in dict.fromkeys(r["method"] for r in recs if r["K"] == K):
            rs = [r for r in recs if r["K"] == K and r["method"] == method]
            paired = [(r, ref[r["seed"]]) for r in rs if r["seed"] in ref]
            delta = mean([r["report"] - t["report"] for r, t in paired]) if paired else None
            ratio = median([r["cpu_s"] / t["cpu_s"] for r, t in paired]) if paired else None
            out[K, method] = dict(report=mean([r["report"] for r in rs]),
                                  cpu=median([r["cpu_s"] for r in rs]),
                                  validation=mean([r["validation"] for r in rs]),
                                  n_iter=median([r["n_iter"] for r in rs]),
                                  seeds=len(rs), delta=delta, ratio=ratio)
    return out


def table(results):
    lines, shown = [], None
    for result in sorted(results, key=lambda r: list(FULL).index(r["part"])
                         if r["part"] in FULL else 99):
        # parts on the same documents (another K) describe them once
        data = (f"{result['data']}; {result['n_tokens']:,} fitted tokens, "
                f"{result['n_words']:,} words")
        lines += [f"**{CORPORA.get(result['part'], result['part'])}** "
                  f"(`{result['part']}`, commit `{result['commit']}`): "
                  f"{'the documents above' if data == shown else data}.", "",
                  "| K | method | report score | Δ vs tomotopy | CPU s | CPU ratio vs tomotopy "
                  "| iterations | seeds |",
                  "|---|---|---|---|---|---|---|---|"]
        for (K, method), s in _summaries(result).items():
            lines.append(f"| {K} | {LABELS.get(method, method)} | {fmt(s['report'], 4)} | "
                         f"{signed(s['delta'], 4)} | {fmt(s['cpu'], 1)} | {fmt(s['ratio'], 2)} | "
                         f"{fmt(s['n_iter'], 0)} | {s['seeds']} |")
        lines.append("")
        shown = data
    return "\n".join(lines)


def headline(results):
    rows = []
    for result in results:
        if result["part"] not in ("20newsgroups", "20newsgroups-k400", "imdb", "imdb-k400"):
            continue
        summ = _summaries(result)
        for (K, method), s in summ.items():
            # the defaults only: the other methods are in the corpus's table
            if method != "sparselda" or s["delta"] is None:
                continue
            rows.append(dict(
                ours=f"{LABELS[method]}, K = {K}",
                peer="tomotopy, 200 sweeps",
                data=CORPORA[result["part"]].split(",")[0],
                metric="held-out document completion (nats/token); CPU s",
                figure=f"{fmt(s['report'], 3)}; {fmt(s['cpu'], 0)} s",
                ratio=f"Δ {s['delta']:+.3f}; CPU × {fmt(s['ratio'], 2)}"))
    return rows
