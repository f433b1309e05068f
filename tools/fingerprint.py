# SPDX-License-Identifier: BSD-3-Clause
"""Fixed-seed fingerprints of every estimator and training algorithm, to hold a refactoring
to bit-identical fits.

Usage::

    python tools/fingerprint.py OUT.json              # fingerprint the installed package
    python tools/fingerprint.py OUT.json --check REF.json

Each case fits one estimator configuration on small fixed data (the bundled KOS corpus, or
Gaussian blobs drawn from a seeded generator) with ``random_state=0``, then records a SHA-256
of every fitted array attribute (names ending in ``_``; the trace, which holds timings, is
left out), of the scalar attributes, and of ``transform`` / ``score`` on a few rows. With
``--check`` the cases are compared with a reference file and every difference is printed; the
exit status is 1 if any case differs or is missing. Run it before a change that must not
alter results and after it, with the same numpy, SciPy and scikit-learn.
"""

import argparse
import hashlib
import json
import sys
import warnings

import numpy as np


def _digest(value):
    if isinstance(value, np.ndarray):
        a = np.ascontiguousarray(value)
        h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
        return h.hexdigest()[:16]
    if hasattr(value, "toarray"):  # a sparse matrix or array
        return _digest(value.toarray())
    if isinstance(value, (float, np.floating)):
        return float(value).hex()
    if isinstance(value, (bool, int, np.integer, str)):
        return str(value)
    return None


def _state(est, X):
    out = {}
    for name, value in sorted(vars(est).items()):
        if not name.endswith("_") or name.startswith("_") or name in ("trace_",):
            continue
        d = _digest(value)
        if d is None and isinstance(value, (list, tuple)) and value:
            try:
                d = _digest(np.asarray(value, dtype=float))
            except (TypeError, ValueError):
                d = None
        if d is not None:
            out[name] = d
    rows = X[:40]
    if hasattr(est, "transform"):
        out["transform(X[:40])"] = _digest(np.asarray(est.transform(rows)))
    if hasattr(est, "predict"):
        out["predict(X[:40])"] = _digest(np.asarray(est.predict(rows)))
    out["score(X[:40])"] = _digest(float(est.score(rows)))
    return out


def _corpus():
    from sparseclust.datasets import load_kos

    X = load_kos().data[:400].tocsr()
    keep = np.flatnonzero(np.asarray(X.sum(axis=0)).ravel() >= 3)
    return X[:, keep].tocsr()


def _blobs():
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=4.0, size=(5, 6))
    X = np.vstack([c + rng.normal(size=(120, 6)) for c in centres])
    return X[rng.permutation(len(X))]


def cases():
    """(name, factory, data kind, how) of every case; ``how`` is 'fit' or 'partial_fit'."""
    from sparseclust import HDPTopicModel, SparseGaussianMixture, SparseLDA, StochasticEMLDA

    out = []
    for algorithm in ("batch", "memoized", "stochastic"):
        for ct, zero_mean in (("full", False), ("full", True), ("diag", False),
                              ("spherical", False)):
            kw = dict(n_components=8, algorithm=algorithm, covariance_type=ct,
                      zero_mean=zero_mean, max_iter=8, random_state=0, n_threads=1)
            if algorithm != "batch":
                kw.update(n_batches=3, batch_size=128)
            out.append((f"gmm-{algorithm}-{ct}{'-zero_mean' if zero_mean else ''}",
                        lambda kw=kw: SparseGaussianMixture(**kw), "blobs", "fit"))
        out.append((f"gmm-dp-{algorithm}",
                    lambda a=algorithm: SparseGaussianMixture(
                        n_components=12, algorithm=a, max_iter=10, random_state=0,
                        weight_concentration_prior_type="dirichlet_process", n_threads=1),
                    "blobs", "fit"))
    out.append(("gmm-partial_fit", lambda: SparseGaussianMixture(
        n_components=6, random_state=0, total_samples=600, n_threads=1), "blobs",
        "partial_fit"))
    for algorithm in ("batch", "memoized", "stochastic"):
        for step in ("variational", "gibbs"):
            out.append((f"lda-{algorithm}-{step}", lambda a=algorithm, s=step: SparseLDA(
                n_components=12, algorithm=a, local_step=s, max_iter=6, random_state=0,
                n_threads=1), "corpus", "fit"))
    out.append(("lda-partial_fit", lambda: SparseLDA(
        n_components=12, random_state=0, total_samples=400, n_threads=1), "corpus",
        "partial_fit"))
    for algorithm in ("batch", "memoized", "stochastic"):
        out.append((f"hdp-{algorithm}", lambda a=algorithm: HDPTopicModel(
            max_components=20, algorithm=a, max_iter=6, random_state=0, n_threads=1),
            "corpus", "fit"))
    out.append(("hdp-partial_fit", lambda: HDPTopicModel(
        max_components=12, random_state=0, total_samples=400, n_threads=1), "corpus",
        "partial_fit"))
    for sampler in ("alias", "dense"):
        for doc_counts in ("live", "frozen"):
            out.append((f"sem-batch-{sampler}-{doc_counts}", lambda s=sampler, d=doc_counts:
                        StochasticEMLDA(n_components=12, sampler=s, doc_counts=d, max_iter=20,
                                        random_state=0, n_threads=1), "corpus", "fit"))
    out.append(("sem-batch-sample-estimate", lambda: StochasticEMLDA(
        n_components=12, topic_estimate="sample", max_iter=20, random_state=0, n_threads=1),
        "corpus", "fit"))
    out.append(("sem-online", lambda: StochasticEMLDA(
        n_components=12, algorithm="online", max_iter=3, random_state=0, n_threads=1),
        "corpus", "fit"))
    out.append(("sem-partial_fit", lambda: StochasticEMLDA(
        n_components=12, random_state=0, total_samples=400, n_threads=1), "corpus",
        "partial_fit"))
    return out


def fingerprint():
    data = {"corpus": _corpus(), "blobs": _blobs()}
    result = {}
    for name, make, kind, how in cases():
        X = data[kind]
        est = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if how == "fit":
                est.fit(X)
            else:
                for start in range(0, X.shape[0], 100):
                    est.partial_fit(X[start:start + 100])
            result[name] = _state(est, X)
        print(f"{name}: {len(result[name])} values", file=sys.stderr)
    return result


def compare(new, ref):
    bad = 0
    for name in sorted(set(ref) | set(new)):
        if name not in new or name not in ref:
            print(f"{name}: only in {'reference' if name in ref else 'new'}")
            bad += 1
            continue
        diff = sorted(k for k in set(ref[name]) | set(new[name])
                      if ref[name].get(k) != new[name].get(k))
        if diff:
            print(f"{name}: differs in {', '.join(diff)}")
            bad += 1
    print(f"{len(ref)} reference cases, {bad} differ" if bad else
          f"all {len(ref)} cases identical")
    return bad


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="where to write this run's fingerprints (JSON)")
    parser.add_argument("--check", metavar="REF", help="compare with a reference file")
    args = parser.parse_args(argv)
    new = fingerprint()
    with open(args.out, "w") as fh:
        json.dump(new, fh, indent=1, sort_keys=True)
    if args.check:
        with open(args.check) as fh:
            ref = json.load(fh)
        return 1 if compare(new, ref) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
