# SPDX-License-Identifier: BSD-3-Clause
"""Initial topic-word counts of the topic models: KL k-means++ seeding followed by Bregman
(KL) k-means on the documents' word distributions (``init='kmeans++'``), and the counts of
a topic-model estimator fitted first (``init=<estimator>``). Shared by
:class:`~sparseclust.topics.SparseLDA` and :class:`~sparseclust.topics.HDPTopicModel`."""


import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from ..utils._threads import effective_n_threads, map_blocks

__all__ = ["init_counts_from_estimator"]

#: Bregman k-means iterations after the k-means++ seeding of init='kmeans++'
_KMEANS_ITERS = 20

#: products of fewer documents, or of fewer entries times columns, run on one thread in
#: :func:`_product` (where handing blocks to threads costs more than it saves)
_PRODUCT_MIN_ROWS = 4096
_PRODUCT_MIN_WORK = 1 << 25


def _product(X, B, n_threads=1):
    """``X @ B`` of the CSR counts X (D, V) and a dense B (V, m), as a (D, m) array, by
    blocks of documents with equal numbers of entries, one per thread of ``n_threads`` (the
    sparse product releases the GIL). Each row is the sum the whole product forms, in the
    same order: the threads change no bit."""
    X = sp.csr_array(X)
    B = np.ascontiguousarray(B)
    D = X.shape[0]
    n = min(effective_n_threads(n_threads), D // (_PRODUCT_MIN_ROWS // 2))
    if n <= 1 or X.nnz * B.shape[1] < _PRODUCT_MIN_WORK:
        return np.asarray(X @ B)
    out = np.empty((D, B.shape[1]))
    edges = np.searchsorted(X.indptr, np.linspace(0, X.indptr[-1], n + 1), side="right") - 1
    edges[0], edges[-1] = 0, D

    def block(ab):
        a, b = ab
        s, e = X.indptr[a], X.indptr[b]
        # the block's rows as views of X's arrays (slicing would copy them)
        rows = sp.csr_array((X.data[s:e], X.indices[s:e], X.indptr[a:b + 1] - s),
                            shape=(b - a, X.shape[1]), copy=False)
        out[a:b] = rows @ B

    map_blocks(block, zip(edges[:-1], edges[1:], strict=True), n)
    return out


def _kl_kmeanspp_seeds(X, K, tau, rng, n_threads=1):
    """Bregman (KL) k-means++ seeding on documents (Hughes & Sudderth 2016, Sec. 6).

    Documents are seeds; the first is uniform, each next one is drawn with probability
    proportional to min_j KL(p_d || q_j) over the chosen seeds j, where p_d = (x_d + tau) /
    (N_d + V tau) is the smoothed word distribution of document d (and q_j that of seed j).
    As in greedy k-means++ (Arthur & Vassilvitskii 2007), 2 + floor(log K) candidates are drawn
    at each step and the one that most reduces sum_d min_j KL(p_d || q_j) is kept.
    Returns the seed indices. The products with the documents run on ``n_threads`` threads
    (the same seeds on any number).
    """
    D, V = X.shape
    Nd = np.asarray(X.sum(axis=1)).ravel()
    Z = Nd + V * tau
    # negative entropy sum_v p_dv log p_dv of every smoothed document
    rows = np.repeat(np.arange(D), np.diff(X.indptr))
    pv = (X.data + tau) / Z[rows]
    U = np.diff(X.indptr)
    negent = np.bincount(rows, weights=pv * np.log(pv), minlength=D).astype(np.float64)
    negent += (V - U) * (tau / Z) * np.log(tau / Z)

    def divergence(cands):
        q = np.full((len(cands), V), tau)
        q += X[cands].toarray()
        logq = np.log(q / q.sum(axis=1, keepdims=True))
        cross = (_product(X, logq.T, n_threads) + tau * logq.sum(axis=1)[None, :]) / Z[:, None]
        return np.maximum(negent[:, None] - cross, 0.0)  # (D, n_cands)

    n_trials = 2 + int(np.log(K))
    seeds = [int(rng.randint(D))]
    mindiv = divergence(seeds)[:, 0]
    for _ in range(1, K):
        total = mindiv.sum()
        if total > 0 and np.isfinite(total):
            cands = rng.choice(D, size=n_trials, p=mindiv / total)
        else:  # every document coincides with a seed: draw uniformly
            cands = rng.randint(D, size=n_trials)
        div = np.minimum(mindiv[:, None], divergence(cands))
        best = int(np.argmin(div.sum(axis=0)))
        seeds.append(int(cands[best]))
        mindiv = div[:, best]
    return np.asarray(seeds)


def _kl_kmeans(X, seeds, tau, n_iter, n_threads=1):
    """Bregman (KL) k-means from seed documents: returns (K, V) cluster word counts.

    The centers are smoothed word distributions mu_k = (c_k + tau) / (C_k + V tau) of the
    cluster's summed counts c_k. Each iteration assigns every document to the center that
    minimizes KL(x_d / N_d || mu_k), i.e. maximizes sum_v x_dv log mu_kv -- hard-assignment EM
    for a mixture of multinomials -- and recomputes the centers, until no assignment changes.
    Empty clusters keep their previous counts.

    The document's own distribution is *not* smoothed here: with tau * V much larger than a
    typical document length, a smoothed p_d is mostly prior mass, the assignment is then
    decided by sum_v log mu_kv (a property of the center alone, not of the document) and
    the iteration piles most documents into a few broad clusters.

    The assignments' products with the documents run on ``n_threads`` threads (the same
    clusters on any number).
    """
    D, V = X.shape
    counts = X[seeds].toarray()
    z_old = None
    for _ in range(n_iter):
        logmu = np.log(counts + tau) - np.log((counts + tau).sum(axis=1, keepdims=True))
        z = np.argmax(_product(X, logmu.T, n_threads), axis=1)
        if z_old is not None and np.array_equal(z, z_old):
            break
        R = sp.csr_array((np.ones(D), (z, np.arange(D))), shape=(counts.shape[0], D))
        new = np.asarray((R @ X).toarray())
        empty = new.sum(axis=1) == 0
        new[empty] = counts[empty]
        counts, z_old = new, z
    return counts


def init_counts_from_estimator(estimator, X, K, alpha, tau, n_threads, rng, whom="SparseLDA"):
    """Initial topic-word counts S (K, V) from another topic model fitted on X: a clone of
    ``estimator`` with this model's number of topics and priors, S = its ``components_``
    minus its topic-word prior (e.g. the Rao-Blackwellized counts of
    :class:`StochasticEMLDA`'s last sweep). A clone without a ``random_state`` gets one drawn
    from ``rng``, without ``n_threads`` this model's; ``estimator`` itself is not fitted."""
    params = estimator.get_params(deep=False)
    missing = [p for p in ("n_components", "doc_topic_prior", "topic_word_prior")
               if p not in params]
    if missing:
        raise TypeError(
            f"{whom} init={type(estimator).__name__}(...) needs a topic model with the "
            f"parameters n_components, doc_topic_prior and topic_word_prior (e.g. "
            f"StochasticEMLDA); it lacks {', '.join(missing)}.")
    if params["n_components"] != K:
        raise ValueError(
            f"{whom} init={type(estimator).__name__}(n_components="
            f"{params['n_components']!r}) must have n_components={K}, the number of topics "
            f"of the {whom}.")
    est = clone(estimator)
    est.set_params(doc_topic_prior=alpha, topic_word_prior=tau)
    if "random_state" in params and params["random_state"] is None:
        est.set_params(random_state=int(rng.randint(2**31)))
    if "n_threads" in params and params["n_threads"] is None:
        est.set_params(n_threads=n_threads)
    est.fit(X)
    lam = np.asarray(est.components_, dtype=np.float64)
    if lam.shape != (K, X.shape[1]) or not np.all(np.isfinite(lam)):
        raise ValueError(f"{whom} init={type(estimator).__name__}(...) gave components_ of shape "
                         f"{lam.shape} (or not finite); expected ({K}, {X.shape[1]}).")
    return np.ascontiguousarray(np.maximum(lam - tau, 0.0))
