# SPDX-License-Identifier: BSD-3-Clause
"""Memory and time of memoized training at large K: peak RSS and time per pass.

Every configuration runs in a fresh subprocess (one thread: ``OMP_NUM_THREADS=1`` and
``n_threads=1``) that loads a cached count matrix, fits the estimator for a few passes
(``tol=0``) and reports

* ``peak_rss_mb``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end of the fit (the
  process's high-water mark, data and interpreter included);
* ``base_rss_mb``: the same mark just before the fit (interpreter, libraries, the count matrix),
  so ``peak_rss_mb - base_rss_mb`` is what training added;
* ``pass_seconds``: the wall time of every pass from the estimator's ``trace_`` (the first
  memoized pass is one batch iteration; later passes make one global step per batch),
  ``pass_cpu_each``: the process CPU time of every pass (the first includes the
  initialization), ``pass_cpu``: the CPU time of the whole fit divided by the passes.

``--trees`` names source trees to compare side by side in the same run (default: the
repository's ``main`` checkout, ``../main`` if it exists, as ``before``, and this tree as
``after``); each child imports sparseclust from its tree via ``PYTHONPATH``.

Corpora (vectorized once with ``CountVectorizer(stop_words='english', min_df=5)`` and cached
under ``--cache``):

* ``imdb``: all 100,000 IMDB reviews (train, test and unlabelled);
* ``20ng``: the 11,314 20 Newsgroups training posts (headers removed).

Usage::

    python benchmarks/bench_scale.py --configs imdb:1000 20ng:400 --passes 3
    python benchmarks/bench_scale.py --quick
    python benchmarks/bench_scale.py --dask            # 1 vs 2 Dask workers, IMDB, K = 400
    python benchmarks/bench_scale.py --dask --quick    # the same on 20 Newsgroups, K = 50
    python benchmarks/bench_scale.py --dask --dask-model hdp  # HDPTopicModel (moves), 20NG

``--dask`` runs, for each worker count in a fresh subprocess, a ``LocalCluster`` of that many
single-threaded worker processes (``OMP_NUM_THREADS=1``), the corpus as a ``dask.array`` of
``--dask-partitions`` CSR row chunks, and batch SparseLDA (``init='random'``, ``tol=0``): every
pass is one round (broadcast E[log phi], local step on every partition, tree-sum, global
step on the client). It records the wall time of every pass (the engine's ``elapsed``,
callbacks excluded), the CPU time of every worker and of the client in every pass, and the
load average (``/proc/loadavg``) before and after each run.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, environment, write_json  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "sparseclust_bench_cache"


def _maxrss_mb():
    # ru_maxrss is in kilobytes on Linux (bytes on macOS)
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024.0 * 1024.0) if sys.platform == "darwin" else r / 1024.0


def prepare(corpus, cache):
    """The cached CSR count matrix of ``corpus`` (built on first use)."""
    import scipy.sparse as sp

    cache = Path(cache)
    path = cache / f"{corpus}.npz"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    from _common import load_20newsgroups, load_imdb, vectorize

    if corpus == "imdb":
        texts, _, _ = load_imdb()
    elif corpus == "20ng":
        texts, _, _ = load_20newsgroups("train")
    else:
        raise ValueError(f"unknown corpus {corpus!r}")
    X, _, _ = vectorize(texts)
    sp.save_npz(path, sp.csr_matrix(X), compressed=False)
    return path


def child(cfg):
    """Run one configuration in this process and print its measurements as JSON."""
    import scipy.sparse as sp

    X = sp.load_npz(cfg["data"]).tocsr()
    if cfg.get("n_docs"):
        X = X[: cfg["n_docs"]]
    import sparseclust
    from sparseclust import HDPTopicModel, SparseLDA

    base = _maxrss_mb()
    if cfg["model"] == "lda":
        est = SparseLDA(n_components=cfg["K"], L=cfg.get("L", 8), algorithm="memoized",
                        n_batches=cfg.get("n_batches", 10), max_iter=cfg["passes"], tol=0,
                        init=cfg.get("init", "random"), random_state=cfg.get("seed", 0),
                        n_threads=1)
    elif cfg["model"] == "hdp":
        est = HDPTopicModel(max_components=cfg["K"], L=cfg.get("L", 8), algorithm="memoized",
                            n_batches=cfg.get("n_batches", 10), max_iter=cfg["passes"], tol=0,
                            init=cfg.get("init", "random"), random_state=cfg.get("seed", 0),
                            n_threads=1)
    elif cfg["model"] == "sem":
        from sparseclust import StochasticEMLDA

        est = StochasticEMLDA(n_components=cfg["K"], max_iter=cfg["passes"], tol=0,
                              random_state=cfg.get("seed", 0), n_threads=1)
    else:
        raise ValueError(cfg["model"])
    c0 = time.process_time()
    w0 = time.perf_counter()
    import warnings

    marks = [c0]

    def _mark(info):  # process CPU time at the end of every pass
        marks.append(time.process_time())
        return False

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, callback=_mark)
    cpu = time.process_time() - c0
    wall = time.perf_counter() - w0
    if cfg["model"] == "sem":  # one trace entry per sweep, with its own time
        passes = [e["time"] for e in est.trace_]
        objective = [float(e["log_joint"]) for e in est.trace_]
    else:
        el = [e["elapsed"] for e in est.trace_]
        passes = [el[0]] + [b - a for a, b in zip(el[:-1], el[1:], strict=True)]
        objective = [float(e["elbo"]) for e in est.trace_]
    out = dict(
        peak_rss_mb=_maxrss_mb(),
        base_rss_mb=base,
        pass_seconds=passes,
        fit_wall=wall,
        fit_cpu=cpu,
        pass_cpu=cpu / max(len(passes), 1),
        # CPU seconds of every pass (the first includes the initialization)
        pass_cpu_each=[b - a for a, b in zip(marks[:-1], marks[1:], strict=True)],
        elbo=objective,
        n_docs=int(X.shape[0]),
        n_words=int(X.shape[1]),
        nnz=int(X.nnz),
        module=sparseclust.__file__,
    )
    print("@@RESULT@@" + json.dumps(out))


def prepare_docword(corpus, n_docs, cache):
    """A UCI docword file (gzip) of the first ``n_docs`` documents of the cached corpus."""
    import scipy.sparse as sp

    from sparseclust.datasets import save_uci_bow

    path = Path(cache) / f"docword.{corpus}.{n_docs}.txt.gz"
    if not path.exists():
        X = sp.load_npz(prepare(corpus, cache)).tocsr()[:n_docs]
        tmp = path.with_suffix(".tmp.gz")
        save_uci_bow(X, tmp)
        tmp.rename(path)
    return path


def child_stream(cfg):
    """partial_fit over a docword file streamed from disk; prints the measurements."""
    from sparseclust import HDPTopicModel, SparseLDA
    from sparseclust.datasets import stream_uci_bow

    stream = stream_uci_bow(cfg["docword"], batch_size=cfg["batch_size"])
    if cfg["model"] == "lda":
        est = SparseLDA(n_components=cfg["K"], L=8, total_samples=stream.n_documents,
                        random_state=0, n_threads=1)
    else:
        est = HDPTopicModel(max_components=cfg["K"], L=8, total_samples=stream.n_documents,
                            random_state=0, n_threads=1)
    base = _maxrss_mb()
    c0 = time.process_time()
    n = nnz = 0
    for Xb in stream:
        est.partial_fit(Xb)
        n += Xb.shape[0]
        nnz += Xb.nnz
    cpu = time.process_time() - c0
    print("@@RESULT@@" + json.dumps(dict(peak_rss_mb=_maxrss_mb(), base_rss_mb=base,
                                         n_docs=n, nnz=nnz, cpu=cpu,
                                         n_minibatches=est.n_batch_iter_)))


def run_child(tree, cfg):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(tree))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(cfg)],
        env=env, capture_output=True, text=True, check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    raise RuntimeError(f"child failed ({tree}, {cfg}):\n{proc.stderr[-3000:]}")


def _git_commit(tree):
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree,
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--configs", nargs="+", default=["imdb:1000", "20ng:400"],
                    help="corpus:K[:model] with model lda (default), hdp or sem "
                    "(StochasticEMLDA, one trace entry per sweep)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--trees", nargs="+", default=None,
                    help="name=path[@commit] source trees (default before=../main after=.)")
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--quick", action="store_true", help="20ng at K = 50, 2 passes")
    ap.add_argument("--plot", action="store_true",
                    help="only draw results/scale.png from the stored JSON files")
    ap.add_argument("--stream", action="store_true",
                    help="peak RSS of partial_fit over a streamed docword file, 1x vs 4x")
    ap.add_argument("--stream-docs", type=int, nargs="+", default=[25000, 100000],
                    help="corpus sizes (first documents of IMDB) for --stream")
    ap.add_argument("--stream-models", nargs="+", default=["lda:100", "hdp:100"])
    ap.add_argument("--dask", action="store_true",
                    help="time per pass of SparseLDA on a local Dask cluster of 1 vs 2 "
                    "workers (one thread each), IMDB at K = 400 (--quick: 20 Newsgroups, "
                    "K = 50); writes results/scale_dask.json")
    ap.add_argument("--dask-workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dask-model", choices=["lda", "hdp"], default="lda",
                    help="with --dask: 'hdp' fits batch HDPTopicModel (moves on) on 20 "
                    "Newsgroups, max_components = 100; writes results/scale_dask_hdp.json")
    ap.add_argument("--dask-partitions", type=int, default=8)
    ap.add_argument("--out", default=str(RESULTS / "scale.json"))
    args = ap.parse_args(argv)
    if args.child:
        cfg = json.loads(args.child)
        {"stream": child_stream, "dask": child_dask}.get(cfg.get("mode"), child)(cfg)
        return
    if args.dask:
        return main_dask(args)
    if args.plot:
        return plot(RESULTS / "scale.json", RESULTS / "scale_stream.json",
                    RESULTS / "scale.png")
    if args.stream:
        return main_stream(args)
    if args.quick:
        args.configs, args.passes = ["20ng:50"], 2
    commits = {}
    if args.trees:
        trees = {}
        for t in args.trees:
            name, path = t.split("=", 1)
            if "@" in path:  # path@commit: a snapshot of that commit outside git
                path, commits[name] = path.rsplit("@", 1)
            trees[name] = path
    else:
        trees = {}
        main_tree = ROOT.parent / "main"
        if main_tree.exists() and main_tree.resolve() != ROOT.resolve():
            trees["before"] = str(main_tree)
        trees["after"] = str(ROOT)
    results = []
    for spec in args.configs:
        parts = spec.split(":")
        corpus, K = parts[0], int(parts[1])
        model = parts[2] if len(parts) > 2 else "lda"
        data = prepare(corpus, args.cache)
        cfg = dict(data=str(data), corpus=corpus, K=K, model=model, passes=args.passes)
        for rep in range(args.repeats):
            # interleave the trees, so that load on the machine hits both alike
            for name, tree in trees.items():
                t0 = time.perf_counter()
                res = run_child(tree, cfg)
                res.update(tree=name, commit=commits.get(name) or _git_commit(tree),
                           corpus=corpus, K=K,
                           model=model, passes=args.passes, repeat=rep)
                results.append(res)
                print(f"{corpus} K={K} {model} {name}: peak {res['peak_rss_mb']:.0f} MB "
                      f"(base {res['base_rss_mb']:.0f}), passes "
                      + " ".join(f"{s:.1f}" for s in res["pass_seconds"])
                      + f" s ({time.perf_counter() - t0:.0f} s)", flush=True)
    payload = dict(environment=environment(), passes=args.passes, threads=1,
                   trees={k: dict(path=str(v), commit=commits.get(k) or _git_commit(v))
                          for k, v in trees.items()},
                   memory=results)
    out = Path(args.out)
    if out.exists():
        try:
            old = json.loads(out.read_text())
        except (OSError, ValueError):
            old = {}
        # runs of other configurations are kept (a configuration run again is replaced)
        done = {(r["corpus"], r["K"], r["model"]) for r in results}
        kept = [r for r in old.get("memory", [])
                if (r["corpus"], r["K"], r["model"]) not in done]
        # every run's trees and environment are kept under "runs" (the top-level ones are
        # the last run's)
        runs = old.get("runs") or [dict(trees=old.get("trees"),
                                        environment=old.get("environment"))]
        runs = [r for r in runs if r.get("trees") is not None]
        runs.append(dict(configs=", ".join(args.configs), trees=payload["trees"],
                         environment=payload["environment"]))
        old.update({k: v for k, v in payload.items()})
        old["memory"] = kept + results
        old["runs"] = runs
        payload = old
    write_json(out, payload)
    print(f"wrote {out}")


def plot(memory_json, stream_json, out):
    """Peak RSS before/after per configuration, and streamed peak RSS against corpus size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    if Path(memory_json).exists():
        rows = json.loads(Path(memory_json).read_text()).get("memory", [])
        configs = sorted({(r["corpus"], r["K"], r["model"]) for r in rows},
                         key=lambda c: (c[0] != "imdb", -c[1]))
        trees = sorted({r["tree"] for r in rows})
        width = 0.8 / max(len(trees), 1)
        for j, tree in enumerate(trees):
            vals = []
            for c in configs:
                v = [r["peak_rss_mb"] for r in rows
                     if (r["corpus"], r["K"], r["model"]) == c and r["tree"] == tree]
                vals.append(float(sorted(v)[len(v) // 2]) if v else 0.0)
            axes[0].bar([i + j * width for i in range(len(configs))], vals, width, label=tree)
        axes[0].set_xticks([i + width * (len(trees) - 1) / 2 for i in range(len(configs))])
        axes[0].set_xticklabels([f"{c[0]} K={c[1]}" for c in configs])
        axes[0].set_ylabel("peak RSS (MB)")
        axes[0].set_title("memoized SparseLDA")
        axes[0].legend()
    if Path(stream_json).exists():
        rows = json.loads(Path(stream_json).read_text())["stream"]["rows"]
        for model in sorted({(r["model"], r["K"]) for r in rows}):
            pts = sorted((r["corpus_docs"], r["peak_rss_mb"]) for r in rows
                         if (r["model"], r["K"]) == model)
            axes[1].plot([p[0] for p in pts], [p[1] for p in pts], "o-",
                         label=f"{model[0]} K={model[1]}")
        axes[1].set_xlabel("documents in the streamed file")
        axes[1].set_ylabel("peak RSS (MB)")
        axes[1].set_ylim(bottom=0)
        axes[1].set_title("partial_fit over a stream")
        axes[1].legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main_stream(args):
    """Peak RSS of streamed partial_fit against corpus size (this tree only)."""
    out = Path(args.out)
    rows = []
    for spec in args.stream_models:
        model, K = spec.split(":")
        for n_docs in args.stream_docs:
            path = prepare_docword("imdb", n_docs, args.cache)
            for rep in range(args.repeats):
                cfg = dict(mode="stream", docword=str(path), model=model, K=int(K),
                           batch_size=1000)
                res = run_child(ROOT, cfg)
                res.update(model=model, K=int(K), corpus="imdb", corpus_docs=n_docs,
                           file_mb=path.stat().st_size / 2**20, repeat=rep, batch_size=1000)
                rows.append(res)
                print(f"stream {model} K={K} {n_docs} docs: peak {res['peak_rss_mb']:.0f} MB "
                      f"(base {res['base_rss_mb']:.0f}), cpu {res['cpu']:.0f} s", flush=True)
    payload = json.loads(out.read_text()) if out.exists() else {}
    payload["stream"] = dict(environment=environment(), commit=_git_commit(ROOT), rows=rows)
    write_json(out, payload)
    print(f"wrote {out}")


def _loadavg():
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:  # pragma: no cover - not Linux
        return list(os.getloadavg())


def child_dask(cfg):
    """Batch SparseLDA on a LocalCluster of ``cfg['workers']`` workers; prints the timings."""
    import warnings

    import dask.array as da
    import numpy as np
    import scipy.sparse as sp
    from distributed import Client, LocalCluster

    from sparseclust import HDPTopicModel, SparseLDA

    X = sp.csr_array(sp.load_npz(cfg["data"]).tocsr(), dtype=np.float64)
    if cfg.get("n_docs"):
        X = X[: cfg["n_docs"]]
    bounds = np.linspace(0, X.shape[0], cfg["partitions"] + 1).astype(int)
    Xd = da.concatenate([da.from_array(X[a:b], chunks=(b - a, X.shape[1]), asarray=False)
                         for a, b in zip(bounds[:-1], bounds[1:], strict=True)], axis=0)
    env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = LocalCluster(n_workers=cfg["workers"], threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, env=env)
        client = Client(cluster)
    client.wait_for_workers(cfg["workers"])

    def cpu_now():
        w = client.run(time.process_time)
        return sorted(w.values()), time.process_time()

    marks = [cpu_now()]

    def _mark(info):
        marks.append(cpu_now())
        return False

    if cfg.get("model", "lda") == "hdp":
        # batch training with the merge / delete / sort moves (from the end of pass 2)
        est = HDPTopicModel(max_components=cfg["K"], L=8, algorithm="batch",
                            max_iter=cfg["passes"], tol=0, init="random", random_state=0,
                            n_threads=1)
    else:
        est = SparseLDA(n_components=cfg["K"], L=8, algorithm="batch",
                        max_iter=cfg["passes"], tol=0, init="random", random_state=0,
                        n_threads=1)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xd, callback=_mark)
    wall = time.perf_counter() - t0
    el = [e["elapsed"] for e in est.trace_]
    passes = [el[0]] + [b - a for a, b in zip(el[:-1], el[1:], strict=True)]
    worker_cpu = [[b - a for a, b in zip(m0[0], m1[0], strict=True)]
                  for m0, m1 in zip(marks[:-1], marks[1:], strict=True)]
    client_cpu = [m1[1] - m0[1] for m0, m1 in zip(marks[:-1], marks[1:], strict=True)]
    out = dict(pass_seconds=passes, fit_wall=wall, worker_cpu=worker_cpu,
               client_cpu=client_cpu, time_local=[e["time_local"] for e in est.trace_],
               time_global=[e["time_global"] for e in est.trace_],
               elbo=[float(e["elbo"]) for e in est.trace_], n_docs=int(X.shape[0]),
               time_moves=[e.get("time_moves", 0.0) for e in est.trace_],
               n_topics=[e.get("n_live") for e in est.trace_],
               n_words=int(X.shape[1]), nnz=int(X.nnz), tokens=float(X.sum()))
    client.close()
    cluster.close()
    print("@@RESULT@@" + json.dumps(out))


def main_dask(args):
    """Time per pass on 1 vs 2 Dask workers, in the same run (this tree only)."""
    import statistics

    model = args.dask_model
    if model == "hdp":  # HDPTopicModel, batch training (moves from the end of pass 2)
        corpus, K, passes = "20ng", 100, args.passes
    else:
        corpus, K, passes = (("20ng", 50, 3) if args.quick
                             else ("imdb", 400, max(args.passes, 3)))
    data = prepare(corpus, args.cache)
    rows = []
    for rep in range(args.repeats):
        for w in args.dask_workers:
            cfg = dict(mode="dask", data=str(data), K=K, passes=passes, workers=w,
                       partitions=args.dask_partitions, model=model)
            load_before = _loadavg()
            res = run_child(ROOT, cfg)
            res.update(workers=w, corpus=corpus, K=K, passes=passes, repeat=rep,
                       partitions=args.dask_partitions, load_before=load_before,
                       load_after=_loadavg(),
                       median_pass_seconds=statistics.median(res["pass_seconds"]))
            rows.append(res)
            print(f"dask {corpus} K={K} workers={w}: passes "
                  + " ".join(f"{s:.1f}" for s in res["pass_seconds"])
                  + f" s, load {load_before} -> {res['load_after']}", flush=True)
    med = {}
    for w in args.dask_workers:
        med[w] = statistics.median([r["median_pass_seconds"] for r in rows
                                    if r["workers"] == w])
    speedup = {f"{w}": med[min(med)] / med[w] for w in med}
    print("median seconds per pass:", med, "speedup:", speedup)
    if model == "hdp":
        out = RESULTS / "scale_dask_hdp.json"
    else:
        out = RESULTS / ("scale_dask_quick.json" if args.quick else "scale_dask.json")
    write_json(out, dict(environment=environment(), commit=_git_commit(ROOT), corpus=corpus,
                         model=model, K=K, passes=passes, threads_per_worker=1,
                         algorithm="batch",
                         median_pass_seconds={f"{w}": v for w, v in med.items()},
                         speedup_vs_fewest_workers=speedup, rows=rows))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
