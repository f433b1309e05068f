# SPDX-License-Identifier: BSD-3-Clause
"""Scale: memory and throughput as the corpus grows, one and two threads, streamed input;
image patches and a 100-million-token corpus streamed from disk."""

import gzip
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .._common import CACHE, ROOT, SHARED_DATA, load_20newsgroups, load_imdb, vectorize
from .._topics import fmt, median

NAME = "scale"
TITLE = "Scale: memory and throughput"
MEASURES = """\
Whether throughput and memory hold as the data grow, each configuration in a fresh process:
StochasticEMLDA and memoized SparseLDA on the first n documents of a corpus (two n, one and
two threads) and SparseLDA's `partial_fit` streamed from a UCI file; `corpus100m`: both on
IMDB repeated ten times (106 million tokens), a quarter and all of it; `patches`:
SparseGaussianMixture streamed over 2.35 million BSDS500 patches, held-out log-likelihood
against CPU time after every pass (the sparse-posteriors paper's Fig. 2), beside the largest
subsample scikit-learn's `GaussianMixture` fits in the same time."""
METHOD = """\
- Every configuration runs in its own process (`OMP_NUM_THREADS` = the thread count), fits
  a few passes with `tol=0` and reports its peak resident memory (`ru_maxrss`) and that
  just before the fit (interpreter, libraries, the count matrix), so the difference is
  what training added.
- Tokens per second: fitted tokens × passes / wall time (two threads need wall time); CPU
  seconds are stored too. Priors are the estimators' defaults; StochasticEMLDA takes one
  block per sweep (`sweep_blocks=1`), so every size and thread count times the same sweep.
- The corpus is vectorized once with `CountVectorizer(stop_words='english', min_df=5)` over
  all its documents and cached; the streamed run reads a gzip UCI docword file of it
  (decompressed by `isal` when installed: see the runs' versions).
- `patches`: grayscale 8×8 patches, stride 4, each patch's mean removed, float32, from the
  200 train and the first 50 val images (sorted by name), read by
  `stream_image_patches(shuffle=True)`; held out: 20,000 patches drawn (seed 0) from the last
  50 val images. Zero-mean full-covariance `SparseGaussianMixture`, one thread, `tol=0`,
  defaults otherwise (`n_candidates='auto'`). Memoized: `fit(stream)` with the stream's
  minibatches as its 10 fixed batches. Stochastic: `partial_fit` on minibatches of 4,096
  patches with `total_samples` = all patches, a newly shuffled stream every pass. After
  every pass: the held-out mean log-likelihood per patch of the current point estimates
  (outside the clock). Peak RSS: the process's high-water mark from the start of training
  (`VmHWM`, reset after loading the held-out patches). scikit-learn: `GaussianMixture(
  covariance_type='full')` with its defaults on random subsamples (float64), doubling
  until a fit takes longer than the memoized L = 4 run at K = 200; the largest within that
  time is reported. The other parts: no scikit-learn, one process per core (two
  configurations at a time, or one beside another part's).
- `corpus100m`: the IMDB counts above (10.6M tokens without stop words), repeated until
  the corpus holds at least 100 million tokens (ten copies), documents reshuffled, written
  once as a gzip UCI docword file (and its first quarter as another). StochasticEMLDA
  (K = 1000) loads the file into memory. Memoized SparseLDA (K = 400, Gibbs step) trains
  on `stream_uci_bow` ("gzip text"), and on the same minibatches saved once by
  `CorpusStream.save` ("saved binary"; the save is outside the clock, its CPU time
  stored). Minibatches of a tenth of the quarter's documents at both sizes (10 and 40
  batches); their statistics on disk (`memo_dir`), and once more in memory, one thread.
  Four passes; rates from the median of passes 2 to 4 (the first holds the
  initialisation); peak RSS from the start of training (`VmHWM`). Each configuration
  runs twice, the thread counts taking turns: medians of the runs, "× 1 thread" the
  median ratio of same-turn runs, the higher peak."""

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
# memoized training at K = 200, L = 4 and K, with the scikit-learn subsamples; the other
# configurations of the design (K = 200 and 800; L = 1, 4, 16, K; memoized and stochastic)
# are the parts below
FULL["patches"] = dict(
    K=[200], L=[4, "K"], algorithms=["memoized"], seed=0,
    heldout_images=50, n_heldout=20000, train_images=None, n_batches=10, svi_batch_size=4096,
    max_passes=30, cpu_budget_s=[1200], jobs=1, sklearn_K=200, sklearn_start=5000)
# K = 800 without the scikit-learn subsamples; two configurations at a time, one core each
FULL["patches-k800"] = dict(FULL["patches"], K=[800], cpu_budget_s=[4500], jobs=2,
                            sklearn_K=None)
# memoized training with L = 1 and 16 at both K
FULL["patches-l1-l16"] = dict(FULL["patches"], K=[200, 800], L=[1, 16],
                              cpu_budget_s=[1200, 4500], jobs=2, sklearn_K=None)
# memoized L = 16 at both K with 'auto' candidate sets of max(16, 2 L) (they were 4 L);
# the page shows these fits in place of the older ones
FULL["patches-l16"] = dict(FULL["patches-l1-l16"], L=[16])
# stochastic training, every L, two configurations at a time
FULL["patches-stochastic"] = dict(FULL["patches"], L=[1, 4, 16, "K"],
                                  algorithms=["stochastic"], jobs=2, sklearn_K=None)
# K = 800, stochastic: the same budget as at K = 200, in two parts (the first runs beside
# the last memoized fit, one configuration at a time)
FULL["patches-k800-stochastic-l1-l16"] = dict(FULL["patches-stochastic"], K=[800], L=[1, 16],
                                              jobs=1)
FULL["patches-k800-stochastic-l4-lk"] = dict(FULL["patches-stochastic"], K=[800], L=[4, "K"])
QUICK["patches"] = dict(
    K=[20], L=[1, 4, "K"], algorithms=["memoized", "stochastic"], seed=0,
    heldout_images=2, n_heldout=2000, train_images=4, n_batches=4, svi_batch_size=2048,
    max_passes=3, cpu_budget_s=[30], jobs=2, sklearn_K=20, sklearn_start=2000)
FULL["corpus100m"] = dict(
    corpus="imdb", min_tokens=100_000_000, threads=[1, 2],
    models={"sem": dict(K=1000, passes=4),
            "sparselda": dict(K=400, passes=4, n_batches=10, memo="disk"),
            "sparselda-saved": dict(K=400, passes=4, n_batches=10, memo="disk"),
            "sparselda-saved-memory": dict(K=400, passes=4, n_batches=10, memo="memory",
                                           threads=[1])},
    dask=dict(model="sem", workers=[1, 2], partitions=8), repeats=2)
QUICK["corpus100m"] = dict(
    corpus="20newsgroups", min_tokens=3_000_000, threads=[1, 2],
    models={"sem": dict(K=50, passes=2),
            "sparselda": dict(K=20, passes=2, n_batches=4, memo="disk"),
            "sparselda-saved": dict(K=20, passes=2, n_batches=4, memo="disk"),
            "sparselda-saved-memory": dict(K=20, passes=2, n_batches=4, memo="memory",
                                           threads=[1])},
    dask=dict(model="sem", workers=[1, 2], partitions=4), repeats=1)


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


def _rss_mb(field="VmRSS"):
    """The process's resident memory (``VmRSS``) or its high-water mark (``VmHWM``), MB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:  # pragma: no cover - not Linux
        pass
    return _maxrss_mb()


def _reset_peak():
    """Start the high-water mark ``VmHWM`` again from the current RSS (Linux), so that the
    peak measures training, not the loading before it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:  # pragma: no cover - not Linux
        pass


def _emit(result):
    print("@@RESULT@@" + json.dumps(result))


# ------------------------------------------------------------------------------ patches


def _patch_files(params):
    """(training image files, held-out image files): the 200 train and the val images but
    the last ``heldout_images`` (sorted by name), and those last ones."""
    root = SHARED_DATA / "bsds500" / "images"

    def jpgs(sub):
        return sorted(str(p) for p in (root / sub).iterdir() if p.suffix.lower() == ".jpg")

    val, h = jpgs("val"), int(params["heldout_images"])
    train = jpgs("train") + val[:-h]
    if params.get("train_images"):
        train = train[: params["train_images"]]
    return train, val[-h:]


def _heldout_patches(files, n):
    """``n`` patches drawn (seed 0) from the grid patches of ``files``, float64 (the report
    set of ``benchmarks._common.patch_split`` for the last 50 val images)."""
    from PIL import Image

    from sparseclust.datasets import extract_patches

    images = [np.asarray(Image.open(f).convert("RGB")) for f in files]
    return extract_patches(images, max_patches=n, random_state=0)


def _loglik(X, weights, means, prec_chol):
    """Mean ``log sum_k w_k N(x | m_k, (C_k C_k^T)^-1)`` over the rows of X, in float64:
    ``SparseGaussianMixture.score`` from its point estimates (full covariances)."""
    weights, means, prec_chol = (np.asarray(a, dtype=np.float64)
                                 for a in (weights, means, prec_chol))
    n, D = X.shape
    lp = np.empty((n, weights.size))
    for k in range(weights.size):
        y = (X - means[k]) @ prec_chol[k]
        lp[:, k] = np.einsum("ij,ij->i", y, y)
    lp *= -0.5
    with np.errstate(divide="ignore"):
        lp += (np.log(weights) - 0.5 * D * np.log(2 * np.pi)
               + np.log(np.diagonal(prec_chol, axis1=1, axis2=2)).sum(1))
    top = lp.max(axis=1)
    return float(np.mean(top + np.log(np.exp(lp - top[:, None]).sum(axis=1))))


def _child_sgmm(cfg):
    """Memoized fit over the patch stream, or partial_fit over a newly shuffled stream every
    pass; the held-out score and the CPU time after every pass."""
    import warnings

    from sparseclust.datasets import stream_image_patches
    from sparseclust.mixture import SparseGaussianMixture

    Xh = _heldout_patches(cfg["heldout"], cfg["n_heldout"])
    K = cfg["K"]
    L = K if cfg["L"] == "K" else int(cfg["L"])
    N = stream_image_patches(cfg["train"]).n_samples
    seed, budget = cfg["seed"], cfg["cpu_budget_s"]
    common = dict(n_components=K, L=L, covariance_type="full", zero_mean=True, tol=0,
                  random_state=seed, n_threads=1, max_iter=cfg["max_passes"])
    curve, excluded = [], [0.0]
    _reset_peak()
    base = _rss_mb()
    c0, w0 = time.process_time(), time.perf_counter()

    def record(n_pass, weights, means, chol):
        t, w = time.process_time(), time.perf_counter()
        cpu, wall = t - c0 - excluded[0], w - w0
        curve.append(dict(passes=n_pass, cpu_s=cpu, wall_s=wall,
                          heldout=_loglik(Xh, weights, means, chol), rss_mb=_rss_mb()))
        excluded[0] += time.process_time() - t
        return cpu >= budget

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if cfg["algorithm"] == "memoized":
            stream = stream_image_patches(
                cfg["train"], batch_size=math.ceil(N / cfg["n_batches"]), dtype=np.float32,
                shuffle=True, random_state=seed)
            est = SparseGaussianMixture(algorithm="memoized", **common)
            est.fit(stream, callback=lambda info: record(
                info["pass"], info["weights"], info["means"], info["precisions_cholesky"]))
        else:
            est = SparseGaussianMixture(algorithm="stochastic", batch_size=cfg["svi_batch_size"],
                                        total_samples=N, **common)
            for n_pass in range(1, cfg["max_passes"] + 1):
                stream = stream_image_patches(
                    cfg["train"], batch_size=cfg["svi_batch_size"], dtype=np.float32,
                    shuffle=True, random_state=1000 * seed + n_pass)
                for Xb in stream:
                    est.partial_fit(Xb)
                if record(n_pass, est.weights_, est.means_, est.precisions_cholesky_):
                    break
    _emit(dict(n_train=N, n_heldout=int(Xh.shape[0]), curve=curve,
               final_heldout=float(est.score(Xh)), peak_rss_mb=_rss_mb("VmHWM"),
               base_rss_mb=base, cpu_s=curve[-1]["cpu_s"], passes=curve[-1]["passes"]))


def _child_sklearn(cfg):
    """scikit-learn's GaussianMixture on a random subsample of ``n`` training patches."""
    import warnings

    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    from sparseclust.datasets import stream_image_patches

    Xh = _heldout_patches(cfg["heldout"], cfg["n_heldout"])
    stream = stream_image_patches(cfg["train"], batch_size=65536)
    N = stream.n_samples
    n = min(int(cfg["n"]), N)
    idx = np.sort(np.random.RandomState(cfg["seed"]).choice(N, size=n, replace=False))
    parts, lo = [], 0
    for Xb in stream:
        hi = lo + Xb.shape[0]
        a, b = np.searchsorted(idx, [lo, hi])
        parts.append(Xb[idx[a:b] - lo])
        lo = hi
    X = np.vstack(parts)
    del parts
    _reset_peak()
    base = _rss_mb()
    gm = GaussianMixture(n_components=cfg["K"], covariance_type="full",
                         random_state=cfg["seed"])
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        c0 = time.process_time()
        gm.fit(X)
        cpu = time.process_time() - c0
    _emit(dict(n_fit=int(n), cpu_s=cpu, n_iter=int(gm.n_iter_), heldout=float(gm.score(Xh)),
               peak_rss_mb=_rss_mb("VmHWM"), base_rss_mb=base))


def _run_patches(params, log):
    from sparseclust.datasets import stream_image_patches

    train, held = _patch_files(params)
    N = stream_image_patches(train).n_samples
    log(f"  {len(train)} training images, {N:,} patches; {len(held)} held-out images")
    shared = dict(train=train, heldout=held, n_heldout=params["n_heldout"], seed=params["seed"])
    configs = [dict(model="sgmm", K=K, L=L, algorithm=algorithm, cpu_budget_s=budget,
                    max_passes=params["max_passes"], n_batches=params["n_batches"],
                    svi_batch_size=params["svi_batch_size"], threads=1, **shared)
               for K, budget in zip(params["K"], params["cpu_budget_s"], strict=True)
               for algorithm in params["algorithms"] for L in params["L"]]

    def one(cfg):
        rec = _run_child(cfg)
        rec.update({k: cfg[k] for k in ("K", "L", "algorithm", "cpu_budget_s")}, method="sgmm")
        log(f"  SparseGaussianMixture {cfg['algorithm']} K={cfg['K']} L={cfg['L']}: "
            f"{rec['passes']} passes, {rec['cpu_s']:.0f} CPU s, "
            f"held-out {rec['curve'][-1]['heldout']:.3f}, peak {rec['peak_rss_mb']:.0f} MB")
        return rec

    # each child is one single-threaded process, so ``jobs`` of them share the machine's
    # cores; CPU seconds are per process
    with ThreadPoolExecutor(max_workers=params.get("jobs", 1)) as pool:
        records = list(pool.map(one, configs))
    # scikit-learn: the largest subsample fitted within the L = 4 memoized run's time
    Ks = params.get("sklearn_K")
    ref = next((r for r in records if Ks is not None and r["K"] == Ks and r["L"] == 4
                and r["algorithm"] == "memoized"), None)
    if ref is not None:
        n = int(params["sklearn_start"])
        while True:
            rec = _run_child(dict(model="sklearn", K=Ks, n=n, threads=1, **shared))
            rec.update(method="sklearn", K=Ks, budget_cpu_s=ref["cpu_s"])
            rec["within_budget"] = rec["cpu_s"] <= ref["cpu_s"]
            log(f"  scikit-learn GaussianMixture K={Ks} n={rec['n_fit']:,}: "
                f"{rec['cpu_s']:.0f} CPU s (budget {ref['cpu_s']:.0f}), "
                f"held-out {rec['heldout']:.3f}")
            records.append(rec)
            if not rec["within_budget"] or rec["n_fit"] >= N:
                break
            n *= 2
    return {"data": f"BSDS500 8x8 grayscale patches, stride 4, mean removed: {N:,} patches "
                    f"of {len(train)} images streamed for training, {params['n_heldout']:,} "
                    f"held out from {len(held)} other val images",
            "n_train": N, "records": records}


# ---------------------------------------------------------------------------- corpus100m


def _write_uci_lines(fh, X, first_doc):
    rows = np.repeat(np.arange(first_doc + 1, first_doc + 1 + X.shape[0], dtype=np.int64),
                     np.diff(X.indptr))
    fh.write("".join(map("{} {} {}\n".format, rows.tolist(), (X.indices + 1).tolist(),
                         X.data.astype(np.int64).tolist())).encode())


def _repeated_corpus(params, log):
    """The UCI docword files (gzip) of the corpus repeated until it holds ``min_tokens``
    tokens, documents shuffled (seed 0), and of its first quarter of documents; built once
    into the cache. Returns {"full"/"quarter": (path, documents, tokens)}, copies."""
    import scipy.sparse as sp

    X = sp.load_npz(_corpus(params["corpus"])).tocsr()
    tokens = float(X.sum())
    copies = max(1, math.ceil(params["min_tokens"] / tokens))
    stem = f"{params['corpus']}-x{copies}"
    meta = CACHE / f"docword.{stem}.json"
    if meta.exists():
        info = json.loads(meta.read_text())
        if all(os.path.exists(v[0]) for v in info["files"].values()):
            return info
    D, W = X.shape[0] * copies, X.shape[1]
    src = np.random.RandomState(0).permutation(D) % X.shape[0]
    Dq = math.ceil(D / 4)
    nnz_rows = np.diff(X.indptr)[src]
    tok_rows = np.asarray(X.sum(axis=1)).ravel()[src]
    files = {"full": (CACHE / f"docword.{stem}.txt.gz", D, int(nnz_rows.sum()),
                      float(tok_rows.sum())),
             "quarter": (CACHE / f"docword.{stem}-quarter.txt.gz", Dq,
                         int(nnz_rows[:Dq].sum()), float(tok_rows[:Dq].sum()))}
    log(f"  writing {copies} copies of {params['corpus']} ({D:,} documents, "
        f"{files['full'][3] / 1e6:.1f}M tokens) to {files['full'][0]}")
    tmp = {k: v[0].with_name(f"{v[0].name}.{os.getpid()}.tmp") for k, v in files.items()}
    handles = {k: gzip.open(tmp[k], "wb", compresslevel=1) for k in files}
    try:
        for k, (_, d, nnz, _) in files.items():
            handles[k].write(f"{d}\n{W}\n{nnz}\n".encode())
        step = 20000
        for lo in range(0, D, step):
            block = X[src[lo:lo + step]]
            _write_uci_lines(handles["full"], block, lo)
            if lo < Dq:
                _write_uci_lines(handles["quarter"], block[: Dq - lo], lo)
    finally:
        for h in handles.values():
            h.close()
    for k, (path, *_) in files.items():
        os.replace(tmp[k], path)
    info = {"copies": copies, "tokens_per_copy": tokens,
            "files": {k: [str(p), d, nnz, tok] for k, (p, d, nnz, tok) in files.items()}}
    meta.write_text(json.dumps(info))
    return info


def _child_corpus(cfg):
    """StochasticEMLDA on the docword file loaded into memory, or memoized SparseLDA on the
    file streamed from disk; the time of every pass."""
    import warnings

    import scipy.sparse as sp

    from sparseclust import SparseLDA, StochasticEMLDA
    from sparseclust.datasets import stream_npz, stream_uci_bow

    if cfg.get("workers"):
        return _child_corpus_dask(cfg)
    marks = []

    def mark(info):
        marks.append((time.process_time(), time.perf_counter()))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if cfg["model"] == "corpus-sem":
            X = sp.vstack(list(stream_uci_bow(cfg["docword"], batch_size=50000)), format="csr")
            est = StochasticEMLDA(n_components=cfg["K"], max_iter=cfg["passes"], tol=0,
                                  random_state=0, n_threads=cfg["threads"], sweep_blocks=1)
            _reset_peak()
            base = _rss_mb()
            c0, w0 = time.process_time(), time.perf_counter()
            est.fit(X, callback=mark)
        else:
            stream = (stream_npz(cfg["saved"]) if cfg.get("saved") else
                      stream_uci_bow(cfg["docword"], batch_size=cfg["batch_size"]))
            memo = tempfile.mkdtemp(prefix="memo-", dir=CACHE) if cfg["memo"] == "disk" else None
            est = SparseLDA(n_components=cfg["K"], max_iter=cfg["passes"], tol=0,
                            random_state=0, n_threads=cfg["threads"], memo_dir=memo)
            _reset_peak()
            base = _rss_mb()
            c0, w0 = time.process_time(), time.perf_counter()
            est.fit(stream, callback=mark)
            if memo is not None:
                os.rmdir(memo)  # the fit removed its files
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    points = [(c0, w0), *marks]
    pass_cpu = [b[0] - a[0] for a, b in zip(points[:-1], points[1:], strict=True)]
    pass_wall = [b[1] - a[1] for a, b in zip(points[:-1], points[1:], strict=True)]
    _emit(dict(peak_rss_mb=_rss_mb("VmHWM"), base_rss_mb=base, cpu_s=cpu, wall_s=wall,
               passes=len(marks), pass_cpu_s=pass_cpu, pass_wall_s=pass_wall,
               **_pass_rates(cfg["n_tokens"], pass_wall, pass_cpu)))


def _pass_rates(n_tokens, pass_wall, pass_cpu=None):
    """Tokens per second (and per CPU second) of the median pass from the second on (the
    first holds the initialisation), or of the only pass."""
    later = slice(1, None) if len(pass_wall) > 1 else slice(None)
    out = dict(tokens_per_s=n_tokens / float(np.median(pass_wall[later])))
    if pass_cpu is not None:
        out["tokens_per_cpu_s"] = n_tokens / float(np.median(pass_cpu[later]))
    return out


def _child_corpus_dask(cfg):
    """StochasticEMLDA on a Dask ``LocalCluster`` of ``workers`` single-threaded worker
    processes: the docword file loaded on the client, cut into ``partitions`` row blocks and
    persisted on the workers before the clock starts; the time of every sweep from the fit's
    trace (no callback: a callback receives the counts, which the client then fetches every
    sweep)."""
    import warnings

    import dask.array as da
    import scipy.sparse as sp
    from distributed import Client, LocalCluster, wait

    from sparseclust import StochasticEMLDA
    from sparseclust.datasets import stream_uci_bow

    X = sp.vstack(list(stream_uci_bow(cfg["docword"], batch_size=50000)), format="csr")
    edges = np.linspace(0, X.shape[0], cfg["partitions"] + 1).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with LocalCluster(n_workers=cfg["workers"], threads_per_worker=1, processes=True,
                          dashboard_address=None, memory_limit=0) as cluster, \
                Client(cluster) as client:
            Xd = da.concatenate([da.from_array(X[a:b], chunks=(b - a, X.shape[1]),
                                               asarray=False)
                                 for a, b in zip(edges[:-1], edges[1:], strict=True)])
            del X
            Xd = Xd.persist()
            wait(Xd)
            est = StochasticEMLDA(n_components=cfg["K"], max_iter=cfg["passes"], tol=0,
                                  random_state=0, n_threads=1, sweep_blocks=1)
            c0, w0 = time.process_time(), time.perf_counter()
            est.fit(Xd)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            rss = sum(w["metrics"]["memory"] for w in
                      client.scheduler_info()["workers"].values()) / 2**20
    pass_wall = [float(t["time"]) for t in est.trace_]
    _emit(dict(client_cpu_s=cpu, wall_s=wall, passes=len(est.trace_), pass_wall_s=pass_wall,
               workers_rss_mb=rss, **_pass_rates(cfg["n_tokens"], pass_wall)))


def _saved_stream(path, batch_size, log):
    """The docword file's memoized minibatches of ``batch_size`` documents saved as binary
    (``CorpusStream.save``) into the cache, anew in every run (the files and the save's cost
    are this commit's); returns (directory, the save's CPU and wall seconds)."""
    from sparseclust.datasets import stream_uci_bow

    folder = CACHE / f"saved.{Path(path).name}.bs{batch_size}"
    if folder.exists():
        shutil.rmtree(folder)
    log(f"  saving {path} as binary minibatches of {batch_size} documents to {folder}")
    c0, w0 = time.process_time(), time.perf_counter()
    stream_uci_bow(path, batch_size=batch_size).save(folder)
    return str(folder), dict(save_cpu_s=time.process_time() - c0,
                             save_wall_s=time.perf_counter() - w0)


def _in_turns(configs, repeats, fields, label, log):
    """Run every configuration of ``configs`` ((thread or worker count, configuration)
    pairs) ``repeats`` times, the configurations taking turns within each repeat, so that a
    slow spell of the machine falls on both sides of a ratio. Returns the records, each with
    ``fields`` and its repeat."""
    records = []
    for repeat in range(repeats):
        for count, cfg in configs:
            rec = {**cfg, **_run_child(cfg), **fields, "repeat": repeat}
            peak = f", peak {rec['peak_rss_mb']:.0f} MB" if "peak_rss_mb" in rec else ""
            log(f"  {label}={count} repeat {repeat}: "
                f"{rec['tokens_per_s'] / 1e6:.3f}M tokens/s{peak}")
            records.append(rec)
    return records


def _run_corpus100m(params, log):
    info = _repeated_corpus(params, log)
    records, saved_streams = [], {}
    repeats = params.get("repeats", 1)
    for model, mp in params["models"].items():
        mp = dict(mp)
        threads_of = mp.pop("threads", params["threads"])
        if "n_batches" in mp:
            # memoized SparseLDA: minibatches of the same size at both sizes, n_batches of
            # them in the quarter (four times as many in the whole corpus)
            batch_size = math.ceil(info["files"]["quarter"][1] / mp["n_batches"])
        for size in ("quarter", "full"):
            path, n_docs, nnz, n_tokens = info["files"][size]
            extra = {}
            if model.startswith("sparselda"):
                extra["batch_size"] = batch_size
            if model.startswith("sparselda-saved"):
                key = (path, batch_size)
                if key not in saved_streams:
                    saved_streams[key] = _saved_stream(path, batch_size, log)
                saved, cost = saved_streams[key]
                extra.update(saved=saved, **cost)
            configs = [(t, dict(model=f"corpus-{model}", docword=path, n_docs=n_docs,
                                n_tokens=n_tokens, threads=t, **mp, **extra))
                       for t in threads_of]
            records += _in_turns(configs, repeats, dict(size=size, nnz=nnz, model=model),
                                 f"{model} {size} ({n_tokens / 1e6:.1f}M tokens) threads",
                                 log)
    dk = params.get("dask")
    if dk:
        for size in ("quarter", "full"):
            path, n_docs, nnz, n_tokens = info["files"][size]
            configs = [(w, dict(model=f"corpus-{dk['model']}", docword=path, n_docs=n_docs,
                                n_tokens=n_tokens, threads=1, workers=w,
                                partitions=dk["partitions"], **params["models"][dk["model"]]))
                       for w in dk["workers"]]
            records += _in_turns(configs, repeats,
                                 dict(size=size, nnz=nnz, model=f"{dk['model']}-dask"),
                                 f"{dk['model']} on Dask, {size} ({n_tokens / 1e6:.1f}M "
                                 "tokens) workers", log)
    return {"data": f"{params['corpus']} counts repeated {info['copies']} times "
                    f"({info['tokens_per_copy'] / 1e6:.2f}M tokens each), documents "
                    "reshuffled: a repetition, measuring throughput and memory, not quality",
            "copies": info["copies"], "records": records}


# --------------------------------------------------------------------------------- child


def child(cfg):
    """One configuration in this process; prints its measurements as one JSON line."""
    if cfg["model"] == "sgmm":
        return _child_sgmm(cfg)
    if cfg["model"] == "sklearn":
        return _child_sklearn(cfg)
    if cfg["model"].startswith("corpus-"):
        return _child_corpus(cfg)
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
                                  random_state=0, n_threads=cfg["threads"], sweep_blocks=1)
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

    if part.startswith("patches"):
        return _run_patches(params, log)
    if part == "corpus100m":
        return _run_corpus100m(params, log)
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


def _time_to(curve, target):
    """CPU seconds of the first pass whose held-out score reaches ``target``, or None."""
    return next((c["cpu_s"] for c in curve if c["heldout"] >= target), None)


def _patch_target(records, K, algorithm):
    """The best held-out score of the L = K run of ``algorithm`` at K, less 0.1% of its
    magnitude."""
    best = [max(c["heldout"] for c in r["curve"]) for r in records
            if r.get("method") == "sgmm" and r["K"] == K and r["L"] == "K"
            and r["algorithm"] == algorithm]
    if not best:
        return None
    return max(best) - 1e-3 * abs(max(best))


#: the passes whose held-out score the page lists (all are in the result file)
CURVE_PASSES = (1, 5, 10, 30)


def _budgets(recs):
    """The CPU budgets of the fits, by K: 'K = 200: 1,200 s; K = 800: 4,500 s memoized,
    1,200 s stochastic'."""
    out = []
    for K in sorted({x["K"] for x in recs}):
        by = {x["algorithm"]: x["budget"] for x in recs if x["K"] == K}
        if len(set(by.values())) == 1:
            out.append(f"K = {K}: {next(iter(by.values())):,} s")
        else:
            out.append(f"K = {K}: " + ", ".join(f"{b:,} s {a}" for a, b in sorted(by.items())))
    return "; ".join(out)


def _latest_patch_records(parts):
    """The records of every patch part, each configuration (K, training, L) from the newest
    part that ran it (a rerun replaces the older fit); the parts that still contribute."""
    recs = [dict(x, part=r["part"], date=r["date"],
                 budget=dict(zip(r["parameters"]["K"], r["parameters"]["cpu_budget_s"],
                                 strict=True))[x["K"]])
            for r in parts for x in r["records"]]
    newest = {}
    for x in recs:
        if x["method"] == "sgmm":
            key = (x["K"], x["algorithm"], x["L"])
            if key not in newest or x["date"] > newest[key]["date"]:
                newest[key] = x
    recs = [x for x in recs if x["method"] != "sgmm"
            or newest[(x["K"], x["algorithm"], x["L"])] is x]
    used = {x["part"] for x in recs}
    return recs, [r for r in parts if r["part"] in used]


def _patches_table(parts):
    """One table over every patch part (they share the patches and the protocol; a
    configuration run again shows its newest fit), the scikit-learn subsamples last; then
    each fit's held-out curve."""
    recs, parts = _latest_patch_records(parts)
    ours = sorted((x for x in recs if x["method"] == "sgmm"),
                  key=lambda x: (x["K"], x["algorithm"] != "memoized", x["L"] == "K",
                                 0 if x["L"] == "K" else x["L"]))
    datas = sorted({r["data"] for r in parts})
    commits = ", ".join(f"{r['part'].removeprefix('patches-')} `{r['commit']}`"
                        for r in parts)
    lines = [f"**The patch parts** (commits: {commits}): {'; '.join(datas)}.",
             "", f"Each fit runs until its CPU budget ({_budgets(ours)}) or "
             f"{max(r['parameters']['max_passes'] for r in parts)} passes. The L = K best is "
             "that of the same training and K.", "",
             "| K | training | L | passes | CPU s | held-out (last) | "
             "CPU s to the L = K best − 0.1% | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|"]
    for x in ours:
        target = _patch_target(recs, x["K"], x["algorithm"])
        hits = _time_to(x["curve"], target) if target is not None else None
        lines.append(
            f"| {x['K']} | {x['algorithm']} | {x['L']} | {x['passes']} | "
            f"{x['cpu_s']:,.0f} | {x['curve'][-1]['heldout']:.3f} | {fmt(hits, 0)} | "
            f"{x['peak_rss_mb']:.0f} |")
    for x in recs:
        if x["method"] == "sklearn":
            lines.append(
                f"| {x['K']} | scikit-learn, {x['n_fit']:,} patches"
                f"{'' if x['within_budget'] else ' (over the time)'} | – | "
                f"{x['n_iter']} | {x['cpu_s']:,.0f} | {x['heldout']:.3f} | – | "
                f"{x['peak_rss_mb']:.0f} |")
    lines += ["", "Held-out log-likelihood per patch after passes "
              f"{', '.join(map(str, CURVE_PASSES))} and the last (pass: score (CPU s)):", ""]
    for x in ours:
        last = x["curve"][-1]["passes"]
        pts = "; ".join(f"{c['passes']}: {c['heldout']:.2f} ({c['cpu_s']:.0f} s)"
                        for c in x["curve"]
                        if c["passes"] in CURVE_PASSES or c["passes"] == last)
        lines.append(f"- K = {x['K']}, {x['algorithm']}, L = {x['L']}: {pts}")
    return lines + [""]


def _which(r):
    """The passes a corpus100m result's rates come from (the median of them)."""
    n = max(x["passes"] for x in r["records"])
    return f"passes 2–{n}" if n > 2 else "pass 2" if n == 2 else "pass 1"


def _summary(runs, one=None):
    """One configuration's runs (its repeats) as medians: tokens per second and per CPU
    second, the worst peak RSS, and against ``one`` (the runs with one thread or worker) the
    median of the ratios of the runs of the same repeat."""
    out = dict(runs[0], repeats=len(runs))
    for k in ("tokens_per_s", "tokens_per_cpu_s", "base_rss_mb"):
        if k in runs[0]:
            out[k] = median([x[k] for x in runs])
    for k in ("peak_rss_mb", "workers_rss_mb"):
        if k in runs[0]:
            out[k] = max(x[k] for x in runs)
    if one:
        base = {x.get("repeat", 0): x["tokens_per_s"] for x in one}
        out["ratio"] = median([x["tokens_per_s"] / base[x.get("repeat", 0)]
                               for x in runs if x.get("repeat", 0) in base])
    return out


def _corpus_rows(r, dask):
    """The summaries of a corpus100m result's configurations, in the order they ran."""
    key = "workers" if dask else "threads"
    groups = {}
    for x in r["records"]:
        if x["model"].endswith("-dask") == dask:
            groups.setdefault((x["model"], x["size"], x[key]), []).append(x)
    return [_summary(runs, groups.get((model, size, 1)))
            for (model, size, _), runs in groups.items()]


def _corpus_table(r):
    lines = [f"**{r['part']}** (commit `{r['commit']}`, rates of {_which(r)}): {r['data']}.",
             "", "| model | K | documents | tokens | batches | threads | M tokens/s | "
             "× 1 thread | M tokens per CPU s | peak RSS MB | "
             "RSS before training MB | peak RSS bytes per token |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for x in _corpus_rows(r, dask=False):
        name = {"sem": "StochasticEMLDA (in memory)",
                "sparselda": "SparseLDA, gzip text",
                "sparselda-saved": "SparseLDA, saved binary",
                "sparselda-saved-memory": "SparseLDA, saved binary"}[x["model"]]
        if x.get("memo"):
            name += ", statistics " + ("on disk" if x["memo"] == "disk" else "in memory")
        batches = (math.ceil(x["n_docs"] / x["batch_size"]) if x.get("batch_size")
                   else x.get("n_batches", "–"))
        lines.append(f"| {name} | {x['K']} | {x['n_docs']:,} | {x['n_tokens']:,.0f} | "
                     f"{batches} | "
                     f"{x['threads']} | {x['tokens_per_s'] / 1e6:.3f} | {fmt(x.get('ratio'))} | "
                     f"{x['tokens_per_cpu_s'] / 1e6:.3f} | "
                     f"{x['peak_rss_mb']:.0f} | {x['base_rss_mb']:.0f} | "
                     f"{x['peak_rss_mb'] * 2**20 / x['n_tokens']:.1f} |")
    saved = [x for x in r["records"] if x.get("save_cpu_s") is not None and x["threads"] == 1
             and x["model"] == "sparselda-saved" and x.get("repeat", 0) == 0]
    if saved:
        lines += ["", "Saving the binary minibatches (once, before the fits): " + "; ".join(
            f"{x['n_tokens'] / 1e6:.1f}M tokens {x['save_cpu_s']:.1f} CPU s" for x in saved)
            + "."]
    dask = _corpus_rows(r, dask=True)
    if dask:
        lines += ["", "StochasticEMLDA on a Dask `LocalCluster` of single-threaded worker "
                  "processes (the same machine), the corpus persisted on the workers in "
                  f"{dask[0]['partitions']} row blocks:", "",
                  "| K | documents | tokens | workers | M tokens/s | "
                  "× one worker | workers' RSS after the fit MB |",
                  "|---|---|---|---|---|---|---|"]
        for x in dask:
            lines.append(f"| {x['K']} | {x['n_docs']:,} | {x['n_tokens']:,.0f} | "
                         f"{x['workers']} | {x['tokens_per_s'] / 1e6:.3f} | "
                         f"{fmt(x.get('ratio'))} | {x['workers_rss_mb']:.0f} |")
    return lines + [""]


def table(results):
    lines = []
    patches = sorted((r for r in results if r["part"].startswith("patches")),
                     key=lambda r: r["part"])
    for r in results:
        if r["part"].startswith("patches"):
            continue
        if r["part"] == "corpus100m":
            lines += _corpus_table(r)
            continue
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
    if patches:
        lines += _patches_table(patches)
    return "\n".join(lines)


def _patches_headline(r):
    rows, recs = [], r["records"]
    for K in sorted({x["K"] for x in recs}):
        target = _patch_target(recs, K, "memoized")
        four = next((x for x in recs if x["K"] == K and x.get("L") == 4
                     and x.get("algorithm") == "memoized"), None)
        dense = next((x for x in recs if x["K"] == K and x.get("L") == "K"
                      and x.get("algorithm") == "memoized"), None)
        if target is None or four is None or dense is None:
            continue
        a, b = _time_to(four["curve"], target), _time_to(dense["curve"], target)
        if a is not None and b is not None:
            rows.append(dict(
                ours=f"SparseGaussianMixture memoized, L = 4, K = {K}, streamed",
                peer="the same, L = K", data=f"BSDS500, {r['n_train'] / 1e6:.2f}M patches",
                metric="CPU s to the best L = K held-out score − 0.1%",
                figure=f"{a:.0f} s", ratio=f"× {b / a:.2f} faster"))
        peer = [x for x in recs if x["method"] == "sklearn" and x["K"] == K
                and x["within_budget"]]
        if peer:
            best = max(peer, key=lambda x: x["n_fit"])
            ours = four["curve"][-1]["heldout"]
            rows.append(dict(
                ours=f"SparseGaussianMixture memoized, L = 4, K = {K}, streamed",
                peer=f"scikit-learn GaussianMixture on {best['n_fit']:,} patches (largest "
                     "in the same CPU time)",
                data=f"BSDS500, {r['n_train'] / 1e6:.2f}M patches",
                metric="held-out log-likelihood per patch",
                figure=f"{ours:.3f}", ratio=f"{ours - best['heldout']:+.3f}"))
    return rows


def _corpus_headline(r):
    rows = []
    plain = {(x["model"], x["size"], x["threads"]): x for x in _corpus_rows(r, dask=False)}
    for model in ("sem", "sparselda"):
        big, small = plain.get((model, "full", 1)), plain.get((model, "quarter", 1))
        if big and small:
            rows.append(dict(
                ours=f"{'StochasticEMLDA' if model == 'sem' else 'SparseLDA memoized, from disk'}"
                     f", K = {big['K']}, 1 thread",
                peer=f"the same on a quarter ({small['n_tokens'] / 1e6:.0f}M tokens)",
                data=f"{r['parameters']['corpus']} ×{r['copies']} (a repetition), "
                     f"{big['n_tokens'] / 1e6:.0f}M tokens",
                metric="tokens per second; peak RSS",
                figure=f"{big['tokens_per_s'] / 1e6:.2f} M/s; {big['peak_rss_mb']:.0f} MB",
                ratio=f"× {big['tokens_per_s'] / small['tokens_per_s']:.2f}; "
                      f"RSS × {big['peak_rss_mb'] / small['peak_rss_mb']:.2f}"))
    two = next((x for x in _corpus_rows(r, dask=True)
                if x["size"] == "full" and x["workers"] == 2 and x.get("ratio")), None)
    if two:
        rows.append(dict(
            ours=f"StochasticEMLDA, K = {two['K']}, Dask, 2 single-threaded workers",
            peer="the same, 1 worker",
            data=f"{r['parameters']['corpus']} ×{r['copies']} (a repetition), "
                 f"{two['n_tokens'] / 1e6:.0f}M tokens",
            metric="tokens per second",
            figure=f"{two['tokens_per_s'] / 1e6:.2f} M/s",
            ratio=f"× {two['ratio']:.2f}"))
    return rows


def headline(results):
    rows = []
    for r in results:
        if r["part"] not in FULL:
            continue
        if r["part"].startswith("patches"):
            rows += _patches_headline(r)
            continue
        if r["part"] == "corpus100m":
            rows += _corpus_headline(r)
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
