# SPDX-License-Identifier: BSD-3-Clause
"""Sampler throughput against the peers: tokens per CPU second, sweep by sweep."""

import time
import warnings

from .._common import topic_corpus
from .._topics import (
    TOPIC_WORD_PRIOR,
    Clock,
    Tomotopy,
    doc_topic_prior,
    fmt,
    heldout,
    mean,
    median,
    ours,
)

NAME = "throughput"
TITLE = "Sampler throughput against the peers"
MEASURES = """\
How fast StochasticEMLDA's samplers sweep a corpus against tomotopy's collapsed Gibbs
sampler, sweep by sweep from the first (which includes each model's initialisation), and
the held-out score each reaches against CPU time, from the first sweep on: the default exact
sampler (`sampler='auto'`) and the Metropolis-Hastings one (`sampler='metropolis'`), on
short documents and on long ones."""
METHOD = """\
- Priors alpha = 0.5 / K, topic-word prior 0.1, tomotopy's optimisation off; one thread
  (`n_threads=1`, tomotopy `workers=1`); process CPU seconds per sweep, read after each sweep
  (StochasticEMLDA's `callback`, tomotopy's `train(1)`), the checkpoints' scoring outside
  the clock.
- Tokens per CPU second: the fitted tokens divided by a sweep's CPU time; the table gives the
  median over sweeps 2 to the last, and the first sweep's cost relative to that median.
- Checkpoints after sweeps 1, 2, 5 and the last: document completion on the report documents
  (the same alpha for both) of the topics a fit stopped there would keep (for ours
  `topic_estimate`, the Rao-Blackwellized counts), against the CPU seconds so far."""

FULL = {
    "20newsgroups": dict(corpus="20newsgroups", K=[100, 1000], sweeps=10, seeds=[0]),
    "imdb": dict(corpus="imdb", K=[100, 1000], sweeps=10, seeds=[0]),
    "imdb-films": dict(corpus="imdb-films", K=[100, 1000], sweeps=10, seeds=[0]),
}
QUICK = {"kos": dict(corpus="kos", K=[20], sweeps=3, seeds=[0])}
CORPORA = {"20newsgroups": "20 Newsgroups", "imdb": "IMDB", "kos": "KOS",
           "imdb-films": "IMDB films (long documents)"}
#: our methods: record name -> StochasticEMLDA parameters
OURS = {"sem": {}, "sem-metropolis": dict(sampler="metropolis")}
NAMES = {"sem": "StochasticEMLDA", "sem-metropolis": "StochasticEMLDA metropolis",
         "tomotopy": "tomotopy"}


def _checkpoints(sweeps):
    return sorted({1, 2, 5, sweeps} & set(range(1, sweeps + 1)))


def _sweeps_ours(method, X, K, seed, sweeps, score):
    """Per-sweep CPU seconds and checkpoints [(sweep, CPU so far, score)] of one of ours."""
    checks = _checkpoints(sweeps)
    state = dict(resume=None, cpu=[], points=[])

    def mark(info):
        now = time.process_time()
        state["cpu"].append(now - state["resume"])
        if info["sweep"] in checks:
            W = info["topic_estimate"]()
            phi = W.T + TOPIC_WORD_PRIOR
            state["points"].append((info["sweep"], sum(state["cpu"]),
                                    score(phi / phi.sum(axis=1, keepdims=True))))
        state["resume"] = time.process_time()
        return False

    model = ours(method.split("-")[0], K, seed, max_iter=sweeps, tol=0.0, **OURS[method])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Clock() as clock:
            state["resume"] = clock.cpu0
            model.fit(X, callback=mark)
    return state["cpu"], state["points"]


def _tomotopy(X, K, seed, sweeps, score):
    checks = _checkpoints(sweeps)
    runner = Tomotopy(X, K, seed)
    cpu, points = [], []
    with Clock():
        c0 = time.process_time()
        runner.start()
        for sweep in range(1, sweeps + 1):
            runner.train(1)
            cpu.append(time.process_time() - c0)
            if sweep in checks:
                points.append((sweep, sum(cpu), score(runner.topic_word())))
            c0 = time.process_time()
    return cpu, points


def run(part, params, log):
    data = topic_corpus(params["corpus"])
    X, n_tokens = data["fit"], data["n_tokens"]
    records = []
    for K in params["K"]:
        def score(phi, K=K):
            return heldout(phi, data["report"], doc_topic_prior(K))

        for seed in params["seeds"]:
            for method in (*OURS, "tomotopy"):
                if method == "tomotopy":
                    sweep_cpu, points = _tomotopy(X, K, seed, params["sweeps"], score)
                else:
                    sweep_cpu, points = _sweeps_ours(method, X, K, seed, params["sweeps"], score)
                steady = median(sweep_cpu[1:]) or sweep_cpu[0]
                rec = dict(method=method, K=K, seed=seed, sweep_cpu_s=sweep_cpu,
                           tokens_per_cpu_s=n_tokens / steady,
                           first_sweep_ratio=sweep_cpu[0] / steady,
                           checkpoints=[dict(sweep=a, cpu_s=b, report=c) for a, b, c in points],
                           report=points[-1][2])
                log(f"  K={K} seed={seed} {method:15s} {rec['tokens_per_cpu_s'] / 1e6:.3f}M "
                    f"tokens/CPU s, first sweep x{rec['first_sweep_ratio']:.2f}, "
                    f"report={rec['report']:.4f}")
                records.append(rec)
    return {"data": data["description"], "n_tokens": n_tokens,
            "n_documents": int(X.shape[0]), "n_words": int(X.shape[1]), "records": records}


def _pairs(result, method="sem"):
    recs = result["records"]
    for K in sorted({r["K"] for r in recs}):
        ours_r = [r for r in recs if r["K"] == K and r["method"] == method]
        peer = {r["seed"]: r for r in recs if r["K"] == K and r["method"] == "tomotopy"}
        yield K, [(r, peer[r["seed"]]) for r in ours_r if r["seed"] in peer]


def _curve(recs):
    """'sweep: CPU s, score' at every checkpoint the records (seeds) share, each the mean
    over them."""
    by = [{c["sweep"]: c for c in r["checkpoints"]} for r in recs]
    sweeps = sorted(set.intersection(*(set(b) for b in by)))
    return "; ".join(f"{w}: {mean([b[w]['cpu_s'] for b in by]):.1f} s, "
                     f"{fmt(mean([b[w]['report'] for b in by]), 4)}" for w in sweeps)


def table(results):
    lines = []
    for result in results:
        methods = [m for m in OURS if any(r["method"] == m for r in result["records"])]
        lines += [f"**{CORPORA.get(result['part'], result['part'])}** (commit "
                  f"`{result['commit']}`, {result['parameters']['sweeps']} sweeps): "
                  f"{result['data']}; {result['n_tokens']:,} tokens, "
                  f"mean {result['n_tokens'] / result['n_documents']:.0f} per document.", "",
                  "| K | sampler | ours M tokens/CPU s | tomotopy | ratio | first sweep "
                  "(×steady): ours, tomotopy | report score: ours, tomotopy | seeds |",
                  "|---|---|---|---|---|---|---|---|"]
        for method in methods:
            for K, pairs in _pairs(result, method):
                if not pairs:
                    continue
                ours_r = median([a["tokens_per_cpu_s"] for a, _ in pairs])
                ratio = median([a["tokens_per_cpu_s"] / b["tokens_per_cpu_s"]
                                for a, b in pairs])
                peer_r = median([b["tokens_per_cpu_s"] for _, b in pairs])
                lines.append(
                    f"| {K} | {NAMES[method]} | {ours_r / 1e6:.2f} | {peer_r / 1e6:.2f} | "
                    f"{ratio:.2f} | "
                    f"{median([a['first_sweep_ratio'] for a, _ in pairs]):.2f}, "
                    f"{median([b['first_sweep_ratio'] for _, b in pairs]):.2f} | "
                    f"{fmt(median([a['report'] for a, _ in pairs]), 4)}, "
                    f"{fmt(median([b['report'] for _, b in pairs]), 4)} | {len(pairs)} |")
        curves = {}
        for r in result["records"]:
            if r.get("checkpoints"):
                curves.setdefault((r["K"], r["method"]), []).append(r)
        if curves:
            lines += ["", "Report score against CPU time (sweep: CPU seconds so far, score; "
                      "means over the seeds):", "", "| K | method | seeds | checkpoints |",
                      "|---|---|---|---|"]
            for (K, method), rs in sorted(curves.items(), key=lambda kv: kv[0][0]):
                lines.append(f"| {K} | {NAMES.get(method, method)} | {len(rs)} | "
                             f"{_curve(rs)} |")
        lines.append("")
    return "\n".join(lines)


def headline(results):
    rows = []
    for result in results:
        if result["part"] not in FULL:
            continue
        # the default sampler (the results page's table has the others)
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
