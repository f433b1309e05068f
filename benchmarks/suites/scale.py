# SPDX-License-Identifier: BSD-3-Clause
"""Scale: memory and throughput as the corpus grows, one and two threads, streamed input."""

import json
import os
import resource
import subprocess
import sys
import time

from .._common import CACHE, ROOT, load_20newsgroups, load_imdb, vectorize
from .._topics import fmt

NAME = "scale"
TITLE = "Scale: memory and throughput"
MEASURES = """\
Whether throughput and memory hold as the corpus grows: StochasticEMLDA and memoized
SparseLDA on the first n documents of a corpus, for two sizes n and for one and two
threads, each run in a fresh process; and SparseLDA's `partial_fit` over minibatches
streamed from a UCI file on disk."""
METHOD = """\
- Every configuration runs in its own process (`OMP_NUM_THREADS` = the thread count), fits
  a few passes with `tol=0` and reports the process's peak resident memory
  (`ru_maxrss`) and the resident memory just before the fit (interpreter, libraries, the
  count matrix), so the difference is what training added.
- Tokens per second: fitted tokens × passes / the fit's wall time (two threads need wall
  time); CPU seconds are stored too. Priors are the estimators' defaults.
- The corpus is vectorized once with `CountVectorizer(stop_words='english', min_df=5)` over
  all its documents and cached; the streamed run reads a gzip UCI docword file of it."""

FULL = {
    "imdb": dict(corpus="imdb", n_docs=[25000, 100000], threads=[1, 2],
                 models={"sem": dict(K=1000, passes=3), "sparselda": dict(K=400, passes=2)},
                 stream=dict(K=100, batch_size=4096)),
}
QUICK = {
    "20newsgroups": dict(corpus="20newsgroups", n_docs=[2000, 8000], threads=[1, 2],
                         models={"sem": dict(K=50, passes=2), "sparselda": dict(K=20, passes=1)},
                         stream=dict(K=20, batch_size=1024)),
}


def _corpus(name):
    import scipy.sparse as sp

    path = CACHE / f"{name}-all.npz"
    if not path.exists():
        texts = load_imdb()[0] if name == "imdb" else load_20newsgroups("train")[0]
        X, _, _ = vectorize(texts)
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
        sp.save_npz(tmp, sp.csr_matrix(X), compressed=False)
        os.replace(tmp, path)
    return path


def _maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(cfg):
    """One configuration in this process; prints its measurements as one JSON line."""
    import warnings

    import scipy.sparse as sp

    from sparseclust import SparseLDA, StochasticEMLDA
    from sparseclust.datasets import stream_uci_bow

    base = None
    c0, w0 = time.process_time(), time.perf_counter()
    if cfg["model"] == "stream":
        stream = stream_uci_bow(cfg["docword"], batch_size=cfg["batch_size"])
        est = SparseLDA(n_components=cfg["K"], algorithm="stochastic",
                        total_samples=stream.n_documents, random_state=0,
                        n_threads=cfg["threads"])
        base = _maxrss_mb()
        c0, w0 = time.process_time(), time.perf_counter()
        n_tokens = 0
        for Xb in stream:
            est.partial_fit(Xb)
            n_tokens += int(Xb.sum())
        passes = 1
    else:
        X = sp.load_npz(cfg["data"]).tocsr()[: cfg["n_docs"]]
        n_tokens, passes = int(X.sum()), cfg["passes"]
        if cfg["model"] == "sem":
            est = StochasticEMLDA(n_components=cfg["K"], max_iter=passes, tol=0,
                                  random_state=0, n_threads=cfg["threads"])
        else:
            est = SparseLDA(n_components=cfg["K"], max_iter=passes, tol=0, random_state=0,
                            n_threads=cfg["threads"])
        base = _maxrss_mb()
        c0, w0 = time.process_time(), time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    print("@@RESULT@@" + json.dumps(dict(
        peak_rss_mb=_maxrss_mb(), base_rss_mb=base, cpu_s=cpu, wall_s=wall,
        n_tokens=n_tokens, passes=passes, tokens_per_s=n_tokens * passes / wall)))


def _run_child(cfg):
    env = dict(os.environ, OMP_NUM_THREADS=str(cfg["threads"]), OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.suites.scale", json.dumps(cfg)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    raise RuntimeError(f"child failed ({cfg}):\n{proc.stderr[-3000:]}")


def run(part, params, log):
    import scipy.sparse as sp

    from sparseclust.datasets import save_uci_bow

    data = _corpus(params["corpus"])
    records = []
    for model, mp in params["models"].items():
        for n in params["n_docs"]:
            for threads in params["threads"]:
                cfg = dict(model=model, data=str(data), n_docs=n, threads=threads, **mp)
                rec = {**cfg, **_run_child(cfg)}
                log(f"  {model} n_docs={n} threads={threads}: "
                    f"{rec['tokens_per_s'] / 1e6:.3f}M tokens/s, peak {rec['peak_rss_mb']:.0f} MB")
                records.append(rec)
    docword = CACHE / f"docword.{params['corpus']}.txt.gz"
    if not docword.exists():
        tmp = docword.with_name(f"{docword.name}.{os.getpid()}.tmp.gz")
        save_uci_bow(sp.load_npz(data).tocsr(), tmp)
        os.replace(tmp, docword)
    cfg = dict(model="stream", docword=str(docword), threads=1, **params["stream"])
    rec = {**cfg, **_run_child(cfg)}
    log(f"  stream: {rec['tokens_per_s'] / 1e6:.3f}M tokens/s, peak {rec['peak_rss_mb']:.0f} MB")
    records.append(rec)
    return {"records": records}


def table(results):
    lines = []
    for r in results:
        lines += [f"**{r['part']}** (commit `{r['commit']}`).", "",
                  "| model | K | documents | tokens | threads | M tokens/s | CPU s | "
                  "peak RSS MB | added by training MB |", "|---|---|---|---|---|---|---|---|---|"]
        for x in r["records"]:
            name = {"sem": "StochasticEMLDA", "sparselda": "SparseLDA (memoized)",
                    "stream": "SparseLDA partial_fit, streamed"}[x["model"]]
            lines.append(f"| {name} | {x['K']} | {fmt(x.get('n_docs'))} | {x['n_tokens']:,} | "
                         f"{x['threads']} | {x['tokens_per_s'] / 1e6:.3f} | {x['cpu_s']:.1f} | "
                         f"{x['peak_rss_mb']:.0f} | {x['peak_rss_mb'] - x['base_rss_mb']:.0f} |")
        lines.append("")
    return "\n".join(lines)


def headline(results):
    rows = []
    for r in results:
        if r["part"] not in FULL:
            continue
        for model in ("sem", "sparselda"):
            xs = [x for x in r["records"] if x["model"] == model]
            if not xs:
                continue
            big = max(x["n_docs"] for x in xs)
            one = next((x for x in xs if x["n_docs"] == big and x["threads"] == 1), None)
            two = next((x for x in xs if x["n_docs"] == big and x["threads"] == 2), None)
            if one and two:
                rows.append(dict(
                    ours=f"{'StochasticEMLDA' if model == 'sem' else 'SparseLDA'}, "
                         f"K = {one['K']}, 2 threads",
                    peer="the same, 1 thread", data=f"IMDB, {one['n_tokens'] / 1e6:.1f}M tokens",
                    metric="tokens per second; peak RSS",
                    figure=f"{two['tokens_per_s'] / 1e6:.2f} M/s; {two['peak_rss_mb']:.0f} MB",
                    ratio=f"× {two['tokens_per_s'] / one['tokens_per_s']:.2f}"))
    return rows


if __name__ == "__main__":
    child(json.loads(sys.argv[1]))
