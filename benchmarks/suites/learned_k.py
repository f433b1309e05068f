# SPDX-License-Identifier: BSD-3-Clause
"""Learned K against a grid: HDPTopicModel against SparseLDA fitted at every K of a grid."""

from .._common import topic_corpus
from .._topics import Clock, doc_topic_prior, fit_ours, fmt, heldout, mean, median, signed

NAME = "learned_k"
TITLE = "Learned K against a grid"
MEASURES = """\
Whether HDPTopicModel learns a number of topics that scores as well as the best fixed K,
whatever truncation it starts from, and at what cost: the HDP started from several
truncations against SparseLDA (its defaults) fitted at every K of a grid, plus one SparseLDA
fit at the K each HDP fit learned."""
METHOD = """\
- HDPTopicModel with its defaults (topic-word prior 0.1) and `max_components` = the start;
  SparseLDA with its defaults, alpha = 0.5 / K, topic-word prior 0.1. One thread, process CPU
  seconds, initialisation inside the clock.
- Score: document completion on the report documents; the HDP is scored with its own
  document prior (`doc_topic_prior_`), SparseLDA with alpha = 0.5 / K.
- "CPU vs SparseLDA at learned K" divides the HDP fit's CPU time by that of one SparseLDA fit
  at the HDP's learned K (same seed).
- "Objective": the HDP's training objective per training token (the memoized ELBO of its
  last pass, on which its moves are accepted); "births": birth proposals tried, accepted."""

FULL = {
    "kos": dict(corpus="kos", starts=[25, 100, 400], grid=[25, 50, 100, 200, 400, 800],
                seeds=[0, 1, 2]),
    "20newsgroups": dict(corpus="20newsgroups", starts=[25, 100, 400],
                         grid=[25, 50, 100, 200, 400, 800], seeds=[0, 1, 2]),
}
QUICK = {"kos": dict(corpus="kos", starts=[10, 30], grid=[10, 20], seeds=[0],
                     max_iter=5)}
CORPORA = {"20newsgroups": "20 Newsgroups", "imdb": "IMDB", "kos": "KOS"}


def run(part, params, log):
    import warnings

    from sparseclust.metrics import document_completion_score
    from sparseclust.topics import HDPTopicModel

    data = topic_corpus(params["corpus"])
    X = data["fit"]
    extra = {"max_iter": params["max_iter"]} if "max_iter" in params else {}
    records = []

    def lda(K, seed, kind):
        model, clock = fit_ours("sparselda", X, K, seed, extra)
        rec = dict(method="sparselda", kind=kind, K=K, seed=seed, cpu_s=clock.cpu,
                   report=heldout(model.topic_word_distribution_, data["report"],
                                  doc_topic_prior(K)),
                   validation=heldout(model.topic_word_distribution_, data["validation"],
                                      doc_topic_prior(K)),
                   report_elbo=float(model.score(data["report"])))
        log(f"  SparseLDA K={K} seed={seed} cpu={clock.cpu:.1f}s report={rec['report']:.4f}")
        records.append(rec)
        return rec

    for seed in params["seeds"]:
        for K in params["grid"]:
            lda(K, seed, "grid")
        for start in params["starts"]:
            model = HDPTopicModel(max_components=start, random_state=seed, n_threads=1, **extra)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with Clock() as clock:
                    model.fit(X)
            score = {s: float(document_completion_score(model, data[s], random_state=0,
                                                        n_threads=1))
                     for s in ("report", "validation")}
            trace = model.trace_
            rec = dict(method="hdp", start=start, seed=seed, K=int(model.n_components_),
                       cpu_s=clock.cpu, n_iter=int(model.n_iter_), **score,
                       objective=float(trace[-1]["elbo"]) / data["n_tokens"],
                       births_tried=int(sum(r["births_tried"] for r in trace)),
                       births_accepted=int(sum(r["births_accepted"] for r in trace)))
            log(f"  HDP start={start} seed={seed} K={rec['K']} cpu={clock.cpu:.1f}s "
                f"report={rec['report']:.4f}")
            at_k = lda(rec["K"], seed, "at_learned_K")
            rec["cpu_ratio_to_sparselda_at_K"] = clock.cpu / at_k["cpu_s"]
            records.append(rec)
    return {"data": data["description"], "n_tokens": data["n_tokens"], "records": records}


def _grid_means(result, field):
    """The SparseLDA grid's mean ``field`` over seeds by K, and the K it ranks first ({} and
    None when the file has no grid, or predates the field)."""
    grid = [r for r in result["records"] if r["method"] == "sparselda" and r["kind"] == "grid"]
    if not grid or any(field not in r for r in grid):
        return {}, None
    by_k = {}
    for r in grid:
        by_k.setdefault(r["K"], []).append(r[field])
    scores = {K: mean(v) for K, v in by_k.items()}
    return scores, max(scores, key=scores.get)


def _best_grid(result):
    return _grid_means(result, "report")


def _elbo_line(result):
    """The grid's mean ``score`` (evidence lower bound per token) on the report documents by
    K, and the K it ranks first ('' for a results file that predates it)."""
    scores, best = _grid_means(result, "report_elbo")
    if not scores:
        return ""
    text = ", ".join(f"{K}: {fmt(v, 4)}" for K, v in sorted(scores.items()))
    return (f" Its `score` (evidence lower bound per token) on the same documents: {text}; "
            f"best K = {best}.")


def _objective(rs):
    """The mean training objective per token of the fits ``rs`` ('–' for a results file
    that predates it)."""
    if any("objective" not in r for r in rs):
        return "–"
    return fmt(mean([r["objective"] for r in rs]), 4)


def _births(rs):
    if any("births_tried" not in r for r in rs):
        return "–"
    return f"{sum(r['births_tried'] for r in rs)}, {sum(r['births_accepted'] for r in rs)}"


def table(results):
    lines = []
    for result in results:
        scores, best = _best_grid(result)
        grid = ", ".join(f"{K}: {fmt(s, 4)}" for K, s in sorted(scores.items()))
        lines += [f"**{CORPORA.get(result['part'], result['part'])}** (commit "
                  f"`{result['commit']}`): {result['data']}.", "",
                  f"SparseLDA grid, mean report score over seeds (K: score): {grid}; "
                  f"best K = {best}.{_elbo_line(result)}", "",
                  "| HDP start | learned K | report score | Δ vs best grid K | objective | "
                  "births tried, accepted | CPU s | CPU vs SparseLDA at learned K | passes | "
                  "seeds |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        hdp = [r for r in result["records"] if r["method"] == "hdp"]
        for start in sorted({r["start"] for r in hdp}):
            rs = [r for r in hdp if r["start"] == start]
            ks = sorted(r["K"] for r in rs)
            score = mean([r["report"] for r in rs])
            lines.append(
                f"| {start} | {', '.join(map(str, ks))} | {fmt(score, 4)} "
                f"| {signed(score - scores[best], 4) if best else '–'} | "
                f"{_objective(rs)} | {_births(rs)} | "
                f"{fmt(median([r['cpu_s'] for r in rs]), 1)} | "
                f"{fmt(median([r['cpu_ratio_to_sparselda_at_K'] for r in rs]), 2)} | "
                f"{fmt(median([r['n_iter'] for r in rs]), 0)} | {len(rs)} |")
        lines.append("")
    return "\n".join(lines)


def headline(results):
    rows = []
    for result in results:
        if result["part"] not in FULL:
            continue
        scores, best = _best_grid(result)
        hdp = [r for r in result["records"] if r["method"] == "hdp"]
        if not hdp or best is None:
            continue
        ks = [r["K"] for r in hdp]
        rows.append(dict(
            ours=f"HDPTopicModel, starts {min(r['start'] for r in hdp)}–"
                 f"{max(r['start'] for r in hdp)} (learned K {min(ks)}–{max(ks)})",
            peer=f"best SparseLDA of a K grid (K = {best})", data=CORPORA[result["part"]],
            metric="held-out document completion (nats/token)",
            figure=fmt(mean([r["report"] for r in hdp]), 3),
            ratio=f"Δ {mean([r['report'] for r in hdp]) - scores[best]:+.3f}"))
    return rows
