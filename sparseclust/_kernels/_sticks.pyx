# SPDX-License-Identifier: BSD-3-Clause
"""The HDP's surrogate stick objective and its gradient in one compiled loop.

:func:`sparseclust._stickbreak.hdp_objective` is the numpy statement of the objective
(Hughes, Kim & Sudderth 2015, supplement Eq. 21 and 24-30). L-BFGS-B calls it a few dozen
times per stick optimization, and the HDP optimizes the sticks after every memoized batch and
once per merge proposal, on vectors of a few hundred entries, where numpy's per-call overhead
and the Hurwitz-zeta trigamma dominate. :func:`hdp_objective_grad` computes the same value
and gradient in O(K) scalar work: log Gamma and digamma from ``scipy.special.cython_special``
(the functions behind ``scipy.special.gammaln`` and ``psi``), and the trigamma
psi_1(x) = sum_{n>=0} 1 / (x + n)^2 by the recurrence psi_1(x) = psi_1(x + 1) + 1 / x^2 up
to x >= 8, then the asymptotic series

    psi_1(x) ~ 1/x + 1/(2 x^2) + sum_{n>=1} B_2n / x^(2n+1)

through B_14 (Abramowitz & Stegun 1964, 6.4.6 and 6.4.12; within 1e-13 relative of
``scipy.special.polygamma(1, x)`` from 1e-12 to 1e12, a test).
"""

from libc.math cimport exp
from scipy.special.cython_special cimport gammaln, psi

import numpy as np


cdef inline double _trigamma(double x) noexcept nogil:
    cdef double acc = 0.0, r, f
    while x < 8.0:
        acc += 1.0 / (x * x)
        x += 1.0
    r = 1.0 / x
    f = r * r
    # 1/x + 1/(2x^2) + 1/(6x^3) - 1/(30x^5) + 1/(42x^7) - 1/(30x^9) + 5/(66x^11)
    #   - 691/(2730x^13) + 7/(6x^15)
    return acc + r + 0.5 * f + r * f * (
        1.0 / 6.0 - f * (1.0 / 30.0 - f * (1.0 / 42.0 - f * (1.0 / 30.0 - f * (
            5.0 / 66.0 - f * (691.0 / 2730.0 - f * (7.0 / 6.0)))))))


cdef inline void _expit_pair(double c, double* rho, double* omr) noexcept nogil:
    """rho = 1 / (1 + exp(-c)) and 1 - rho = 1 / (1 + exp(c)), each without cancellation."""
    cdef double e
    if c >= 0:
        e = exp(-c)
        rho[0] = 1.0 / (1.0 + e)
        omr[0] = e * rho[0]
    else:
        e = exp(c)
        omr[0] = 1.0 / (1.0 + e)
        rho[0] = e * omr[0]


def trigamma(const double[::1] x):  # IN (n,)
    """Trigamma of positive values with the kernel's series (tested against scipy).

    Equivalent to ``scipy.special.polygamma(1, x)`` for ``x > 0``.
    """
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = _trigamma(x[i])
    return out


def hdp_objective_grad(const double[::1] x,   # IN (2K,) [logit(rho), log(omega)]
                       double n_docs,
                       const double[::1] T,   # IN (K + 1,) sum_d E[log pi_dk]
                       double alpha,
                       double gamma,
                       double scale,
                       double[::1] grad):     # OUT (2K,)
    """Negative surrogate objective -L_G * scale; its gradient is written to ``grad``.

    The same quantity as :func:`sparseclust._stickbreak.hdp_objective` (see there for the
    formula), with sequential rather than pairwise sums.
    """
    cdef Py_ssize_t K = T.shape[0] - 1, k
    if x.shape[0] != 2 * K or grad.shape[0] != 2 * K:
        raise ValueError("x and grad need 2 (T.size - 1) entries")
    cdef double L = 0.0, rho, omr, om, a, b, pw, elu, el1mu, A1 = n_docs + 1.0, B1
    cdef double tail, ta, tb, tw, g_om
    # left[k] = prod_{l<k} (1 - rho_l), k = 0..K; E[beta_k] = rho_k left[k], remainder left[K]
    left_arr = np.empty(K + 1)
    rho_arr = np.empty(K)
    omr_arr = np.empty(K)
    cdef double[::1] left = left_arr, rh = rho_arr, om1 = omr_arr
    with nogil:
        left[0] = 1.0
        # pass 1: the value and every gradient term but the tail sums
        for k in range(K):
            _expit_pair(x[k], &rho, &omr)
            rh[k] = rho
            om1[k] = omr
            left[k + 1] = left[k] * omr
            om = exp(x[K + k])
            a = rho * om
            b = omr * om
            pw = psi(om)
            elu = psi(a) - pw
            el1mu = psi(b) - pw
            B1 = n_docs * (K - k) + gamma
            L += gammaln(a) + gammaln(b) - gammaln(om) + (A1 - a) * elu + (B1 - b) * el1mu
            L += alpha * rho * left[k] * T[k]
            ta = _trigamma(a)
            tb = _trigamma(b)
            tw = _trigamma(om)
            # d/d rho_k, without the tail term
            grad[k] = om * (A1 - a) * ta - om * (B1 - b) * tb + alpha * left[k] * T[k]
            g_om = (A1 - a) * (rho * ta - tw) + (B1 - b) * (omr * tb - tw)
            grad[K + k] = -g_om * om * scale
        L += alpha * left[K] * T[K]
        # pass 2 (backwards): d E[beta_l] / d rho_k = -E[beta_l] / (1 - rho_k) for l > k,
        # i.e. - alpha tail_k / (1 - rho_k) with tail_k = sum_{l>k} E[beta_l] T_l; then the
        # chain rule to c = logit(rho): d rho / d c = rho (1 - rho)
        tail = left[K] * T[K]
        for k in range(K - 1, -1, -1):
            rho = rh[k]
            omr = om1[k]
            grad[k] = -(grad[k] - alpha * tail / omr) * rho * omr * scale
            tail += rho * left[k] * T[k]
    return -L * scale
