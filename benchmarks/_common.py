# SPDX-License-Identifier: BSD-3-Clause
"""Shared helpers of the benchmarks: corpora read straight from the shared tarballs, timing, JSON.

The corpora live in ``../shared/data`` (never copied into the repository); the archives are
read with :mod:`tarfile` member by member, without unpacking them to disk.
"""

import json
import os
import platform
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
SHARED_DATA = Path(
    os.environ.get("SPARSECLUST_SHARED_DATA", ROOT / ".." / "shared" / "data")
).resolve()

__all__ = [
    "RESULTS",
    "SHARED_DATA",
    "Stopwatch",
    "environment",
    "imdb_heldout_split",
    "load_20newsgroups",
    "load_imdb",
    "median_time",
    "strip_newsgroup_header",
    "vectorize",
    "write_json",
]


# ---------------------------------------------------------------------------------------
# corpora


def strip_newsgroup_header(text):
    """Drop a Usenet post's header block: everything up to the first blank line."""
    head, sep, body = text.partition("\n\n")
    return body if sep else text


def load_20newsgroups(subset="train", remove_headers=True, path=None):
    """20 Newsgroups "bydate" posts from ``20news-bydate.tar.gz``.

    Parameters
    ----------
    subset : {'train', 'test'}
    remove_headers : bool, default=True
        Drop each post's header block (From:, Subject:, Organization:, Lines:, ... up to the
        first blank line), which otherwise fills topics with e-mail addresses and host names.
        Quoted replies and signatures are kept.
    path : path-like or None
        The archive; default ``<shared data>/20newsgroups/20news-bydate.tar.gz``.

    Returns
    -------
    texts : list of str
        Posts decoded as latin-1, in (group, file name) order.
    labels : ndarray of int
        Newsgroup index of each post (groups sorted by name).
    groups : list of str
    """
    if subset not in ("train", "test"):
        raise ValueError(f"subset must be 'train' or 'test', got {subset!r}")
    path = (
        Path(path) if path is not None else SHARED_DATA / "20newsgroups" / "20news-bydate.tar.gz"
    )
    prefix = f"20news-bydate-{subset}/"
    docs = []
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            if not member.isfile() or not member.name.startswith(prefix):
                continue
            parts = member.name[len(prefix) :].split("/")
            if len(parts) != 2:
                continue
            text = tar.extractfile(member).read().decode("latin-1")
            if remove_headers:
                text = strip_newsgroup_header(text)
            docs.append((parts[0], parts[1], text))
    docs.sort(key=lambda t: (t[0], int(t[1]) if t[1].isdigit() else t[1]))
    groups = sorted({g for g, _, _ in docs})
    index = {g: i for i, g in enumerate(groups)}
    texts = [t for _, _, t in docs]
    labels = np.array([index[g] for g, _, _ in docs], dtype=np.int64)
    return texts, labels, groups


_IMDB_NAME = re.compile(r"^aclImdb/(train|test)/(pos|neg|unsup)/(\d+)_(\d+)\.txt$")


def load_imdb(subsets=("train", "test", "unsup"), path=None):
    """Large Movie Review Dataset reviews from ``aclImdb_v1_text.tar.gz``.

    Parameters
    ----------
    subsets : iterable of {'train', 'test', 'unsup'}
        ``'unsup'`` is the 50,000 unlabelled reviews (stored under ``train/unsup``).
    path : path-like or None
        The archive; default ``<shared data>/imdb/aclImdb_v1_text.tar.gz``.

    Returns
    -------
    texts : list of str
        Reviews with the HTML line breaks ``<br />`` replaced by spaces, ordered by
        (subset, label, id).
    ratings : ndarray of int
        Star rating from the file name (0 for unlabelled reviews).
    subset_of : ndarray of str
        'train', 'test' or 'unsup' for each review.
    """
    wanted = set(subsets)
    bad = wanted - {"train", "test", "unsup"}
    if bad:
        raise ValueError(f"unknown IMDB subsets {sorted(bad)}")
    path = Path(path) if path is not None else SHARED_DATA / "imdb" / "aclImdb_v1_text.tar.gz"
    rows = []
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            m = _IMDB_NAME.match(member.name)
            if not member.isfile() or m is None:
                continue
            split, label, ident, rating = m.groups()
            sub = "unsup" if label == "unsup" else split
            if sub not in wanted:
                continue
            text = tar.extractfile(member).read().decode("utf-8", errors="replace")
            rows.append((sub, label, int(ident), int(rating), text.replace("<br />", " ")))
    order = {"train": 0, "test": 1, "unsup": 2}
    rows.sort(key=lambda r: (order[r[0]], r[1], r[2]))
    return (
        [r[4] for r in rows],
        np.array([r[3] for r in rows], dtype=np.int64),
        np.array([r[0] for r in rows]),
    )


def vectorize(train_texts, test_texts=None, min_df=5, **kwargs):
    """CountVectorizer(stop_words='english', min_df=min_df) fitted on the training texts.

    Returns ``(X_train, X_test or None, feature_names)`` with CSR float64 counts. Test
    documents left empty by the training vocabulary are kept (they are skipped by the
    document-completion split).
    """
    from sklearn.feature_extraction.text import CountVectorizer

    vec = CountVectorizer(stop_words="english", min_df=min_df, dtype=np.float64, **kwargs)
    X_train = vec.fit_transform(train_texts).tocsr()
    X_test = vec.transform(test_texts).tocsr() if test_texts is not None else None
    return X_train, X_test, vec.get_feature_names_out()


# ---------------------------------------------------------------------------------------
# timing


def token_lists(X):
    """Each CSR row as a list of word-id strings, every id repeated by its count (the input
    format of the token-based peers, e.g. tomotopy's ``add_doc``)."""
    docs = []
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        ids = np.repeat(X.indices[lo:hi], X.data[lo:hi].astype(np.int64))
        docs.append([str(j) for j in ids])
    return docs


def newsgroups_heldout_split(seed=0, n_test=1000, n_train=None, min_df=5):
    """The 20 Newsgroups split of the held-out benchmarks (``bench_lda_heldout.py``).

    ``train`` posts shuffled once with ``RandomState(seed)`` (so online methods do not see
    the newsgroups one after another; the first ``n_train`` kept if given), vectorized by
    :func:`vectorize`; then ``n_test`` ``test`` posts drawn with the same generator.
    Returns ``(X_train, X_test, feature_names)``, CSR float64.
    """
    import scipy.sparse as sp

    train_texts, _, _ = load_20newsgroups("train")
    test_texts, _, _ = load_20newsgroups("test")
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(train_texts))
    if n_train:
        order = order[:n_train]
    train_texts = [train_texts[i] for i in order]
    X_train, X_test, vocab = vectorize(train_texts, test_texts, min_df=min_df)
    test_idx = np.sort(rng.permutation(X_test.shape[0])[:n_test])
    return sp.csr_matrix(X_train), X_test[test_idx], vocab


def imdb_heldout_split(seed=0, n_test=1000, n_train=None, min_df=5):
    """The IMDB split of the held-out benchmarks, built like
    :func:`newsgroups_heldout_split`: the 25,000 ``train`` reviews shuffled once with
    ``RandomState(seed)`` (the first ``n_train`` kept if given) and vectorized by
    :func:`vectorize`, then ``n_test`` ``test`` reviews drawn with the same generator.
    Returns ``(X_train, X_test, feature_names)``, CSR float64.
    """
    import scipy.sparse as sp

    train_texts, _, _ = load_imdb(("train",))
    test_texts, _, _ = load_imdb(("test",))
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(train_texts))
    if n_train:
        order = order[:n_train]
    train_texts = [train_texts[i] for i in order]
    test_idx = np.sort(rng.permutation(len(test_texts))[:n_test])
    X_train, X_test, vocab = vectorize(train_texts, [test_texts[i] for i in test_idx],
                                       min_df=min_df)
    return sp.csr_matrix(X_train), X_test, vocab


class Stopwatch:
    """Clock that can be paused, e.g. while a held-out score is computed.

    ``clock`` is the time source: :func:`time.perf_counter` (wall clock, the default) or
    :func:`time.process_time` (CPU time of this process, which a loaded machine disturbs far
    less for single-threaded work).

    >>> sw = Stopwatch(); ...; sw.pause(); score(); sw.resume(); sw.elapsed
    """

    def __init__(self, start=True, clock=time.perf_counter):
        self._clock = clock
        self._elapsed = 0.0
        self._t0 = clock() if start else None

    def pause(self):
        if self._t0 is not None:
            self._elapsed += self._clock() - self._t0
            self._t0 = None
        return self._elapsed

    def resume(self):
        if self._t0 is None:
            self._t0 = self._clock()

    @property
    def running(self):
        return self._t0 is not None

    @property
    def elapsed(self):
        extra = self._clock() - self._t0 if self._t0 is not None else 0.0
        return self._elapsed + extra


def median_time(fn, repeats=3, warmup=0):
    """Median wall-clock seconds of ``fn()`` over ``repeats`` calls (after ``warmup`` calls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


# ---------------------------------------------------------------------------------------
# results


def environment():
    """Machine, library versions and the repository commit, recorded with every result."""
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    try:
        info["cpus_available"] = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        pass
    # the processor and the BLAS kernel it selected: CPU seconds belong to them, and so does
    # the rounding (which decides, e.g., which moves a fit accepts)
    info["cpu"] = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            lines = fh.read().splitlines()
        info["cpu"] = next((ln.split(":", 1)[1].strip() for ln in lines
                            if ln.startswith("model name")), info["cpu"])
        flags = next((ln.split(":", 1)[1].split() for ln in lines
                      if ln.startswith("flags")), [])
        # the vector extensions: compiled peers pick their kernels by them. A peer's speed
        # differs between machines more than ours (tomotopy at K = 400: 2.1-2.7 sweeps per
        # CPU second in earlier runs, 1.2 on an AVX2 machine), so comparisons are within a run
        info["simd"] = sorted(f for f in flags if f.startswith(("avx", "fma", "sse4")))
    except OSError:
        pass
    tomotopy = sys.modules.get("tomotopy")
    if tomotopy is not None:  # only where a benchmark ran it
        info["tomotopy_isa"] = getattr(tomotopy, "isa", None)
    from threadpoolctl import threadpool_info

    info["blas"] = [{k: i.get(k) for k in ("internal_api", "version", "architecture")}
                    for i in threadpool_info() if i.get("user_api") == "blas"]
    from importlib import metadata

    dists = {"sklearn": "scikit-learn"}
    for mod in ("numpy", "scipy", "sklearn", "gensim", "tomotopy", "sparseclust"):
        try:
            info[mod] = metadata.version(dists.get(mod, mod))
        except metadata.PackageNotFoundError:  # missing optional peer
            info[mod] = None
    try:
        info["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # tracked files changed since that commit: the run is not that commit's code alone
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.strip()
        if dirty:
            info["commit"] += "+dirty"
    except (OSError, subprocess.CalledProcessError):
        info["commit"] = None
    return info


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def write_json(path, payload):
    """Write ``payload`` (numpy values converted; NaN/inf as null) as indented JSON."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(_jsonable(payload), fh, indent=1)
        fh.write("\n")
    return path
