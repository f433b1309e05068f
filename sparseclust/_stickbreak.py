# SPDX-License-Identifier: BSD-3-Clause
"""Stick-breaking weights with Beta posteriors, shared by the Dirichlet-process models.

A truncated stick-breaking prior (Sethuraman 1994) draws u_k ~ Beta(1, gamma) for
k = 1..K and sets beta_k = u_k prod_{l<k} (1 - u_l), with the remainder
beta_{K+1} = prod_{l<=K} (1 - u_l). The variational factor is q(u_k) = Beta(a_k, b_k),
parametrized either by (a, b) or, as in Hughes, Kim & Sudderth (2015), by the mean
rho_k = a_k / (a_k + b_k) and the concentration omega_k = a_k + b_k.

Used by

- :class:`sparseclust.HDPTopicModel`: the top-level topic weights, whose (rho, omega) maximize
  the surrogate objective of Hughes, Kim & Sudderth (2015, supplement Eq. 21) --
  :func:`hdp_objective` and :func:`optimize_hdp_sticks` (L-BFGS-B in the unconstrained
  coordinates c = logit(rho), d = log(omega), with the analytic gradient);
- Dirichlet-process mixtures, whose q(u) has the closed-form update
  a_k = 1 + N_k, b_k = gamma + sum_{l>k} N_l (Blei & Jordan 2006) -- :func:`dp_sticks`.
"""

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, gammaln, polygamma, psi

from ._kernels._sticks import hdp_objective_grad
from .utils._threads import single_threaded_blas

__all__ = [
    "c_beta",
    "expected_beta",
    "expected_log_u",
    "expected_log_beta",
    "stick_prior_terms",
    "hdp_objective",
    "optimize_hdp_sticks",
    "sticks_from_weights",
    "dp_sticks",
]


def c_beta(a, b):
    """Log normalizer of Beta(a, b): log Gamma(a + b) - log Gamma(a) - log Gamma(b)."""
    return gammaln(a + b) - gammaln(a) - gammaln(b)


def expected_beta(rho):
    """E[beta_k] = rho_k prod_{l<k} (1 - rho_l) for k = 1..K, and the remainder
    E[beta_{K+1}] = prod_{l<=K} (1 - rho_l); returns an array of K + 1 entries summing to 1."""
    rho = np.asarray(rho, dtype=np.float64)
    out = np.empty(rho.size + 1)
    left = np.concatenate([[1.0], np.cumprod(1.0 - rho)])
    out[:-1] = rho * left[:-1]
    out[-1] = left[-1]
    return out


def expected_log_u(rho, omega):
    """(E[log u_k], E[log(1 - u_k)]) under q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)."""
    a = rho * omega
    b = (1.0 - rho) * omega
    pw = psi(omega)
    return psi(a) - pw, psi(b) - pw


def expected_log_beta(rho, omega):
    """E[log beta_k] = E[log u_k] + sum_{l<k} E[log(1 - u_l)] for k = 1..K, and
    E[log beta_{K+1}] = sum_{l<=K} E[log(1 - u_l)]; K + 1 entries."""
    elu, el1mu = expected_log_u(rho, omega)
    cum = np.concatenate([[0.0], np.cumsum(el1mu)])
    return np.concatenate([elu + cum[:-1], cum[-1:]])


def stick_prior_terms(rho, omega, gamma):
    """L_u = E[log p(u | gamma) - log q(u)] = sum_k c_B(1, gamma) - c_B(a_k, b_k)
    + (1 - a_k) E[log u_k] + (gamma - b_k) E[log(1 - u_k)] (supplement Eq. 17)."""
    a = rho * omega
    b = (1.0 - rho) * omega
    elu, el1mu = expected_log_u(rho, omega)
    K = rho.size
    return float(
        K * c_beta(1.0, gamma)
        - np.sum(c_beta(a, b))
        + np.sum((1.0 - a) * elu)
        + np.sum((gamma - b) * el1mu)
    )


def _unpack(x, K):
    c, d = x[:K], x[K:]
    rho = expit(c)
    one_m_rho = expit(-c)
    omega = np.exp(d)
    return rho, one_m_rho, omega


def hdp_objective(x, n_docs, T, alpha, gamma, scale=1.0):
    """Negative surrogate objective -L_G(rho, omega) and its gradient, in the unconstrained
    coordinates x = [logit(rho), log(omega)] (Hughes, Kim & Sudderth 2015, supplement
    Eq. 21, 24-26, 29-30).

    L_G = sum_k [ -c_B(a_k, b_k) + (D + 1 - a_k) E[log u_k]
                  + (D (K + 1 - k) + gamma - b_k) E[log(1 - u_k)] ]
          + alpha sum_{k=1}^{K+1} E[beta_k] T_k

    with a_k = rho_k omega_k, b_k = (1 - rho_k) omega_k, D = ``n_docs`` and
    T_k = sum_d E[log pi_dk] (K + 1 entries: the remainder's too, which the supplement's
    Eq. 21 leaves out although E[beta_{K+1}] depends on rho). It collects every term of the
    HDP objective that depends on (rho, omega): the stick prior L_u, the surrogate bound
    D sum_k (E[log u_k] + (K + 1 - k) E[log(1 - u_k)]) on sum_d E[c_D(alpha beta)], and the
    document-prior terms alpha E[beta_k] T_k.

    This is the reference statement; :func:`optimize_hdp_sticks` evaluates the same value and
    gradient with the compiled loop :func:`sparseclust._kernels._sticks.hdp_objective_grad`
    (equal to it within rounding, a test).

    Returns
    -------
    f : float
        -L_G * scale.
    g : ndarray (2K,)
        Its gradient.
    """
    K = T.size - 1
    rho, omr, omega = _unpack(x, K)
    a = rho * omega
    b = omr * omega
    pa, pb, pw = psi(a), psi(b), psi(omega)
    elu, el1mu = pa - pw, pb - pw
    A1 = n_docs + 1.0
    B1 = n_docs * (K - np.arange(K)) + gamma      # D (K + 1 - k) + gamma, k = 1..K
    left = np.concatenate([[1.0], np.cumprod(omr)])  # prod_{l<k} (1 - rho_l), k = 1..K+1
    Eb = np.empty(K + 1)
    Eb[:-1] = rho * left[:-1]
    Eb[-1] = left[-1]
    L = (
        np.sum(gammaln(a) + gammaln(b) - gammaln(omega))
        + np.sum((A1 - a) * elu)
        + np.sum((B1 - b) * el1mu)
        + alpha * float(np.dot(Eb, T))
    )
    ta, tb, tw = polygamma(1, a), polygamma(1, b), polygamma(1, omega)
    g_rho = omega * (A1 - a) * ta - omega * (B1 - b) * tb
    # d E[beta_k] / d rho_m: E[beta_m] / rho_m (k = m), -E[beta_k] / (1 - rho_m) (k > m)
    ET = Eb * T
    tail = later_sums(ET)[:K]  # sum_{k>m} E[b_k] T_k
    g_rho += alpha * (left[:-1] * T[:-1] - tail / omr)
    g_omega = (A1 - a) * (rho * ta - tw) + (B1 - b) * (omr * tb - tw)
    g = np.concatenate([g_rho * rho * omr, g_omega * omega])
    return -L * scale, -g * scale


def _hdp_objective_compiled(x, n_docs, T, alpha, gamma, scale=1.0):
    """:func:`hdp_objective` by the compiled kernel (a fresh gradient array per call, as the
    optimizer may keep the previous one)."""
    g = np.empty(x.size)
    f = hdp_objective_grad(x, n_docs, T, alpha, gamma, scale, g)
    return f, g


def sticks_from_weights(beta, omega=None):
    """(rho, omega) whose E[beta] equals ``beta`` (K + 1 entries, the last the remainder):
    rho_k = beta_k / (1 - sum_{l<k} beta_l); omega defaults to K + 1 for every stick."""
    beta = np.asarray(beta, dtype=np.float64)
    K = beta.size - 1
    left = 1.0 - np.concatenate([[0.0], np.cumsum(beta[:-1])])[:K]
    rho = np.clip(beta[:K] / np.maximum(left, 1e-300), 1e-12, 1.0 - 1e-12)
    if omega is None:
        omega = np.full(K, float(K + 1))
    return rho, np.asarray(omega, dtype=np.float64)


def optimize_hdp_sticks(n_docs, T, alpha, gamma, rho0, omega0, *, maxiter=200):
    """argmax_{rho, omega} L_G (:func:`hdp_objective`) by L-BFGS-B from (rho0, omega0).

    The start is returned unchanged when the optimizer does not improve on it, so the result
    never has a lower objective than the warm start (which keeps memoized training
    monotone). Returns (rho, omega, L_G).
    """
    T = np.asarray(T, dtype=np.float64)
    K = T.size - 1
    rho0 = np.clip(np.asarray(rho0, dtype=np.float64), 1e-10, 1.0 - 1e-10)
    omega0 = np.clip(np.asarray(omega0, dtype=np.float64), 1e-10, 1e15)
    x0 = np.concatenate([np.log(rho0) - np.log1p(-rho0), np.log(omega0)])
    # scale the objective to O(1) per stick for the optimizer's tolerances
    scale = 1.0 / max(1.0, float(n_docs) * max(K, 1))
    f0, _ = _hdp_objective_compiled(x0, n_docs, T, alpha, gamma, scale=scale)
    if K == 0:
        return rho0, omega0, -f0 / scale
    # the problem is tiny: threaded BLAS inside L-BFGS-B only adds synchronization cost
    with single_threaded_blas():
        res = minimize(
            _hdp_objective_compiled, x0, args=(n_docs, T, alpha, gamma, scale), jac=True,
            method="L-BFGS-B", bounds=[(-40.0, 40.0)] * K + [(-20.0, 40.0)] * K,
            options={"maxiter": maxiter, "ftol": 1e-12, "gtol": 1e-9},
        )
    if not np.all(np.isfinite(res.x)) or not (res.fun <= f0):
        return rho0, omega0, -f0 / scale
    rho, _, omega = _unpack(res.x, K)
    return rho, omega, -res.fun / scale


def later_sums(x):
    """``sum_{l>k} x_l`` for every k (0 for the last)."""
    x = np.asarray(x, dtype=np.float64)
    return np.concatenate([np.cumsum(x[::-1])[::-1][1:], [0.0]])


def dp_sticks(N, gamma):
    """Closed-form q(u_k) = Beta(a_k, b_k) of a Dirichlet-process mixture with counts N:
    a_k = 1 + N_k, b_k = gamma + sum_{l>k} N_l. Returns (rho, omega) = (a / (a + b), a + b)."""
    N = np.asarray(N, dtype=np.float64)
    a = 1.0 + N
    b = gamma + later_sums(N)
    return a / (a + b), a + b
