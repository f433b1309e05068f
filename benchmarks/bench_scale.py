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
    el = [e["elapsed"] for e in est.trace_]
    passes = [el[0]] + [b - a for a, b in zip(el[:-1], el[1:], strict=True)]
    out = dict(
        peak_rss_mb=_maxrss_mb(),
        base_rss_mb=base,
        pass_seconds=passes,
        fit_wall=wall,
        fit_cpu=cpu,
        pass_cpu=cpu / max(len(passes), 1),
        # CPU seconds of every pass (the first includes the initialization)
        pass_cpu_each=[b - a for a, b in zip(marks[:-1], marks[1:], strict=True)],
        elbo=[float(e["elbo"]) for e in est.trace_],
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
                    help="corpus:K[:model] with model lda (default) or hdp")
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
    ap.add_argument("--out", default=str(RESULTS / "scale.json"))
    args = ap.parse_args(argv)
    if args.child:
        cfg = json.loads(args.child)
        child_stream(cfg) if cfg.get("mode") == "stream" else child(cfg)
        return
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
        old.update({k: v for k, v in payload.items()})
        old["memory"] = kept + results
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


if __name__ == "__main__":
    main()
