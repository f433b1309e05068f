# SPDX-License-Identifier: BSD-3-Clause
"""Global parameters and objective terms of the HDP topic model (:mod:`._hdp_model`).

:class:`HDPParams` holds lambda, E[log phi], the sticks and the local step's prior
(:class:`LocalParams` is the part the document local step reads); :func:`stick_value` and
:func:`topic_terms` are the objective's stick and per-topic data terms, :func:`_row_parts`
and :func:`_terms_from_parts` the data terms assembled from per-topic sums over word types.
"""

import numpy as np
from scipy.special import gammaln, psi

from .._stickbreak import c_beta, expected_beta, hdp_objective
from ._local import TopicTables

#: floor on E[beta_k] in the local step's prior (late sticks can underflow to 0)
MIN_EBETA = 1e-100


def stick_value(n_docs, T, alpha, gamma, rho, omega):
    """D K log alpha + K c_B(1, gamma) + L_G(rho, omega): every term of the objective that
    involves the sticks (the surrogate bound, the stick prior and alpha E[beta] T)."""
    K = rho.size
    if K == 0:
        return float(alpha * T[-1]) if n_docs > 0 else 0.0
    x = np.concatenate([np.log(rho) - np.log1p(-rho), np.log(omega)])
    f, _ = hdp_objective(x, float(n_docs), np.asarray(T, dtype=float), alpha, gamma)
    return float(n_docs * K * np.log(alpha) + K * c_beta(1.0, gamma) - f)


def topic_terms(S, lam, Elogphi, tau):
    """Per-topic data term sum_v S_kv E[log phi_kv] + c_D(tau 1_V) - c_D(lambda_k)
    + sum_v (tau - lambda_kv) E[log phi_kv] (supplement Eq. 2)."""
    V = lam.shape[1]
    cdir_prior = gammaln(V * tau) - V * gammaln(tau)
    cdir_post = gammaln(lam.sum(axis=1)) - gammaln(lam).sum(axis=1)
    return np.sum((S + tau - lam) * Elogphi, axis=1) + cdir_prior - cdir_post


def _row_parts(S, lam, tau):
    """Per-topic sums over the given word types from which :func:`topic_terms` is assembled:
    Q_k = sum_v [(S + tau - lambda)_kv psi(lambda_kv) + log Gamma(lambda_kv)],
    E_k = sum_v (S + tau - lambda)_kv and Lambda_k = sum_v lambda_kv. Additive over word
    types, so a change confined to a few columns updates them in O(K x columns).

    Where lambda = tau + S (every entry the global step wrote) the weight S + tau - lambda
    is exactly 0, so psi is evaluated only at the other entries; the sums are the same bits
    as evaluating it everywhere.
    """
    d = S + tau - lam
    q = gammaln(lam)
    off = d != 0.0
    if off.any():
        q[off] += d[off] * psi(lam[off])
    return q.sum(axis=1), d.sum(axis=1), lam.sum(axis=1)


def _terms_from_parts(Q, E, Lam, V, tau):
    """:func:`topic_terms` from the parts of :func:`_row_parts` summed over all V word types:
    c_D(tau) - c_D(lambda_k) + sum_v (S + tau - lambda)_kv (psi(lambda_kv) - psi(Lambda_k))."""
    cdir_prior = gammaln(V * tau) - V * gammaln(tau)
    return Q - psi(Lam) * E - gammaln(Lam) + cdir_prior


class HDPParams:
    """Global parameters: lambda (K, V), E[log phi], the sticks (rho, omega) and the local
    step's prior alpha E[beta_k], remainder alpha E[beta_{K+1}] and cold start log E[beta_k]."""

    def __init__(self, lam, rho, omega, alpha, Elogphi=None, tterm=None):
        self.lam = lam
        if Elogphi is None:
            Elogphi = psi(lam) - psi(lam.sum(axis=1))[:, None]
        self.Elogphi = Elogphi
        self.rho = np.asarray(rho, dtype=np.float64)
        self.omega = np.asarray(omega, dtype=np.float64)
        self.Ebeta = expected_beta(self.rho)
        eb = np.maximum(self.Ebeta, MIN_EBETA)
        self.alpha_vec = np.ascontiguousarray(alpha * eb[:-1])
        self.alpha_rem = float(alpha * eb[-1])
        self.P0 = np.log(eb[:-1])
        self.tterm = tterm
        self._tables = None

    @property
    def K(self):
        return self.lam.shape[0]

    @property
    def tables(self):
        if self._tables is None:
            self._tables = TopicTables(self.Elogphi)
        return self._tables

    def alpha_all(self):
        return np.concatenate([self.alpha_vec, [self.alpha_rem]])

    def for_local(self):
        """What the local step reads (the E[log phi] table, the prior alpha E[beta] with its
        remainder and the cold start), without lambda: the parameters sent to the workers."""
        return LocalParams(TopicTables.from_transposed(self.tables.CT), self.alpha_vec,
                           self.alpha_rem, self.P0)


class LocalParams:
    """The part of :class:`HDPParams` the document local step reads."""

    def __init__(self, tables, alpha_vec, alpha_rem, P0):
        self.tables = tables
        self.alpha_vec = alpha_vec
        self.alpha_rem = float(alpha_rem)
        self.P0 = P0

    @property
    def K(self):
        return self.alpha_vec.shape[0]

    def alpha_all(self):
        return np.concatenate([self.alpha_vec, [self.alpha_rem]])
