# SPDX-License-Identifier: BSD-3-Clause
"""Shared helpers of the benchmarks: corpora read straight from the shared tarballs, timing, JSON.

The corpora live in ``../shared/data`` (never copied into the repository); the archives are
read with :mod:`tarfile` member by member, without unpacking them to disk.
"""

import json
import os
import platform
import re
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
CACHE = Path(__file__).resolve().parent / "cache"
SHARED_DATA = Path(
    os.environ.get("SPARSECLUST_SHARED_DATA", ROOT / ".." / "shared" / "data")
).resolve()

__all__ = [
    "RESULTS",
    "SHARED_DATA",
    "Stopwatch",
    "environment",
    "patch_split",
    "load_20newsgroups",
    "load_imdb",
    "median_time",
    "strip_newsgroup_header",
    "token_lists",
    "topic_corpus",
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


def load_imdb_films(min_reviews=5, path=None):
    """IMDB reviews concatenated per film: long documents with a large vocabulary.

    Every review of the archive (train, test and unlabelled) is assigned to its film by the
    ``urls_*.txt`` lists (line i names the film of review i); a film's reviews are joined in
    (subset, label, id) order. Films with fewer than ``min_reviews`` reviews are left out.

    Returns
    -------
    texts : list of str
        One document per film, ordered by the film's IMDB id.
    """
    path = Path(path) if path is not None else SHARED_DATA / "imdb" / "aclImdb_v1_text.tar.gz"
    urls, reviews = {}, []
    with tarfile.open(path, "r:gz") as tar:
        for member in tar:
            name = member.name
            if name.endswith(".txt") and "/urls_" in name:
                split, label = name.split("/")[1], name.rsplit("urls_", 1)[1][:-4]
                urls[split, label] = tar.extractfile(member).read().decode().split()
                continue
            m = _IMDB_NAME.match(name)
            if member.isfile() and m is not None:
                split, label, ident, _ = m.groups()
                text = tar.extractfile(member).read().decode("utf-8", errors="replace")
                reviews.append((split, label, int(ident), text.replace("<br />", " ")))
    films = {}
    for split, label, ident, text in sorted(reviews, key=lambda r: r[:3]):
        film = urls[split, label][ident].split("/")[4]  # .../title/tt0453418/usercomments
        films.setdefault(film, []).append(text)
    return [" ".join(films[f]) for f in sorted(films) if len(films[f]) >= min_reviews]


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


def topic_corpus(name, n_validation=None, n_report=None, cache=True):
    """A topic-model corpus split into fit, validation and report documents.

    The split is fixed (``RandomState(0)``), whatever the model seeds are, so every run of
    every method sees the same documents:

    * ``'20newsgroups'``: every ``train`` post is fitted (in a shuffled order); two disjoint
      random sets of ``test`` posts are the validation (``n_validation``, default 1,000) and
      the report documents (``n_report``, default 1,000). Vectorized by :func:`vectorize` on
      the fitted posts. Held-out documents come from ``test`` because ``train`` holds
      cross-posted copies and quoted replies of its own posts, which would flatter a
      validation score drawn from it.
    * ``'imdb'``: the same with the 25,000 ``train`` and ``test`` reviews (their films are
      disjoint).
    * ``'imdb-films'``: long documents, every review of a film joined
      (:func:`load_imdb_films`, films with at least 5 reviews), vocabulary ``min_df=2``;
      ``n_validation`` and ``n_report`` (default 500 each) random films held out.
    * ``'kos'``: the bundled UCI corpus (3,430 posts, already counted): 300 validation and
      300 report documents drawn at random, the rest fitted.

    Defaults are chosen on the validation documents; the results pages report the report
    documents. Returns a dict with ``fit``, ``validation``, ``report`` (CSR float64),
    ``n_tokens`` (of the fitted documents) and ``description``.
    """
    import scipy.sparse as sp

    key = f"{name}-{n_validation}-{n_report}-v2"  # v2: held-out documents from `test`
    path = CACHE / f"{key}.npz"
    if cache and path.exists():
        with np.load(path, allow_pickle=False) as z:
            parts = {k: sp.csr_matrix((z[f"{k}_data"], z[f"{k}_indices"], z[f"{k}_indptr"]),
                                      shape=tuple(z[f"{k}_shape"]))
                     for k in ("fit", "validation", "report")}
            description = str(z["description"])
    else:
        parts, description = _split_corpus(name, n_validation, n_report)
        if cache:
            CACHE.mkdir(parents=True, exist_ok=True)
            arrays = {"description": np.array(description)}
            for k, X in parts.items():
                arrays.update({f"{k}_data": X.data, f"{k}_indices": X.indices,
                               f"{k}_indptr": X.indptr, f"{k}_shape": np.array(X.shape)})
            _save_atomically(path, arrays)
    return dict(parts, n_tokens=int(parts["fit"].sum()), description=description)


def _save_atomically(path, arrays):
    """``np.savez`` to a temporary name, then rename: concurrent runs never read half a file."""
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _split_corpus(name, n_validation, n_report):
    import scipy.sparse as sp

    rng = np.random.RandomState(0)
    if name == "kos":
        from sparseclust.datasets import load_kos

        X = sp.csr_matrix(load_kos().data, dtype=np.float64)
        n_validation = n_validation or 300
        n_report = n_report or 300
        order = rng.permutation(X.shape[0])
        val, rep = order[:n_validation], order[n_validation:n_validation + n_report]
        fit = np.sort(order[n_validation + n_report:])
        parts = {"fit": X[fit], "validation": X[np.sort(val)], "report": X[np.sort(rep)]}
        return parts, (f"KOS (UCI): {len(fit)} fitted, {n_validation} validation and "
                       f"{n_report} report posts drawn at random (seed 0)")
    if name == "imdb-films":
        films = load_imdb_films()
        n_validation = n_validation or 500
        n_report = n_report or 500
        order = rng.permutation(len(films))
        n_held = n_validation + n_report
        fit_texts = [films[i] for i in order[n_held:]]
        X_fit, X_held, _ = vectorize(fit_texts, [films[i] for i in order[:n_held]], min_df=2)
        parts = {"fit": sp.csr_matrix(X_fit), "validation": sp.csr_matrix(X_held[:n_validation]),
                 "report": sp.csr_matrix(X_held[n_validation:])}
        return parts, (f"IMDB films (all reviews of a film joined, films with at least 5 "
                       f"reviews): {len(fit_texts)} fitted, {n_validation} validation and "
                       f"{n_report} report films drawn at random (seed 0); "
                       "CountVectorizer(stop_words='english', min_df=2) on the fitted films")
    if name == "20newsgroups":
        train, _, _ = load_20newsgroups("train")
        test, _, _ = load_20newsgroups("test")
        label = "20 Newsgroups posts (headers removed)"
    elif name == "imdb":
        train, _, _ = load_imdb(("train",))
        test, _, _ = load_imdb(("test",))
        label = "IMDB reviews"
    else:
        raise ValueError(f"unknown corpus {name!r}")
    n_validation = n_validation or 1000
    n_report = n_report or 1000
    fit_texts = [train[i] for i in rng.permutation(len(train))]
    held = rng.permutation(len(test))
    val_texts = [test[i] for i in np.sort(held[:n_validation])]
    rep_texts = [test[i] for i in np.sort(held[n_validation:n_validation + n_report])]
    X_fit, X_held, _ = vectorize(fit_texts, val_texts + rep_texts)
    X_val, X_rep = X_held[:n_validation], X_held[n_validation:]
    parts = {"fit": sp.csr_matrix(X_fit), "validation": sp.csr_matrix(X_val),
             "report": sp.csr_matrix(X_rep)}
    return parts, (f"{label}: the {len(fit_texts)} `train` documents fitted, "
                   f"{n_validation} `test` documents for validation and {n_report} other "
                   "`test` documents reported; CountVectorizer(stop_words='english', "
                   "min_df=5) on the fitted documents")


def patch_split(n_fit, n_validation=None, n_report=None, cache=True):
    """8x8 grayscale BSDS500 patches (stride 4, each patch's mean removed), float64.

    ``fit``: ``n_fit`` patches drawn at random from the 200 ``train`` images. The 100 ``val``
    images are split in two halves (sorted by file name): ``validation`` patches from the
    first 50 and ``report`` patches from the last 50 (``n_validation`` / ``n_report``,
    default 20,000 each). Drawn with ``random_state=0``.
    """
    from sparseclust.datasets import extract_patches, load_image_patches

    n_validation = n_validation or 20000
    n_report = n_report or 20000
    key = CACHE / f"patches-{n_fit}-{n_validation}-{n_report}.npz"
    if cache and key.exists():
        with np.load(key) as z:
            parts = {k: z[k] for k in ("fit", "validation", "report")}
    else:
        root = SHARED_DATA / "bsds500" / "images"
        fit = load_image_patches(root / "train", max_patches=n_fit, random_state=0).data
        names = sorted(p for p in (root / "val").iterdir() if p.suffix.lower() == ".jpg")
        half = len(names) // 2

        def patches(files, n):
            from PIL import Image

            imgs = [np.asarray(Image.open(f).convert("RGB")) for f in files]
            return extract_patches(imgs, max_patches=n, random_state=0)

        parts = {"fit": np.asarray(fit), "validation": patches(names[:half], n_validation),
                 "report": patches(names[half:], n_report)}
        if cache:
            CACHE.mkdir(parents=True, exist_ok=True)
            _save_atomically(key, parts)
    return dict(parts, description=(
        f"BSDS500 8x8 grayscale patches, stride 4, mean removed: {len(parts['fit'])} from the "
        f"200 train images fitted, {len(parts['validation'])} from the first 50 val images "
        f"for validation, {len(parts['report'])} from the last 50 reported"))


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
    """Machine and library versions, recorded with every result (the runner adds the commit)."""
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
    # isal: the readers' optional gzip decompressor (the fastgzip extra)
    for mod in ("numpy", "scipy", "sklearn", "gensim", "tomotopy", "isal"):
        try:
            info[mod] = metadata.version(dists.get(mod, mod))
        except metadata.PackageNotFoundError:  # missing optional peer
            info[mod] = None
    # the version of the package that ran (the runner imports it from this tree), not that of
    # whatever distribution is installed
    import sparseclust

    info["sparseclust"] = sparseclust.__version__
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
