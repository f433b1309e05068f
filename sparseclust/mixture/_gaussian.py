# SPDX-License-Identifier: BSD-3-Clause
"""Conjugate Gaussian likelihood math for :class:`SparseGaussianMixture`.

Everything here is a pure function of sufficient statistics, prior and global parameters; no
responsibilities are ever stored. Notation follows Hughes & Sudderth 2016, App. A-B and Bishop
(2006, §10.2):

- mixture weights, ``weight_prior_type='dirichlet_distribution'``:
  ``pi ~ Dir(alpha0, ..., alpha0)``, ``q(pi) = Dir(theta)``, ``theta = alpha0 + N``;
- mixture weights, ``weight_prior_type='dirichlet_process'``: truncated stick-breaking
  (Sethuraman 1994; Blei & Jordan 2006), ``u_k ~ Beta(1, gamma)``,
  ``pi_k = u_k prod_{j<k} (1 - u_j)`` with ``gamma = alpha0``; ``q(u_k) = Beta(a_k, b_k)``,
  ``a_k = 1 + N_k``, ``b_k = gamma + sum_{j>k} N_j``
  (:func:`sparseclust._stickbreak.dp_sticks`), ``E[log pi_k] = E[log u_k] + sum_{j<k}
  E[log(1 - u_j)]`` (:func:`sparseclust._stickbreak.expected_log_beta`). The mass beyond the
  K-th stick is the remainder that no sample uses (the same truncation as scikit-learn's
  ``BayesianGaussianMixture`` and HDPTopicModel);
- ``'full'`` with mean: Normal-Wishart, ``Lambda_k ~ W(W0, nu0)``, ``mu_k | Lambda_k ~ N(m0,
  (beta0 Lambda_k)^-1)``; the *covariance prior* ``Psi0 = W0^-1`` is the inverse scale matrix
  (scikit-learn's ``covariance_prior``). Posterior ``beta = beta0 + N``,
  ``m = (beta0 m0 + Sx) / beta``, ``nu = nu0 + N``,
  ``W^-1 = Psi0 + Sxx - N xbar xbar^T + beta0 N / beta (xbar - m0)(xbar - m0)^T``;
- ``'full'`` zero mean (the image-patch model, Hughes & Sudderth 2016, App. B.1): ``mu_k = 0``,
  ``Lambda_k ~ W(W0, nu0)``, posterior ``nu = nu0 + N``, ``W^-1 = Psi0 + Sxx`` (Eq. 31);
- ``'diag'``: independent Normal-Gamma per dimension, ``lambda_kd ~ Gamma(nu0 / 2, psi0_d / 2)``
  (shape, rate), ``mu_kd | lambda_kd ~ N(m0_d, (beta0 lambda_kd)^-1)``; posterior shape
  ``a = (nu0 + N) / 2``, rate
  ``b_d = (psi0_d + scatter_d + beta0 N / beta (xbar_d - m0_d)^2) / 2``.
  The expected precision ``a / b_d`` equals the one of scikit-learn's ``'diag'`` model; the
  expected log precision is the exact Gamma one, ``psi(a) - log b_d``;
- ``'spherical'``: one precision per component for all dimensions, ``Lambda_k = lambda_k I``,
  ``lambda_k ~ Gamma(D nu0 / 2, D psi0 / 2)`` (the ``nu0`` pseudo-samples contribute ``D`` scalar
  observations each; ``psi0`` is a scalar), ``mu_k | lambda_k ~ N(m0, (beta0 lambda_k)^-1 I)``;
  posterior shape ``a = D (nu0 + N) / 2``, rate
  ``b = (D psi0 + sum_d scatter_d + beta0 N / beta ||xbar - m0||^2) / 2``, so
  ``E[lambda_k] = a / b`` and ``E[log lambda_k] = psi(a) - log b``.

``reg_covar`` is an isotropic pseudo-scatter ``reg I`` added to every sample's ``x x^T``: it enters
the global step as ``Sxx + reg N I`` *and* the weights ``W`` as ``-reg/2 tr E[Lambda_k]``, so the
objective stays exact and coordinate ascent on it stays monotone.
"""

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import betaln, digamma, gammaln

from .._kernels import _gmm_weights
from .._stickbreak import (
    dp_sticks,
    expected_beta,
    expected_log_beta,
    later_sums,
    stick_prior_terms,
)
from ..utils._threads import single_threaded_blas

LOG_2PI = math.log(2.0 * math.pi)


@dataclass
class GaussianPrior:
    """Hyper-parameters of the conjugate prior (float64)."""

    covariance_type: str  # 'full' or 'diag'
    zero_mean: bool
    alpha0: float  # Dirichlet concentration per component (alpha / K)
    beta0: float  # mean precision prior (unused when zero_mean)
    m0: np.ndarray  # (D,) mean prior (zeros when zero_mean)
    nu0: float  # degrees of freedom prior
    psi0: np.ndarray  # (D, D) inverse scale ('full'), (D,) rates x 2 ('diag'), () ('spherical')
    reg: float  # reg_covar
    # 'dirichlet_distribution' (alpha0 per component) or 'dirichlet_process' (alpha0 = gamma)
    weight_prior_type: str = "dirichlet_distribution"

    @property
    def dp(self):
        return self.weight_prior_type == "dirichlet_process"

    @property
    def n_features(self):
        return self.m0.shape[0]

    @functools.cached_property
    def log_b0(self):
        """``log B(Psi_0, nu_0)``, the Wishart prior's log normalizer (full covariance), kept
        because every proposal of the moves needs it."""
        D = self.n_features
        _, logdet_psi0 = np.linalg.slogdet(self.psi0)
        return (0.5 * self.nu0 * logdet_psi0 - 0.5 * self.nu0 * D * math.log(2.0)
                - _log_multigamma(0.5 * self.nu0, D))


@dataclass
class GaussianParams:
    """Global variational parameters (float64) plus the factors the local step needs.

    Attributes
    ----------
    theta : (K,) Dirichlet parameters of q(pi); for the Dirichlet process the first Beta
        parameters a_k = 1 + N_k of q(u_k).
    elog_pi : (K,) E[log pi_k] = psi(theta_k) - psi(sum theta), or the stick-breaking
        expectation for the Dirichlet process.
    beta : (K,) mean precisions (inf for zero_mean).
    means : (K, D) posterior means m_k (zeros for zero_mean).
    nu : (K,) degrees of freedom (Wishart nu_k; 2 a_k for 'diag'; 2 a_k / D for 'spherical').
    scale_inv : (K, D, D) W_k^-1 ('full'), (K, D) 2 b_kd ('diag') or (K,) 2 b_k ('spherical').
    prec_chol : (K, D, D) upper-triangular C_k with E[Lambda_k] = C_k C_k^T ('full'),
        (K, D) sqrt(E[lambda_kd]) ('diag') or (K,) sqrt(E[lambda_k]) ('spherical').
    precisions : (K, D, D), (K, D) or (K,) E[Lambda_k].
    elog_det : (K,) E[log |Lambda_k|].
    const : (K,) the part of W_nk that does not depend on x_n:
        E[log pi_k] - D/2 log 2 pi + E[log|Lambda_k|]/2 - D / (2 beta_k) - reg/2 tr E[Lambda_k].
    """

    theta: np.ndarray
    elog_pi: np.ndarray
    beta: np.ndarray
    means: np.ndarray
    nu: np.ndarray
    scale_inv: np.ndarray
    prec_chol: np.ndarray
    elog_det: np.ndarray
    const: np.ndarray
    # Dirichlet process only: q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)
    rho: np.ndarray = None
    omega: np.ndarray = None

    @property
    def stick_b(self):
        """Second Beta parameters b_k = (1 - rho_k) omega_k (Dirichlet process)."""
        return None if self.rho is None else (1.0 - self.rho) * self.omega

    @property
    def weights(self):
        """Point-estimate mixture weights (K,), summing to 1: E[pi] = theta / sum(theta), or
        for the Dirichlet process E[pi_k] = E[u_k] prod_{j<k} E[1 - u_j] renormalized over
        the K components (scikit-learn's ``weights_``)."""
        if self.rho is None:
            return self.theta / self.theta.sum()
        w = expected_beta(self.rho)[:-1]
        return w / w.sum()

    @property
    def precisions(self):
        """E[Lambda_k] = C_k C_k^T (computed on demand: the local step needs only C_k)."""
        C = self.prec_chol
        return C @ np.swapaxes(C, 1, 2) if C.ndim == 3 else C * C


def _log_multigamma(a, D):
    """log Gamma_D(a) for an array ``a``."""
    a = np.asarray(a, dtype=np.float64)
    i = np.arange(D)
    return 0.25 * D * (D - 1) * math.log(math.pi) + gammaln(a[..., None] - 0.5 * i).sum(-1)


def _multi_digamma_sum(a, D):
    """sum_{i=0}^{D-1} psi(a - i/2) for an array ``a``."""
    a = np.asarray(a, dtype=np.float64)
    return digamma(a[..., None] - 0.5 * np.arange(D)).sum(-1)


def _centered(N, Sx, prior):
    """Posterior mean quantities: beta, m, xbar and clipped counts (with-mean models)."""
    Nc = np.maximum(N, 0.0)
    beta = prior.beta0 + N
    xbar = Sx / (Nc + 10.0 * np.finfo(np.float64).eps)[:, None]
    means = (prior.beta0 * prior.m0[None, :] + Sx) / beta[:, None]
    return Nc, beta, xbar, means


@dataclass
class WeightPosterior:
    """q(pi) alone: ``theta`` and ``E[log pi]``, plus the sticks (rho, omega) of the DP."""

    theta: np.ndarray
    elog_pi: np.ndarray
    rho: np.ndarray = None
    omega: np.ndarray = None


def weight_posterior(N, prior):
    """The weight part of the global step: ``theta = alpha0 + N`` and
    ``E[log pi_k] = psi(theta_k) - psi(sum theta)`` (Dirichlet), or the closed-form sticks
    ``a_k = 1 + N_k``, ``b_k = gamma + sum_{j>k} N_j`` with
    ``E[log pi_k] = E[log u_k] + sum_{j<k} E[log(1 - u_j)]`` (Dirichlet process)."""
    N = np.asarray(N, dtype=np.float64)
    if prior.dp:
        rho, omega = dp_sticks(N, prior.alpha0)
        return WeightPosterior(1.0 + N, expected_log_beta(rho, omega)[:-1], rho, omega)
    theta = prior.alpha0 + N
    return WeightPosterior(theta, digamma(theta) - digamma(theta.sum()))


def optimal_allocation_terms(N, prior):
    """:func:`allocation_terms` at the optimal q(pi) for the counts ``N``: the part of the
    ELBO that depends on the clusters' sizes and their order only.

    At the optimum the expectation terms cancel: Dirichlet process
    ``sum_k log B(1 + N_k, gamma + N_{>k}) - K log B(1, gamma)``, Dirichlet
    ``c_Dir(alpha_0 1_K) - c_Dir(alpha_0 + N)``."""
    N = np.asarray(N, dtype=np.float64)
    K = N.shape[0]
    a0 = prior.alpha0
    if prior.dp:
        return float(np.sum(betaln(1.0 + N, a0 + later_sums(N))) - K * betaln(1.0, a0))
    return float(gammaln(K * a0) - K * gammaln(a0) - gammaln(K * a0 + N.sum())
                 + np.sum(gammaln(a0 + N)))


def optimal_value(N, entropy, comp, prior):
    """The ELBO of clusters with counts ``N``, entropy terms ``entropy`` and data terms
    ``comp`` (:func:`optimal_component_terms`) at their optimal global parameters: the
    allocation terms (:func:`optimal_allocation_terms`) plus the two sums."""
    return (optimal_allocation_terms(N, prior) + float(np.sum(entropy))
            + float(np.sum(comp)))


def merge_allocation_gain(N, prior, pa, pb, chunk=1 << 20):
    """Change of :func:`optimal_allocation_terms` when cluster ``pb[p]`` is merged into
    ``pa[p]`` (the merged cluster keeps a's place, b's is removed), for every pair p at once.

    Dirichlet process: at the optimal sticks ``a_k = 1 + N_k``, ``b_k = gamma + N_{>k}`` the
    expectations cancel and the allocation terms are
    ``sum_k log B(1 + N_k, c_k) - K log B(1, gamma)`` with ``c_k = gamma + N_{>k}``. A merge
    changes a's term, removes b's and shifts ``c_k`` by ``delta = N_b`` (``-N_b`` when b comes
    first) for the clusters k strictly between them. With ``c_{k-1} = c_k + N_k`` those shifted
    terms telescope,

    ``sum_{lo<k<hi} [log B(1 + N_k, c_k - delta) - log B(1 + N_k, c_k)]
    = f(c_{hi-1}) - f(c_lo) - sum_{lo<=j<=hi-2} log(1 - delta / c_j)``,

    ``f(c) = log Gamma(c - delta) - log Gamma(c)``, so a pair costs ``O(|a - b|)`` logarithms.
    Dirichlet: ``c_Dir(alpha_0 1_K) - c_Dir(alpha_0 + N)``, which a merge changes through K,
    a and b.
    """
    N = np.asarray(N, dtype=np.float64)
    pa = np.asarray(pa, dtype=np.int64)
    pb = np.asarray(pb, dtype=np.int64)
    K = N.shape[0]
    a0 = prior.alpha0
    if not prior.dp:
        n = N.sum()
        before = gammaln(K * a0) - gammaln(K * a0 + n)
        after = gammaln((K - 1) * a0) - gammaln((K - 1) * a0 + n)
        return (after - before + gammaln(a0) + gammaln(a0 + N[pa] + N[pb])
                - gammaln(a0 + N[pa]) - gammaln(a0 + N[pb]))
    c = a0 + later_sums(N)
    Na, Nb = N[pa], N[pb]
    delta = np.where(pa < pb, Nb, -Nb)
    lo, hi = np.minimum(pa, pb), np.maximum(pa, pb)
    ends = (gammaln(c[hi - 1] - delta) - gammaln(c[hi - 1])
            - gammaln(c[lo] - delta) + gammaln(c[lo]))
    # sum_{lo <= j <= hi - 2} log(1 - delta / c_j), a ragged range per pair, in chunks of
    # about `chunk` terms
    length = hi - lo - 1
    logs = np.zeros(pa.size)
    ends_at = np.cumsum(length)
    s0 = 0
    while s0 < pa.size:
        s1 = max(s0 + 1, int(np.searchsorted(ends_at, ends_at[s0] - length[s0] + chunk)))
        ln = length[s0:s1]
        pair = np.repeat(np.arange(s0, s1), ln)
        j = np.repeat(lo[s0:s1] - np.cumsum(ln) + ln, ln) + np.arange(pair.size)
        logs[s0:s1] = np.bincount(pair - s0, np.log1p(-delta[pair] / c[j]), minlength=s1 - s0)
        s0 = s1
    # a's term at its new place (its later sum loses N_b when b came after it)
    ca_new = c[pa] - np.where(pa < pb, Nb, 0.0)
    return (betaln(1.0 + Na + Nb, ca_new) - betaln(1.0 + Na, c[pa])
            - betaln(1.0 + Nb, c[pb]) + ends - logs + betaln(1.0, a0))


def _wishart_factors(scale_inv, reg, N, nu=None, symmetrize=True, n_threads=1):
    """Factors of the posterior scale matrices ``scale_inv`` (K, D, D), a new array of the
    caller's that is edited in place: ``reg * N_k`` added to the diagonals (when reg),
    symmetrized (when ``symmetrize``; pass False only when it is exactly symmetric), and
    ``log |Psi_k|``; with ``nu`` also the upper-triangular ``C_k = sqrt(nu_k) L_k^-T``
    (``Psi_k = L_k L_k^T``, so ``C_k C_k^T = E[Lambda_k]``) and ``tr(C_k C_k^T)``
    (:func:`sparseclust._kernels._gmm_weights.scale_factors`). Returns
    ``(scale_inv, logdet, C, tr)`` (C and tr None without ``nu``); a clear error when a matrix
    is not positive definite. Components are factored on up to ``n_threads`` threads (the
    result does not depend on it)."""
    K, D = scale_inv.shape[0], scale_inv.shape[-1]
    if reg:
        d = np.arange(D)
        scale_inv[:, d, d] += (reg * np.maximum(N, 0.0))[:, None]
    scale_inv = np.ascontiguousarray(scale_inv, dtype=np.float64)
    invert = nu is not None
    out = np.empty_like(scale_inv)
    logdet = np.empty(K)
    tr = np.empty(K)
    status = np.zeros(K, dtype=np.int32)
    nu_arr = np.ascontiguousarray(nu if invert else np.ones(K), dtype=np.float64)
    nt = max(1, min(int(n_threads), K))
    if nt > 1:
        with single_threaded_blas():
            _gmm_weights.scale_factors(scale_inv, out, nu_arr, logdet, tr, status, symmetrize,
                                       invert, nt)
    else:
        _gmm_weights.scale_factors(scale_inv, out, nu_arr, logdet, tr, status, symmetrize,
                                   invert, 1)
    if np.any(status == 1):
        raise ValueError(
            "A posterior scale matrix is not positive definite; increase reg_covar or "
            "check covariance_prior."
        )
    if np.any(status == 2):
        k = int(np.flatnonzero(status == 2)[0])
        raise ValueError(f"Singular posterior scale matrix for component {k}.")
    return scale_inv, logdet, (out if invert else None), (tr if invert else None)


def global_step(stats, prior, n_threads=1):
    """Conjugate posterior updates from whole-data statistics (Hughes & Sudderth 2016, App. A-B).

    Parameters
    ----------
    stats : mapping with ``N`` (K,), ``Sx`` (K, D) (unless zero mean) and ``Sxx`` (K, D, D)
        ('full') or ``Sxx_diag`` (K, D) ('diag', 'spherical').
    prior : GaussianPrior
    n_threads : int, default=1
        Threads for the factors of the 'full' scale matrices (the result does not depend on it).

    Returns
    -------
    GaussianParams
    """
    return assemble_params(component_posterior(stats, prior, n_threads), stats["N"], prior)


#: the fields of :func:`component_posterior`, each (K, ...) and computed per component
COMPONENT_FIELDS = ("beta", "means", "nu", "scale_inv", "prec_chol", "elog_det", "tr_prec")


def component_posterior(stats, prior, n_threads=1):
    """The part of :func:`global_step` that each component's own statistics determine: a dict
    of ``COMPONENT_FIELDS`` arrays, component k computed from component k's statistics alone
    (so the rows of a subset of components equal the result on that subset's statistics, bit
    for bit). :func:`assemble_params` adds the mixture weights."""
    N = np.asarray(stats["N"], dtype=np.float64)
    K = N.shape[0]
    D = prior.n_features
    nu = prior.nu0 + N
    reg = prior.reg
    if prior.zero_mean:
        beta = np.full(K, np.inf)
        means = np.zeros((K, D))
    if prior.covariance_type == "full":
        Sxx = np.asarray(stats["Sxx"], dtype=np.float64)
        scale_inv = prior.psi0[None, :, :] + Sxx
        if not prior.zero_mean:
            Nc, beta, xbar, means = _centered(N, np.asarray(stats["Sx"], dtype=np.float64), prior)
            scale_inv = scale_inv - Nc[:, None, None] * xbar[:, :, None] * xbar[:, None, :]
            diff = xbar - prior.m0[None, :]
            w = prior.beta0 * Nc / beta
            scale_inv = scale_inv + w[:, None, None] * diff[:, :, None] * diff[:, None, :]
        # E[Lambda] = nu W = nu L^-T L^-1 = C C^T with the upper-triangular C = sqrt(nu) L^-T
        scale_inv, logdet_scale_inv, prec_chol, tr_prec = _wishart_factors(
            scale_inv, reg, N, nu, n_threads=n_threads)
        elog_det = _multi_digamma_sum(0.5 * nu, D) + D * math.log(2.0) - logdet_scale_inv
    elif prior.covariance_type == "spherical":
        # the diagonal scatter summed over dimensions: one Gamma posterior per component
        Sxx = np.asarray(stats["Sxx_diag"], dtype=np.float64)
        scatter = Sxx.sum(1)
        if not prior.zero_mean:
            Nc, beta, xbar, means = _centered(N, np.asarray(stats["Sx"], dtype=np.float64), prior)
            diff = xbar - prior.m0[None, :]
            scatter = (
                scatter - Nc * (xbar**2).sum(1) + prior.beta0 * Nc / beta * (diff**2).sum(1)
            )
        scale_inv = D * float(prior.psi0) + scatter
        if reg:
            scale_inv = scale_inv + reg * D * np.maximum(N, 0.0)
        if not np.all(scale_inv > 0):
            raise ValueError(
                "A posterior variance is not positive; increase reg_covar or check "
                "covariance_prior."
            )
        # Gamma(a, b) with a = D nu / 2, b = scale_inv / 2: E[lambda] = D nu / scale_inv
        prec = D * nu / scale_inv
        prec_chol = np.sqrt(prec)
        elog_det = D * (digamma(0.5 * D * nu) - np.log(0.5 * scale_inv))
        tr_prec = D * prec
    else:
        Sxx = np.asarray(stats["Sxx_diag"], dtype=np.float64)
        scale_inv = prior.psi0[None, :] + Sxx
        if not prior.zero_mean:
            Nc, beta, xbar, means = _centered(N, np.asarray(stats["Sx"], dtype=np.float64), prior)
            diff = xbar - prior.m0[None, :]
            scale_inv = (
                scale_inv - Nc[:, None] * xbar**2 + (prior.beta0 * Nc / beta)[:, None] * diff**2
            )
        if reg:
            scale_inv = scale_inv + (reg * np.maximum(N, 0.0))[:, None]
        if not np.all(scale_inv > 0):
            raise ValueError(
                "A posterior variance is not positive; increase reg_covar or check "
                "covariance_prior."
            )
        # Gamma(a, b) with a = nu / 2, b = scale_inv / 2: E[lambda] = nu / scale_inv
        prec = nu[:, None] / scale_inv
        prec_chol = np.sqrt(prec)
        elog_det = D * digamma(0.5 * nu) - np.log(0.5 * scale_inv).sum(1)
        tr_prec = prec.sum(1)
    return dict(beta=beta, means=means, nu=nu, scale_inv=scale_inv, prec_chol=prec_chol,
                elog_det=elog_det, tr_prec=tr_prec)


def assemble_params(comp, N, prior):
    """:class:`GaussianParams` from the per-component posterior ``comp``
    (:func:`component_posterior`) and the counts ``N`` that set the mixture weights."""
    N = np.asarray(N, dtype=np.float64)
    D = prior.n_features
    w = weight_posterior(N, prior)
    elog_det, tr_prec = comp["elog_det"], comp["tr_prec"]
    const = w.elog_pi - 0.5 * D * LOG_2PI + 0.5 * elog_det - 0.5 * prior.reg * tr_prec
    if not prior.zero_mean:
        const = const - 0.5 * D / comp["beta"]
    return GaussianParams(
        theta=w.theta,
        elog_pi=w.elog_pi,
        beta=comp["beta"],
        means=comp["means"],
        nu=comp["nu"],
        scale_inv=comp["scale_inv"],
        prec_chol=comp["prec_chol"],
        elog_det=comp["elog_det"],
        const=const,
        rho=w.rho,
        omega=w.omega,
    )


def _c_dir(a):
    return gammaln(np.sum(a)) - np.sum(gammaln(a))


def elbo(stats, params, prior):
    """Whole-data ELBO (Hughes & Sudderth 2016, Eq. 18-24 and 31) from statistics and global
    parameters.

    ``L = L_data + L_entropy + L_alloc`` where

    - ``L_alloc = c_Dir(alpha0) - c_Dir(theta)
      + sum_k (N_k + alpha0 - theta_k) E[log pi_k]`` (Eq. 22), or its stick-breaking
      counterpart for the Dirichlet process (:func:`allocation_terms`);
    - ``L_entropy = sum_k entropy_k = -sum_nk r_nk log r_nk`` (Eq. 24), from the local step;
    - ``L_data = sum_nk r_nk E[log p(x_n | phi_k)] + sum_k E[log p(phi_k) - log q(phi_k)]``
      (Eq. 31),
      written with the statistics ``N_k, Sx_k, Sxx_k`` only.

    Valid for any ``params`` (not only ``global_step(stats)``), which is what makes the
    stochastic/memoized bookkeeping and the monotonicity tests meaningful. Returns nats (a sum over
    samples, not a mean).
    """
    N = np.asarray(stats["N"], dtype=np.float64)
    L_ent = float(np.sum(stats["entropy"]))
    return float(
        allocation_terms(N, params, prior) + L_ent + np.sum(component_terms(stats, params, prior))
    )


def allocation_terms(N, params, prior):
    """``E[log p(z | pi)] + E[log p(pi) - log q(pi)]`` from the counts ``N`` (a float).

    Dirichlet: ``c_Dir(alpha0) - c_Dir(theta) + sum_k (N_k + alpha0 - theta_k) E[log pi_k]``
    (Hughes & Sudderth 2016, Eq. 22). Dirichlet process: ``sum_k N_k E[log pi_k]`` plus the stick
    terms
    ``sum_k E[log Beta(u_k | 1, gamma) - log q(u_k)]``
    (:func:`sparseclust._stickbreak.stick_prior_terms`). Valid for any ``params``.
    """
    N = np.asarray(N, dtype=np.float64)
    if params.rho is not None:
        return stick_prior_terms(params.rho, params.omega, prior.alpha0) + float(
            np.dot(N, params.elog_pi)
        )
    K = N.shape[0]
    a0 = prior.alpha0
    theta, elog_pi = params.theta, params.elog_pi
    return float(_c_dir(np.full(K, a0)) - _c_dir(theta) + np.sum((N + a0 - theta) * elog_pi))


def optimal_component_terms(stats, prior):
    """``component_terms(stats, global_step(stats, prior), prior)`` without forming the
    precisions, for the moves' many proposals.

    At the optimal q(phi_k) of a full-covariance Normal-Wishart component the data terms
    collapse to the log marginal likelihood of the component's statistics (the expected
    quadratic terms and ``tr(Psi_0 E[Lambda_k])`` sum to ``nu_k D``, which cancels):

    ``-N_k D / 2 log(2 pi) + log B(Psi_0, nu_0) - log B(Psi_k, nu_k)
    [+ D / 2 log(beta_0 / beta_k) with means]``,

    with ``log B(Psi, nu) = nu / 2 log|Psi| - nu D / 2 log 2 - log Gamma_D(nu / 2)`` and
    ``Psi_k`` the posterior scale matrix (inverse Wishart scale) of :func:`global_step`. Only a
    Cholesky factor per component is needed. Other covariance types use the general path.
    """
    if prior.covariance_type != "full":
        return component_terms(stats, global_step(stats, prior), prior)
    N = np.asarray(stats["N"], dtype=np.float64)
    scale_inv = prior.psi0[None, :, :] + np.asarray(stats["Sxx"], dtype=np.float64)
    return _log_marginal_full(N, scale_inv, None if prior.zero_mean else stats["Sx"], prior)


def merged_component_terms(stats, pa, pb, prior, chunk=16):
    """:func:`optimal_component_terms` of the clusters ``pa[p] + pb[p]`` pooled (a merge), for
    every pair p, without forming the pooled statistics of other fields: for 'full' the
    pooled scale matrices ``Psi_0 + Sxx_a + Sxx_b`` are built ``chunk`` pairs at a time in
    one buffer that their Cholesky factors read as they are (the statistics and the
    symmetrized ``Psi_0`` are exactly symmetric) while it is still in cache; the other terms
    are computed for all pairs at once. Each value equals its own one-pair evaluation."""
    pa = np.ascontiguousarray(pa, dtype=np.int64)
    pb = np.ascontiguousarray(pb, dtype=np.int64)
    N_all = np.asarray(stats["N"], dtype=np.float64)
    if prior.covariance_type != "full":
        out = np.empty(pa.size)
        for s0 in range(0, pa.size, 4096):
            ia, ib = pa[s0:s0 + 4096], pb[s0:s0 + 4096]
            pooled = {k: np.asarray(v)[ia] + np.asarray(v)[ib] for k, v in stats.items()}
            out[s0:s0 + ia.size] = optimal_component_terms(pooled, prior)
        return out
    Sxx = np.asarray(stats["Sxx"], dtype=np.float64)
    psi0 = 0.5 * (prior.psi0 + prior.psi0.T)
    N = N_all[pa] + N_all[pb]
    logdet = np.empty(pa.size)
    extra = np.zeros(pa.size)
    if prior.zero_mean:
        # one kernel call: each pooled matrix is built and factored in a per-thread buffer
        status = np.zeros(pa.size, dtype=np.int32)
        reg = prior.reg
        with single_threaded_blas():
            _gmm_weights.pooled_logdet(np.ascontiguousarray(Sxx), np.ascontiguousarray(psi0),
                                       pa, pb, reg * np.maximum(N, 0.0), bool(reg), logdet,
                                       status, 1)
        if np.any(status):
            raise ValueError(
                "A posterior scale matrix is not positive definite; increase reg_covar or "
                "check covariance_prior."
            )
        return _log_marginal_from_logdet(N, logdet, extra, prior)
    for s0 in range(0, pa.size, chunk):
        ia, ib = pa[s0:s0 + chunk], pb[s0:s0 + chunk]
        scale_inv = np.take(Sxx, ia, axis=0)
        scale_inv += Sxx[ib]
        scale_inv += psi0
        Sx = None if prior.zero_mean else stats["Sx"][ia] + stats["Sx"][ib]
        sl = slice(s0, s0 + ia.size)
        logdet[sl], extra[sl] = _pooled_logdet(N[sl], scale_inv, Sx, prior, symmetrize=False)
    return _log_marginal_from_logdet(N, logdet, extra, prior)


def _pooled_logdet(N, scale_inv, Sx, prior, symmetrize=True):
    """``log |Psi_k|`` of full-covariance components' posterior scale matrices from ``N``,
    ``Psi_0 + Sxx`` (edited in place when ``symmetrize`` is False) and ``Sx`` (None for
    zero-mean models), and the mean term ``D / 2 log(beta_0 / beta_k)`` (0 without means)."""
    D = prior.n_features
    extra = 0.0
    if not prior.zero_mean:
        Nc, beta, xbar, _ = _centered(N, np.asarray(Sx, dtype=np.float64), prior)
        scale_inv = scale_inv - Nc[:, None, None] * xbar[:, :, None] * xbar[:, None, :]
        diff = xbar - prior.m0[None, :]
        w = prior.beta0 * Nc / beta
        scale_inv = scale_inv + w[:, None, None] * diff[:, :, None] * diff[:, None, :]
        extra = 0.5 * D * np.log(prior.beta0 / beta)
        symmetrize = True  # the centring products are symmetric only up to rounding
    _, logdet, _, _ = _wishart_factors(scale_inv, prior.reg, N, symmetrize=symmetrize)
    return logdet, extra


def _log_marginal_from_logdet(N, logdet, extra, prior):
    """The log marginal likelihood of full-covariance components from ``log |Psi_k|`` and
    the mean term of :func:`_pooled_logdet`."""
    D = prior.n_features
    nu = prior.nu0 + N
    logB = 0.5 * nu * logdet - 0.5 * nu * D * math.log(2.0) - _log_multigamma(0.5 * nu, D)
    return -0.5 * N * D * LOG_2PI + prior.log_b0 - logB + extra


def _log_marginal_full(N, scale_inv, Sx, prior, symmetrize=True):
    """The log marginal likelihood of full-covariance components (the body of
    :func:`optimal_component_terms`) from ``N``, ``Psi_0 + Sxx`` (edited in place when
    ``symmetrize`` is False) and ``Sx`` (None for zero-mean models)."""
    logdet, extra = _pooled_logdet(N, scale_inv, Sx, prior, symmetrize)
    return _log_marginal_from_logdet(N, logdet, extra, prior)


def component_terms(stats, params, prior):
    """Per-component data terms (K,): ``sum_n r_nk E[log p(x_n | phi_k)] + E[log p(phi_k) -
    log q(phi_k)]`` (Hughes & Sudderth 2016, Eq. 31) from the statistics of each component alone.

    The ELBO is ``allocation_terms + sum(entropy) + sum(component_terms)``; a move that edits
    a few components (a merge) re-evaluates only theirs.
    """
    N = np.asarray(stats["N"], dtype=np.float64)
    D = prior.n_features
    nu, nu0, reg = params.nu, prior.nu0, prior.reg
    elog_det = params.elog_det
    if prior.covariance_type == "full":
        P = params.precisions  # E[Lambda_k]
        Sxx = np.asarray(stats["Sxx"], dtype=np.float64)
        quad = np.einsum("kij,kij->k", P, Sxx) + reg * np.maximum(N, 0.0) * np.trace(
            P, axis1=1, axis2=2
        )
        if not prior.zero_mean:
            m = params.means
            Sx = np.asarray(stats["Sx"], dtype=np.float64)
            Pm = np.einsum("kij,kj->ki", P, m)
            quad = quad - 2.0 * np.einsum("ki,ki->k", Pm, Sx) + N * np.einsum("ki,ki->k", Pm, m)
        L_lik = N * (-0.5 * D * LOG_2PI + 0.5 * elog_det) - 0.5 * quad
        # Wishart log normalizers log B(W, nu) = -nu/2 log|W| - nu D/2 log 2 - log Gamma_D(nu/2)
        _, logdet_psi0 = np.linalg.slogdet(prior.psi0)
        logB0 = (
            0.5 * nu0 * logdet_psi0 - 0.5 * nu0 * D * math.log(2.0) - _log_multigamma(0.5 * nu0, D)
        )
        logdet_scale_inv = D * math.log(2.0) + _multi_digamma_sum(0.5 * nu, D) - elog_det
        logB = (
            0.5 * nu * logdet_scale_inv
            - 0.5 * nu * D * math.log(2.0)
            - _log_multigamma(0.5 * nu, D)
        )
        tr_psi0_P = np.einsum("ij,kij->k", prior.psi0, P)
        L_prior = logB0 - logB + 0.5 * (nu0 - nu) * elog_det - 0.5 * tr_psi0_P + 0.5 * nu * D
        if not prior.zero_mean:
            beta, beta0 = params.beta, prior.beta0
            dm = params.means - prior.m0[None, :]
            L_prior = L_prior + (
                0.5 * D * np.log(beta0 / beta)
                - 0.5 * beta0 * np.einsum("ki,kij,kj->k", dm, P, dm)
                - 0.5 * D * beta0 / beta
                + 0.5 * D
            )
            L_lik = L_lik - 0.5 * N * D / beta
    elif prior.covariance_type == "spherical":
        prec = params.precisions  # E[lambda_k] = a / b
        a = 0.5 * D * nu
        b = 0.5 * params.scale_inv
        elog_lam = digamma(a) - np.log(b)
        Sxx = np.asarray(stats["Sxx_diag"], dtype=np.float64)
        Q = Sxx.sum(1) + reg * D * np.maximum(N, 0.0)
        if not prior.zero_mean:
            m = params.means
            Sx = np.asarray(stats["Sx"], dtype=np.float64)
            Q = Q - 2.0 * (m * Sx).sum(1) + N * (m**2).sum(1)
        L_lik = N * (-0.5 * D * LOG_2PI + 0.5 * D * elog_lam) - 0.5 * prec * Q
        a0 = 0.5 * D * nu0
        b0 = 0.5 * D * float(prior.psi0)
        L_prior = (
            a0 * math.log(b0)
            - gammaln(a0)
            + (a0 - 1.0) * elog_lam
            - b0 * prec
            - (a * np.log(b) - gammaln(a) + (a - 1.0) * elog_lam - a)
        )
        if not prior.zero_mean:
            beta, beta0 = params.beta, prior.beta0
            dm = params.means - prior.m0[None, :]
            L_prior = L_prior + (
                0.5 * D * np.log(beta0 / beta)
                - 0.5 * beta0 * prec * (dm**2).sum(1)
                - 0.5 * D * beta0 / beta
                + 0.5 * D
            )
            L_lik = L_lik - 0.5 * N * D / beta
    else:
        prec = params.precisions  # E[lambda_kd] = a / b_d
        a = 0.5 * nu
        b = 0.5 * params.scale_inv
        elog_lam = digamma(a)[:, None] - np.log(b)
        Sxx = np.asarray(stats["Sxx_diag"], dtype=np.float64)
        Q = Sxx + reg * np.maximum(N, 0.0)[:, None]
        if not prior.zero_mean:
            m = params.means
            Sx = np.asarray(stats["Sx"], dtype=np.float64)
            Q = Q - 2.0 * m * Sx + N[:, None] * m**2
        L_lik = N * (-0.5 * D * LOG_2PI + 0.5 * elog_lam.sum(1)) - 0.5 * (prec * Q).sum(1)
        a0v = 0.5 * nu0
        b0 = 0.5 * prior.psi0[None, :]
        L_prior = (
            a0v * np.log(b0)
            - gammaln(a0v)
            + (a0v - 1.0) * elog_lam
            - b0 * prec
            - (
                a[:, None] * np.log(b)
                - gammaln(a)[:, None]
                + (a[:, None] - 1.0) * elog_lam
                - a[:, None]
            )
        ).sum(1)
        if not prior.zero_mean:
            beta, beta0 = params.beta, prior.beta0
            dm = params.means - prior.m0[None, :]
            L_prior = L_prior + (
                0.5 * D * np.log(beta0 / beta)
                - 0.5 * beta0 * (prec * dm**2).sum(1)
                - 0.5 * D * beta0 / beta
                + 0.5 * D
            )
            L_lik = L_lik - 0.5 * N * D / beta
    return L_lik + L_prior
