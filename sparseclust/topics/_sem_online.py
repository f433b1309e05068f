# SPDX-License-Identifier: BSD-3-Clause
"""Online stochastic EM for LDA (``StochasticEMLDA(algorithm='online')`` and ``partial_fit``)
as a model of the training engine's stochastic algorithm (:func:`sparseclust._engine.fit_engine`,
:func:`~sparseclust._engine.stochastic_step`): the engine draws the minibatches (a new
permutation every pass), the step sizes rho_t = min(1, (delta + t)^-kappa) and the
convergence test; this module supplies the minibatch counts (the local step) and the topics
of the blended counts (the global step)."""

import numpy as np
from scipy.special import gammaln

from .._engine import SuffStats, VariationalModel
from .._kernels import _tokens
from ..utils._threads import threads_for_work
from ._sem_sampler import _MIN_WORK_PER_THREAD, _RaoBlackwell, _seed, _z_dtype, token_layout

__all__ = ["OnlineSEMModel", "minibatch_counts"]


def minibatch_counts(smp, X, seed, step, *, beta, n_fold_in, rao_blackwell, update_topics):
    """Word-topic counts (V, K) of the minibatch X averaged over the saved sweeps (the last
    ``n_fold_in - n_fold_in // 2`` of ``n_fold_in``), and its number of tokens.

    With ``update_topics`` the topics are the minibatch's own counts, refreshed every sweep
    (stochastic EM on X from a uniform start, ``beta`` the topic-word prior); otherwise they
    stay at ``smp``'s weights (fold-in). With ``rao_blackwell`` a saved sweep contributes its
    assignments' collapsed conditionals instead of their counts. Document d draws from the
    stream keyed by (``seed``, sweep, d), the sweeps numbered from ``step`` * 2^20.
    """
    D, V = X.shape
    K = smp.K
    lay = token_layout(X)
    keys = np.arange(D, dtype=np.uint64)
    z = np.empty(int(lay.tokptr[-1]), dtype=_z_dtype(K))
    sweep0 = np.uint64(step) << np.uint64(20)
    nt = threads_for_work(smp.n_threads, z.size, _MIN_WORK_PER_THREAD)
    _tokens.random_assign(lay.tokptr, z, keys, seed ^ int(sweep0), K, nt)
    n_burn = n_fold_in // 2
    n_save = n_fold_in - n_burn
    if update_topics:
        W = np.zeros((V, K), np.int32)
        _tokens.count_words(lay.indptr, lay.indices, lay.cnt, lay.tokptr, z, W, nt)
        acc = np.zeros((V, K))
        word_totals = W.sum(axis=1, dtype=np.int64)
        W_next = np.empty_like(W)
        for s in range(n_fold_in):
            # W is the read buffer of the sweep, W_next its write buffer
            smp.set_weights_from_counts(W, beta, word_totals)
            smp.build_tables()
            W_next.fill(0)
            smp.sweep(lay, z, keys, seed, int(sweep0) + s + 1, Wout=W_next)
            W, W_next = W_next, W
            if s >= n_burn:
                acc += W if not rao_blackwell else _RaoBlackwell(
                    K, beta, smp.alpha, smp.n_threads, W=W).sum(lay, [z])
        return acc / n_save, int(lay.tokptr[-1])
    smp.build_tables()
    if rao_blackwell:
        zs = []
        for s in range(n_fold_in):
            smp.sweep(lay, z, keys, seed, int(sweep0) + s + 1)
            if s >= n_burn:
                zs.append(z.copy())  # a minibatch's assignments: small
        R = _RaoBlackwell(K, beta, smp.alpha, smp.n_threads, w=smp.w).sum(lay, zs)
        return R / n_save, int(lay.tokptr[-1])
    W = np.zeros((V, K), np.int32)
    smp.sweep(lay, z, keys, seed, int(sweep0) + 1, n_inner=n_fold_in, n_burn=n_burn, Wout=W)
    return W / n_save, int(lay.tokptr[-1])


class OnlineSEMModel(VariationalModel):
    """Online stochastic EM (Zaheer & Kottur, App. E) for the engine's stochastic steps.

    Statistics: ``SuffStats(W=...)``, the blended word-topic counts W~ (V, K) float64, None
    before the first minibatch. Parameters: the topics w_vk = (W~_vk + beta) / (T~_k +
    V beta), None while there are none. A step's local statistics are the minibatch's counts
    W_B with the topics fixed at w (:func:`minibatch_counts`), blended as

        W~ <- (1 - rho_t) W~ + rho_t (n_total / |B|) W_B;

    the first minibatch of a model without topics starts them: stochastic EM on it from
    uniform assignments, W~ = (n_total / |B|) W_B (a step of size 1).

    The objective (``elbo``) is the topic-word part of the collapsed log joint of the
    blended counts, sum_k [log Gamma(V beta) - log Gamma(T~_k + V beta) + sum_v (log
    Gamma(W~_vk + beta) - log Gamma(beta))]: it settles as the topics do.

    ``sampler`` is the estimator's :class:`~sparseclust.topics._sem_sampler._Sampler` (its
    ``K``, ``alpha`` and threads), ``beta`` the topic-word prior; ``rng`` draws a seed per
    minibatch; ``step`` is the number of minibatch steps taken before (their sweep numbers).
    """

    def __init__(self, sampler, beta, rng, step, *, n_fold_in, rao_blackwell):
        self.smp, self.beta, self.rng, self.step = sampler, float(beta), rng, int(step)
        self.n_fold_in, self.rao_blackwell = int(n_fold_in), bool(rao_blackwell)
        self.counters = {"tokens": 0}

    def local_step(self, X, params):
        seed = _seed(self.rng)
        if params is not None:
            self.smp.set_weights(params)
        WB, n_tok = minibatch_counts(self.smp, X, seed, self.step, beta=self.beta,
                                     n_fold_in=self.n_fold_in,
                                     rao_blackwell=self.rao_blackwell,
                                     update_topics=params is None)
        self.step += 1
        self.counters["tokens"] += n_tok
        return SuffStats(W=WB)

    def global_step(self, stats):
        if stats is None:
            return None
        W = stats["W"]
        V = W.shape[0]
        return (W + self.beta) / (W.sum(axis=0) + V * self.beta)

    def initial_params(self, init_stats):
        return self.global_step(init_stats)

    def stochastic_update(self, state, batch_stats, rho, scale):
        if state.stats is None:  # the first minibatch starts the topics: a step of size 1
            state.stats = batch_stats * scale
            state.rho = 1.0
        else:
            state.stats = (1.0 - rho) * state.stats + batch_stats * (rho * scale)
        return self.global_step(state.stats)

    def elbo(self, stats, params):
        W = stats["W"]
        V, K = W.shape
        beta = self.beta
        return float(K * gammaln(V * beta) - gammaln(W.sum(axis=0) + V * beta).sum()
                     + (gammaln(W + beta) - gammaln(beta)).sum())
