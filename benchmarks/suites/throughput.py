# SPDX-License-Identifier: BSD-3-Clause
"""Sampler throughput against the peers: tokens per CPU second, sweep by sweep."""

import time

from .._common import topic_corpus
from .._topics import Clock, Tomotopy, doc_topic_prior, fit_ours, fmt, heldout, median

NAME = "throughput"
TITLE = "Sampler throughput against the peers"
MEASURES = """\
How fast StochasticEMLDA's sampler sweeps a corpus against tomotopy's collapsed Gibbs
sampler, sweep by sweep from the first (which includes each model's initialisation), and
the held-out score both reach after the same number of sweeps."""
METHOD = """\
- Priors alpha = 0.5 / K, topic-word prior 0.1, tomotopy's optimisation off; one thread
  (`n_threads=1`, tomotopy `workers=1`); process CPU seconds per sweep, read after each sweep
  (StochasticEMLDA's `callback`, tomotopy's `train(1)`).
- Tokens per CPU second: the fitted tokens divided by a sweep's CPU time; the table gives the
  median over sweeps 2 to the last, and the first sweep's cost relative to that median.
- The score is document completion on the report documents after the last sweep, the same
  alpha for both."""

FULL = {
    "20newsgroups": dict(corpus="20newsgroups", K=[100, 1000], sweeps=10, seeds=[0]),
    "imdb": dict(corpus="imdb", K=[100, 1000], sweeps=10, seeds=[0]),
    "imdb-films": dict(corpus="imdb-films", K=[100, 1000], sweeps=10, seeds=[0]),
}
QUICK = {"kos": dict(corpus="kos", K=[20], sweeps=3, seeds=[0])}
CORPORA = {"20newsgroups": "20 Newsgroups", "imdb": "IMDB", "kos": "KOS",
           "imdb-films": "IMDB films (long documents)"}


def _ours(X, K, seed, sweeps):
    marks = []

    def mark(info):
        marks.append(time.process_time())
        return False

    model, clock = fit_ours("sem", X, K, seed, dict(max_iter=sweeps, tol=0.0), callback=mark)
    starts = [clock.cpu0] + marks[:-1]
    return model.topic_word_distribution_, [b - a for a, b in zip(starts, marks, strict=True)]


def _tomotopy(X, K, seed, sweeps):
    runner = Tomotopy(X, K, seed)
    cpu = []
    with Clock():
        c0 = time.process_time()
        runner.start()
        for _ in range(sweeps):
            runner.train(1)
            cpu.append(time.process_time() - c0)
            c0 = time.process_time()
    return runner.topic_word(), cpu


def run(part, params, log):
    data = topic_corpus(params["corpus"])
    X, n_tokens = data["fit"], data["n_tokens"]
    records = []
    for K in params["K"]:
        for seed in params["seeds"]:
            for method, fn in (("sem", _ours), ("tomotopy", _tomotopy)):
                phi, sweep_cpu = fn(X, K, seed, params["sweeps"])
                steady = median(sweep_cpu[1:]) or sweep_cpu[0]
                rec = dict(method=method, K=K, seed=seed, sweep_cpu_s=sweep_cpu,
                           tokens_per_cpu_s=n_tokens / steady,
                           first_sweep_ratio=sweep_cpu[0] / steady,
                           report=heldout(phi, data["report"], doc_topic_prior(K)))
                log(f"  K={K} seed={seed} {method:9s} {rec['tokens_per_cpu_s'] / 1e6:.3f}M "
                    f"tokens/CPU s, first sweep x{rec['first_sweep_ratio']:.2f}, "
                    f"report={rec['report']:.4f}")
                records.append(rec)
    return {"data": data["description"], "n_tokens": n_tokens,
            "n_documents": int(X.shape[0]), "n_words": int(X.shape[1]), "records": records}


def _pairs(result):
    recs = result["records"]
    for K in sorted({r["K"] for r in recs}):
        ours = [r for r in recs if r["K"] == K and r["method"] == "sem"]
        peer = {r["seed"]: r for r in recs if r["K"] == K and r["method"] == "tomotopy"}
        yield K, [(r, peer[r["seed"]]) for r in ours if r["seed"] in peer]


def table(results):
    lines = []
    for result in results:
        lines += [f"**{CORPORA.get(result['part'], result['part'])}** (commit "
                  f"`{result['commit']}`, {result['parameters']['sweeps']} sweeps): "
                  f"{result['data']}; {result['n_tokens']:,} tokens, "
                  f"mean {result['n_tokens'] / result['n_documents']:.0f} per document.", "",
                  "| K | StochasticEMLDA M tokens/CPU s | tomotopy | ratio | first sweep "
                  "(×steady): ours, tomotopy | report score: ours, tomotopy | seeds |",
                  "|---|---|---|---|---|---|---|"]
        for K, pairs in _pairs(result):
            if not pairs:
                continue
            ours_r = median([a["tokens_per_cpu_s"] for a, _ in pairs])
            ratio = median([a["tokens_per_cpu_s"] / b["tokens_per_cpu_s"] for a, b in pairs])
            peer_r = median([b["tokens_per_cpu_s"] for _, b in pairs])
            lines.append(
                f"| {K} | {ours_r / 1e6:.2f} | {peer_r / 1e6:.2f} | "
                f"{ratio:.2f} | "
                f"{median([a['first_sweep_ratio'] for a, _ in pairs]):.2f}, "
                f"{median([b['first_sweep_ratio'] for _, b in pairs]):.2f} | "
                f"{fmt(median([a['report'] for a, _ in pairs]), 4)}, "
                f"{fmt(median([b['report'] for _, b in pairs]), 4)} | {len(pairs)} |")
        lines.append("")
    return "\n".join(lines)


def headline(results):
    rows = []
    for result in results:
        if result["part"] not in FULL:
            continue
        for K, pairs in _pairs(result):
            if not pairs:
                continue
            ratio = median([a["tokens_per_cpu_s"] / b["tokens_per_cpu_s"] for a, b in pairs])
            rows.append(dict(
                ours=f"StochasticEMLDA sampler, K = {K}", peer="tomotopy LDAModel",
                data=CORPORA[result["part"]], metric="tokens per CPU second, sweeps 2+",
                figure=f"{median([a['tokens_per_cpu_s'] for a, _ in pairs]) / 1e6:.2f} M",
                ratio=f"× {ratio:.2f}"))
    return rows
