# SPDX-License-Identifier: BSD-3-Clause
"""Tests of SparseGaussianMixture against independent references.

References used: scikit-learn's BayesianGaussianMixture on the same problem and initialization,
exact log marginal likelihoods computed by the chain rule of Student-t posterior predictives
(scipy.stats), a direct numpy evaluation of one coordinate-ascent iteration, and properties
(monotone ELBO, memoized == batch on the first pass).
"""

import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from scipy.special import digamma, gammaln, logsumexp
from sklearn.decomposition import PCA
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import BayesianGaussianMixture
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sparseclust import SparseGaussianMixture, posteriors
from sparseclust.mixture._gmm_model import _index_dtype, _SparseGMMModel

CASES = [("full", False), ("diag", False), ("full", True), ("diag", True)]
# with the spherical model (not in scikit-learn's parity tests: its Bayesian mixture uses the
# Wishart formula for E[log lambda] there too)
ALL_CASES = CASES + [("spherical", False), ("spherical", True)]


def _blobs(n_per=80, D=3, seed=0, sep=5.0, n_clusters=3):
    rng = np.random.RandomState(seed)
    centers = rng.randn(n_clusters, D) * sep
    X = np.vstack([rng.randn(n_per, D) * (0.5 + 0.5 * k) + centers[k] for k in range(n_clusters)])
    y = np.repeat(np.arange(n_clusters), n_per)
    perm = rng.permutation(X.shape[0])
    return X[perm], y[perm]


class _BGMFixedInit(BayesianGaussianMixture):
    """scikit-learn's variational mixture started from given responsibilities."""

    def __init__(self, resp0=None, **kw):
        super().__init__(**kw)
        self.resp0 = resp0

    def _initialize_parameters(self, X, random_state, xp=None):
        self._initialize(X, self.resp0)
        self.recorded_bounds_ = []

    def _compute_lower_bound(self, *args, **kwargs):
        # recorded here: scikit-learn < 1.7 has no lower_bounds_
        bound = super()._compute_lower_bound(*args, **kwargs)
        self.recorded_bounds_.append(float(bound))
        return bound


def _sklearn_fit(X, R0, ct, max_iter):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _BGMFixedInit(
            resp0=R0,
            n_components=R0.shape[1],
            covariance_type=ct,
            weight_concentration_prior_type="dirichlet_distribution",
            max_iter=max_iter,
            tol=0,
            reg_covar=0,
        ).fit(X)


def _ours(X, **kw):
    # most tests here check the exact (dense, batch) coordinate ascent against references; they
    # ask for it explicitly unless they set L or algorithm themselves
    kw.setdefault("L", None)
    kw.setdefault("algorithm", "batch")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SparseGaussianMixture(**kw).fit(X)


ATTRS = [
    "weights_",
    "means_",
    "covariances_",
    "precisions_cholesky_",
    "degrees_of_freedom_",
    "mean_precision_",
    "weight_concentration_",
]


# ----------------------------------------------------------------------------- sklearn parity
@pytest.mark.contract
def test_full_matches_sklearn_bayesian_mixture():
    X, _ = _blobs()
    K = 4
    R0 = np.random.RandomState(1).dirichlet(np.ones(K), size=X.shape[0])
    sk = _sklearn_fit(X, R0, "full", max_iter=6)
    us = _ours(X, n_components=K, init_params=R0, max_iter=6, tol=0, reg_covar=0)
    assert us.n_iter_ == 6
    for a in ATTRS:
        np.testing.assert_allclose(getattr(us, a), getattr(sk, a), rtol=1e-6, atol=1e-9, err_msg=a)
    # scikit-learn's lower bound drops prior-only constants: the difference must be constant
    diff = np.asarray(us.lower_bounds_) - np.asarray(sk.recorded_bounds_)
    np.testing.assert_allclose(diff, diff[0], rtol=1e-9)


@pytest.mark.contract
def test_diag_global_step_matches_sklearn():
    # the diag global step equals scikit-learn's 'diag' M-step from the same responsibilities
    X, _ = _blobs(D=4)
    K = 3
    R0 = np.random.RandomState(2).dirichlet(np.ones(K), size=X.shape[0])
    sk = _sklearn_fit(X, R0, "diag", max_iter=1)
    sk._initialize(X, R0)  # parameters after the initial M-step only
    est = SparseGaussianMixture(K, covariance_type="diag", reg_covar=0)
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, K, K, X.dtype)
    idx = np.broadcast_to(np.arange(K, dtype=np.int32), R0.shape).copy()
    est._set_fitted(
        model.global_step(model.stats_from_responsibilities(R0, idx, X)), None, X.dtype
    )
    for a in [
        "weight_concentration_",
        "means_",
        "covariances_",
        "degrees_of_freedom_",
        "mean_precision_",
    ]:
        np.testing.assert_allclose(getattr(est, a), getattr(sk, a), rtol=1e-6, err_msg=a)


@pytest.mark.contract
@pytest.mark.parametrize("ct", ["full", "diag"])
def test_one_dimension_matches_sklearn_iterations(ct):
    # with D = 1 the Normal-Gamma and the Normal-Wishart coincide, so whole fits must agree
    X, _ = _blobs(D=1, sep=6.0)
    K = 3
    R0 = np.random.RandomState(3).dirichlet(np.ones(K), size=X.shape[0])
    sk = _sklearn_fit(X, R0, ct, max_iter=8)
    us = _ours(
        X, n_components=K, covariance_type=ct, init_params=R0, max_iter=8, tol=0, reg_covar=0
    )
    for a in ATTRS:
        np.testing.assert_allclose(getattr(us, a), getattr(sk, a), rtol=1e-6, atol=1e-9, err_msg=a)


# ----------------------------------------------------------------------------- exact ELBO values
def _log_marginal_chain(X, ct, zero_mean, m0, beta0, nu0, psi0):
    """log p(X) of one Gaussian with a conjugate prior, by the chain rule of predictives."""
    n, D = X.shape
    if ct == "diag":
        return sum(
            _log_marginal_chain(
                X[:, [d]], "full", zero_mean, m0[[d]], beta0, nu0, psi0[[d]][:, [d]]
            )
            for d in range(D)
        )
    m, beta, nu, Psi = m0.astype(float), float(beta0), float(nu0), psi0.astype(float)
    total = 0.0
    for x in X:
        df = nu - D + 1.0
        if zero_mean:
            total += stats.multivariate_t.logpdf(x, loc=np.zeros(D), shape=Psi / df, df=df)
            Psi = Psi + np.outer(x, x)
        else:
            shape = Psi * (beta + 1.0) / (beta * df)
            total += stats.multivariate_t.logpdf(x, loc=m, shape=shape, df=df)
            Psi = Psi + beta / (beta + 1.0) * np.outer(x - m, x - m)
            m = (beta * m + x) / (beta + 1.0)
            beta += 1.0
        nu += 1.0
    return total


def _log_marginal_spherical(X, zero_mean, m0, beta0, nu0, psi0):
    """log p(X) of one component with Lambda = lambda I, lambda ~ Gamma(D nu0/2, D psi0/2),
    mu | lambda ~ N(m0, (beta0 lambda)^-1 I) (or mu = 0): the Normal-Gamma marginal
    likelihood in closed form."""
    n, D = X.shape
    a0, b0 = 0.5 * D * nu0, 0.5 * D * psi0
    a = a0 + 0.5 * n * D
    if zero_mean:
        b = b0 + 0.5 * np.sum(X**2)
        log_beta = 0.0
    else:
        beta = beta0 + n
        xbar = X.mean(0) if n else m0
        b = b0 + 0.5 * (np.sum((X - xbar) ** 2) + beta0 * n / beta * np.sum((xbar - m0) ** 2))
        log_beta = 0.5 * D * np.log(beta0 / beta)
    return (
        -0.5 * n * D * np.log(2 * np.pi) + log_beta + gammaln(a) - gammaln(a0)
        + a0 * np.log(b0) - a * np.log(b)
    )


@pytest.mark.parametrize("ct,zero_mean", ALL_CASES)
def test_elbo_of_hard_assignment_is_log_joint(ct, zero_mean):
    # with one-hot responsibilities and the optimal q(pi, phi), the ELBO equals log p(X, z)
    X, y = _blobs(n_per=15, D=3)
    K = 4  # one empty component
    est = SparseGaussianMixture(
        K, covariance_type=ct, zero_mean=zero_mean, reg_covar=0, weight_concentration_prior=0.7
    )
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, K, 1, X.dtype)
    s = model.stats_from_responsibilities(np.ones((X.shape[0], 1)), y.astype(np.int32)[:, None], X)
    elbo = model.elbo(s, model.global_step(s))
    a0 = prior.alpha0
    Nk = np.bincount(y, minlength=K)
    ref = gammaln(K * a0) - gammaln(len(y) + K * a0) + np.sum(gammaln(Nk + a0) - gammaln(a0))
    for k in range(K):
        if ct == "spherical":
            ref += _log_marginal_spherical(
                X[y == k], zero_mean, prior.m0, prior.beta0, prior.nu0, float(prior.psi0)
            )
            continue
        psi0 = prior.psi0 if ct == "full" else np.diag(prior.psi0)
        ref += _log_marginal_chain(
            X[y == k], ct, zero_mean, prior.m0, prior.beta0, prior.nu0, psi0
        )
    np.testing.assert_allclose(elbo, ref, rtol=1e-10)


def _direct_elbo(X, R, prior, params):
    """Dense, per-sample numpy evaluation of the ELBO of responsibilities R (full, with mean)."""
    n, D = X.shape
    K = R.shape[1]
    a0, theta = prior.alpha0, params.theta
    elog_pi = digamma(theta) - digamma(theta.sum())
    # E_q[log p(z | pi)] + E_q[log p(pi)] - E_q[log q(pi)] - E_q[log q(z)]
    val = np.sum(R @ elog_pi)
    val += gammaln(K * a0) - K * gammaln(a0) + (a0 - 1) * elog_pi.sum()
    val -= gammaln(theta.sum()) - gammaln(theta).sum() + np.sum((theta - 1) * elog_pi)
    val -= np.sum(np.where(R > 0, R * np.log(np.where(R > 0, R, 1)), 0.0))
    for k in range(K):
        nu, beta, m = params.nu[k], params.beta[k], params.means[k]
        Wk = np.linalg.inv(params.scale_inv[k])
        elogdet = (
            sum(digamma((nu - i) / 2) for i in range(D)) + D * np.log(2) + np.linalg.slogdet(Wk)[1]
        )
        for i in range(n):
            d = X[i] - m
            ell = -0.5 * D * np.log(2 * np.pi) + 0.5 * elogdet - 0.5 * (D / beta + nu * d @ Wk @ d)
            val += R[i, k] * ell
        # E_q[log p(mu, Lambda)] - E_q[log q(mu, Lambda)] = -KL(q || p), Normal-Wishart
        wish_q = stats.wishart(df=nu, scale=Wk)
        W0 = np.linalg.inv(prior.psi0)
        e_log_p_lam = (
            -0.5 * prior.nu0 * np.linalg.slogdet(W0)[1]
            - 0.5 * prior.nu0 * D * np.log(2)
            - _log_multigamma(prior.nu0 / 2, D)
            + 0.5 * (prior.nu0 - D - 1) * elogdet
            - 0.5 * np.trace(prior.psi0 @ (nu * Wk))
        )
        dm = m - prior.m0
        e_log_p_mu = (
            0.5 * D * np.log(prior.beta0 / (2 * np.pi))
            + 0.5 * elogdet
            - 0.5 * prior.beta0 * (D / beta + nu * dm @ Wk @ dm)
        )
        e_log_q_mu = 0.5 * D * np.log(beta / (2 * np.pi)) + 0.5 * elogdet - 0.5 * D
        val += e_log_p_lam + wish_q.entropy() + e_log_p_mu - e_log_q_mu
    return val


def _log_multigamma(a, D):
    return 0.25 * D * (D - 1) * np.log(np.pi) + sum(gammaln(a - i / 2) for i in range(D))


def test_elbo_soft_responsibilities_matches_direct_evaluation():
    X, _ = _blobs(n_per=20, D=3)
    K = 3
    R = np.random.RandomState(5).dirichlet(np.ones(K) * 0.5, size=X.shape[0])
    est = SparseGaussianMixture(K, reg_covar=0)
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, K, K, X.dtype)
    idx = np.broadcast_to(np.arange(K, dtype=np.int32), R.shape).copy()
    s = model.stats_from_responsibilities(R, idx, X)
    # any params, not only the optimum: perturb the global step's statistics
    params = model.global_step(s * 1.3)
    np.testing.assert_allclose(
        model.elbo(s, params), _direct_elbo(X, R, prior, params), rtol=1e-10
    )
    # and the global step maximizes the ELBO for fixed statistics
    assert model.elbo(s, model.global_step(s)) > model.elbo(s, params)


# ----------------------------------------------------------------------------- algorithms
@pytest.mark.parametrize("algorithm", ["batch", "memoized"])
@pytest.mark.parametrize("L", [1, 2, 6])
@pytest.mark.parametrize("ct,zero_mean", ALL_CASES)
def test_elbo_never_decreases(algorithm, L, ct, zero_mean):
    X, _ = _blobs(n_per=60, D=3, sep=2.0)
    est = _ours(
        X,
        n_components=6,
        L=L,
        covariance_type=ct,
        zero_mean=zero_mean,
        algorithm=algorithm,
        n_batches=4,
        max_iter=25,
        tol=0,
        random_state=0,
        init_params="random",
    )
    lb = np.asarray(est.lower_bounds_)
    assert len(lb) == 25
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    assert lb[-1] > lb[0]


@pytest.mark.parametrize("ct,zero_mean", ALL_CASES)
def test_first_memoized_pass_equals_batch_iteration(ct, zero_mean):
    X, _ = _blobs(n_per=50)
    kw = dict(n_components=4, covariance_type=ct, zero_mean=zero_mean, max_iter=1, random_state=7)
    b = _ours(X, algorithm="batch", **kw)
    m = _ours(X, algorithm="memoized", n_batches=5, **kw)
    for a in ATTRS:
        np.testing.assert_allclose(getattr(m, a), getattr(b, a), rtol=1e-12, atol=1e-12, err_msg=a)
    np.testing.assert_allclose(m.lower_bound_, b.lower_bound_, rtol=1e-12)


def test_partial_fit_stream_reaches_batch_score():
    X, _ = _blobs(n_per=800, D=4, sep=4.0, n_clusters=5, seed=11)
    X_test, _ = _blobs(n_per=200, D=4, sep=4.0, n_clusters=5, seed=11)  # same centers, new draw
    X_test = X_test + 0.0
    Xtr, Xho = X[:3200], X_test
    batch = _ours(Xtr, n_components=5, L=2, random_state=0, tol=1e-8)
    online = SparseGaussianMixture(5, L=2, random_state=0, total_samples=Xtr.shape[0], kappa=0.6)
    rng = np.random.RandomState(0)
    for _ in range(6):
        for chunk in np.array_split(rng.permutation(Xtr.shape[0]), 16):
            online.partial_fit(Xtr[chunk])
    s_b, s_o = batch.score(Xho), online.score(Xho)
    assert abs(s_o - s_b) <= 0.01 * abs(s_b), (s_o, s_b)
    # partial_fit counts its steps in n_batch_iter_ (as SparseLDA); n_iter_ counts fit's passes
    assert online.n_batch_iter_ == 96 and len(online.trace_) == 96
    assert online.n_iter_ == 0


def test_stochastic_fit_runs_and_records_trace():
    X, _ = _blobs(n_per=200)
    est = SparseGaussianMixture(
        3, L=2, algorithm="stochastic", batch_size=64, max_iter=4, tol=0, random_state=0
    ).fit(X)
    assert est.n_iter_ == 4 and len(est.trace_) == 4
    for key in ["time_weights", "time_responsibilities", "time_summary", "rho", "elapsed"]:
        assert key in est.trace_[-1]


def test_heldout_trace_and_verbose(capsys):
    X, _ = _blobs(n_per=100)
    est = SparseGaussianMixture(
        3,
        algorithm="memoized",
        n_batches=3,
        max_iter=4,
        tol=0,
        random_state=0,
        verbose=2,
        verbose_interval=2,
    )
    with pytest.warns(ConvergenceWarning, match="did not converge in 4 passes"):
        est._fit(X[:200], X_heldout=X[200:])
    assert [e["pass"] for e in est.trace_] == [1, 2, 3, 4]
    np.testing.assert_allclose(est.trace_[-1]["heldout"], est.score(X[200:]), rtol=1e-12)
    err = capsys.readouterr().err
    # verbose_interval=2: the first pass, then every second one
    assert err.count("pass") == 3 and "weights" in err


# --------------------------------------------------------------------- direct numpy references
def test_zero_mean_wishart_posterior_one_iteration():
    # one iteration from given labels, recomputed in plain numpy: E-step weights, softmax,
    # Wishart posterior nu_k = nu0 + N_k, W_k^-1 = Psi0 + sum_n r_nk x_n x_n^T + reg N_k I.
    # A large reg_covar makes its terms visible.
    rng = np.random.RandomState(4)
    X = rng.randn(120, 3) @ rng.randn(3, 3)
    K, reg = 3, 1e-3
    labels = rng.randint(K, size=X.shape[0])
    est = _ours(
        X,
        n_components=K,
        zero_mean=True,
        init_params=labels,
        max_iter=1,
        reg_covar=reg,
        weight_concentration_prior=0.5,
        degrees_of_freedom_prior=5.0,
    )
    D = 3
    # default prior: second moment, plus reg_covar for each of the nu0 prior pseudo-samples
    Psi0 = X.T @ X / X.shape[0] + reg * 5.0 * np.eye(D)
    np.testing.assert_allclose(est.covariance_prior_, Psi0)

    def posterior(R):
        Nk = R.sum(0)
        Winv = np.array(
            [Psi0 + (R[:, k, None] * X).T @ X + reg * Nk[k] * np.eye(D) for k in range(K)]
        )
        return Nk, 5.0 + Nk, Winv, 0.5 + Nk

    Nk, nu, Winv, theta = posterior(np.eye(K)[labels])
    W = np.empty((X.shape[0], K))
    for k in range(K):
        Wk = np.linalg.inv(Winv[k])
        elogdet = (
            sum(digamma((nu[k] - i) / 2) for i in range(D))
            + D * np.log(2)
            + np.log(np.linalg.det(Wk))
        )
        W[:, k] = (
            digamma(theta[k])
            - digamma(theta.sum())
            + 0.5 * elogdet
            - 0.5 * D * np.log(2 * np.pi)
            - 0.5 * nu[k] * np.einsum("ni,ij,nj->n", X, Wk, X)
            - 0.5 * reg * nu[k] * np.trace(Wk)
        )
    R = np.exp(W - logsumexp(W, axis=1, keepdims=True))
    Nk, nu, Winv, theta = posterior(R)
    np.testing.assert_allclose(est.degrees_of_freedom_, nu, rtol=1e-10)
    np.testing.assert_allclose(est.covariances_, Winv / nu[:, None, None], rtol=1e-10)
    np.testing.assert_allclose(est.weights_, theta / theta.sum(), rtol=1e-10)
    np.testing.assert_array_equal(est.means_, 0.0)
    assert np.all(np.isinf(est.mean_precision_))


@pytest.mark.parametrize("ct,zero_mean", ALL_CASES)
def test_score_samples_predict_proba_transform(ct, zero_mean):
    X, _ = _blobs(n_per=60)
    K, L = 4, 2
    est = _ours(X, n_components=K, L=L, covariance_type=ct, zero_mean=zero_mean, random_state=0)
    # score_samples against scipy densities of the point estimates
    D = X.shape[1]
    if ct == "full":
        cov = est.covariances_
    elif ct == "diag":
        cov = np.array([np.diag(c) for c in est.covariances_])
    else:
        assert est.covariances_.shape == (K,)
        cov = np.array([c * np.eye(D) for c in est.covariances_])
        np.testing.assert_allclose(est.precisions_, 1.0 / est.covariances_, rtol=1e-12)
    ref = logsumexp(
        np.column_stack(
            [
                np.log(est.weights_[k])
                + stats.multivariate_normal.logpdf(X, est.means_[k], cov[k])
                for k in range(K)
            ]
        ),
        axis=1,
    )
    np.testing.assert_allclose(est.score_samples(X), ref, rtol=1e-9)
    np.testing.assert_allclose(est.score(X), ref.mean(), rtol=1e-9)
    # responsibilities: rows sum to one, at most L non-zeros, argmax = predict
    R = est.predict_proba(X)
    assert R.shape == (X.shape[0], K)
    np.testing.assert_allclose(R.sum(1), 1.0, rtol=1e-12)
    assert np.all((R > 0).sum(1) <= L)
    np.testing.assert_array_equal(R.argmax(1), est.predict(X))
    S = est.transform(X, sparse_output=True)
    assert sp.issparse(S) and S.format == "csr" and np.all(np.diff(S.indptr) == L)
    np.testing.assert_allclose(S.toarray(), est.transform(X))
    # the dense model (L = K) gives the exact softmax of the weights
    dense = est.set_params(L=None)
    Wfull = dense._weights(X)
    np.testing.assert_allclose(
        dense.predict_proba(X),
        np.exp(Wfull - logsumexp(Wfull, 1, keepdims=True)),
        rtol=1e-9,
        atol=1e-15,
    )


def test_sample_moments():
    X, _ = _blobs(n_per=100)
    est = _ours(X, n_components=3, random_state=0)
    Xs, ys = est.sample(20000)
    assert Xs.shape == (20000, 3) and ys.shape == (20000,)
    k = np.bincount(ys).argmax()
    np.testing.assert_allclose(Xs[ys == k].mean(0), est.means_[k], atol=0.1)
    np.testing.assert_allclose(np.cov(Xs[ys == k].T), est.covariances_[k], atol=0.15)
    np.testing.assert_allclose(np.bincount(ys, minlength=3) / 20000, est.weights_, atol=0.02)


def test_sample_with_float32_weights_that_sum_above_one_in_float64():
    """float32 weights cast to float64 can put the first K - 1 above 1 (a tiny last weight),
    which numpy's multinomial refuses; sample() renormalizes after the cast."""
    X, _ = _blobs(n_per=30)
    est = _ours(X.astype(np.float32), n_components=3, random_state=0)
    rng = np.random.default_rng(0)
    while True:  # float32 weights whose float64 cast has sum(w[:-1]) > 1
        w = rng.dirichlet([1.0, 1.0, 1e-3]).astype(np.float32)
        w = (w / w.sum()).astype(np.float32)
        if w.astype(np.float64)[:-1].sum() > 1.0:
            break
    est.weights_ = w
    Xs, ys = est.sample(100)
    assert Xs.shape == (100, 3) and Xs.dtype == np.float32 and np.all(ys < 2)


def test_kmeanspp_labels_of_float32_data_far_from_the_origin():
    """The nearest-center labels of the k-means++ start are computed in float64 about the
    centers' mean: float32 data 1e4 from the origin get the labels of exact distances."""
    from sparseclust.mixture._gmm_init import _nearest

    X, _ = _blobs(n_per=200, sep=3.0)
    X = X * 0.5 + 1e4
    X32 = X.astype(np.float32)
    C32 = X32[[0, 250, 500, 100, 300]]
    exact = ((X32.astype(np.float64)[:, None, :] - C32.astype(np.float64)[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(_nearest(X32, C32), exact.argmin(1))


def test_predict_refuses_rows_whose_weights_overflow_as_predict_proba_does():
    X, _ = _blobs(n_per=30)
    m = _ours(X.astype(np.float32), n_components=3, random_state=0)
    far = np.full((2, 3), 1e20, dtype=np.float32)  # squared distances overflow float32
    for method in (m.predict_proba, m.predict):
        with pytest.raises(ValueError, match="no finite weight"):
            method(far)
    np.testing.assert_array_equal(m.predict(X.astype(np.float32)),
                                  m.predict_proba(X.astype(np.float32)).argmax(1))


def test_non_finite_priors_are_refused():
    X, _ = _blobs(n_per=30)
    for kw, match in [
        (dict(covariance_type="diag", covariance_prior=np.array([1.0, np.inf, 1.0])),
         "covariance_prior must be positive and finite"),
        (dict(covariance_type="full", covariance_prior=np.full((3, 3), np.inf)),
         "covariance_prior must be finite"),
        (dict(weight_concentration_prior=np.inf), "range"),
        (dict(degrees_of_freedom_prior=np.inf), "range"),
    ]:
        with pytest.raises(ValueError, match=match):
            SparseGaussianMixture(n_components=2, max_iter=2, **kw).fit(X)


def test_dp_mixture_from_one_cluster_grows_by_births():
    """With a single cluster there is nothing to merge or delete; births are tried from the
    first move round (they waited for a round that tried a merge or delete, which never
    came, so a fit from n_components=1 stayed at one cluster)."""
    X, _ = _blobs(n_per=100, D=2, n_clusters=2, sep=8.0)
    m = SparseGaussianMixture(n_components=1, weight_concentration_prior_type="dirichlet_process",
                              covariance_type="diag", max_iter=60, random_state=0).fit(X)
    assert sum(e["births_accepted"] for e in m.trace_) >= 1
    assert m.n_components_ == 2


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_birth_re_infers_all_of_a_large_target(covariance_type):
    """A birth re-infers every row of its target (up to BIRTH_VALUES / n_features): with a
    subsample of a large cluster (500 of 3,000 rows in an earlier default) the rows left
    behind keep the target broad and heavy, the fresh clusters get a small weight, and the
    birth was rejected, so three separated blobs of 1,000 points stayed one cluster. The
    clusters found must be the blobs (adjusted Rand index against the planted labels)."""
    from sklearn.metrics import adjusted_rand_score

    from sparseclust.mixture._dp_moves import BIRTH_VALUES

    X, labels = _blobs(n_per=1000, D=2, n_clusters=3, sep=8.0)
    assert BIRTH_VALUES // X.shape[1] >= X.shape[0]
    m = SparseGaussianMixture(n_components=1, weight_concentration_prior_type="dirichlet_process",
                              covariance_type=covariance_type, max_iter=60,
                              random_state=0).fit(X)
    assert m.n_components_ == 3
    assert adjusted_rand_score(labels, m.predict(X)) > 0.99


def test_dp_model_with_dense_responsibilities_stays_dense_as_k_changes():
    """L=None asks for dense responsibilities: after births grow K (or moves shrink it) the
    model's L follows K (it stayed at the starting K, so born clusters made training
    L-sparse while predict_proba is dense); an integer L is clamped to K."""
    from sparseclust.mixture._gmm_model import _DPMixtureModel

    X, _ = _blobs(n_per=30)
    est = SparseGaussianMixture(2, L=None, weight_concentration_prior_type="dirichlet_process")
    prior = est._build_prior(X)
    dense = _DPMixtureModel(prior, 2, None, X.dtype, moves=("birth",))
    assert dense.L == 2
    dense.set_n_components(5)
    assert dense.L == 5 and dense.plain_model(4).L == 4
    sparse = _DPMixtureModel(prior, 2, 2, X.dtype, moves=("birth",))
    sparse.set_n_components(5)
    assert sparse.L == 2
    built = est._make_model(prior, X.dtype, moves=("birth",))
    assert built._L_requested is None and built.L == 2


# ----------------------------------------------------------------------------- API contracts
@parametrize_with_checks(
    [
        SparseGaussianMixture(n_components=2, max_iter=20, random_state=0),
        SparseGaussianMixture(
            n_components=3,
            L=1,
            algorithm="memoized",
            n_batches=3,
            covariance_type="diag",
            max_iter=10,
            random_state=0,
        ),
        # the Dirichlet-process prior with its moves (which change n_components_)
        SparseGaussianMixture(
            n_components=4,
            L=2,
            weight_concentration_prior_type="dirichlet_process",
            weight_concentration_prior=1.0,
            n_batches=2,
            max_iter=10,
            random_state=0,
        ),
        SparseGaussianMixture(
            n_components=2,
            L=1,
            algorithm="stochastic",
            batch_size=8,
            zero_mean=True,
            max_iter=5,
            random_state=0,
        ),
    ]
)
@pytest.mark.contract
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


@pytest.mark.contract
def test_grid_search_selects_by_heldout_score():
    X, _ = _blobs(n_per=100, D=4, n_clusters=4, sep=3.0)
    K = 6
    base = SparseGaussianMixture(
        K, algorithm="stochastic", batch_size=100, max_iter=3, random_state=0
    )
    grid = {"L": [1, 4, K], "kappa": [0.6, 0.9], "delta": [1, 10]}
    gs = GridSearchCV(base, grid, cv=2).fit(X)
    means = gs.cv_results_["mean_test_score"]
    assert len(means) == 12 and np.all(np.isfinite(means))
    # every fold score is the held-out mean log-likelihood of the fold under a model fitted on
    # the other fold with those parameters: recompute all of them by hand
    from sklearn.base import clone
    from sklearn.model_selection import KFold

    folds = list(KFold(2).split(X))
    manual = np.empty((len(gs.cv_results_["params"]), 2))
    for i, params in enumerate(gs.cv_results_["params"]):
        for f, (tr, te) in enumerate(folds):
            fold = clone(base).set_params(**params).fit(X[tr])
            manual[i, f] = fold.score(X[te])
    np.testing.assert_allclose(gs.cv_results_["split0_test_score"], manual[:, 0], rtol=1e-12)
    np.testing.assert_allclose(gs.cv_results_["split1_test_score"], manual[:, 1], rtol=1e-12)
    assert gs.best_params_ == gs.cv_results_["params"][int(np.argmax(manual.mean(1)))]

    pipe = Pipeline(
        [
            ("scale", StandardScaler()),
            ("pca", PCA(n_components=3)),
            (
                "gmm",
                SparseGaussianMixture(
                    K, algorithm="stochastic", batch_size=100, max_iter=3, random_state=0
                ),
            ),
        ]
    )
    gs2 = GridSearchCV(pipe, {f"gmm__{k}": v for k, v in grid.items()}, cv=2).fit(X)
    # the refitted pipeline scores X through its transformers
    best = clone(pipe).set_params(**gs2.best_params_).fit(X)
    Z = best[:-1].transform(X)
    np.testing.assert_allclose(gs2.score(X), best[-1].score(Z), rtol=1e-12)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_rejects_nan_inf(bad):
    X, _ = _blobs()
    X[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGaussianMixture(2).fit(X)
    est = _ours(_blobs()[0], n_components=2)
    with pytest.raises(ValueError, match="NaN|infinity"):
        est.predict(X)
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGaussianMixture(2).partial_fit(X)


def test_rejects_bad_input():
    X, _ = _blobs(n_per=3)
    with pytest.raises(ValueError, match="n_samples >= n_components"):
        SparseGaussianMixture(20).fit(X)
    with pytest.raises(ValueError, match="n_samples >= n_components"):
        SparseGaussianMixture(20).partial_fit(X)
    est = _ours(X, n_components=2)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="features"):
        est.score(np.hstack([X, X]))
    on = SparseGaussianMixture(2).partial_fit(X)
    with pytest.raises(ValueError, match="features"):
        on.partial_fit(X[:, :2])
    with pytest.raises(ValueError, match="degrees_of_freedom_prior"):
        SparseGaussianMixture(2, degrees_of_freedom_prior=1.0).fit(X)
    with pytest.raises(ValueError, match="mean_prior"):
        SparseGaussianMixture(2, mean_prior=[0.0, 1.0]).fit(X)
    with pytest.raises(ValueError, match="positive definite"):
        SparseGaussianMixture(2, covariance_prior=-np.eye(3)).fit(X)
    with pytest.raises(ValueError, match="shape"):
        SparseGaussianMixture(2, covariance_type="diag", covariance_prior=np.eye(3)).fit(X)
    with pytest.raises(ValueError, match="labels"):
        SparseGaussianMixture(2, init_params=np.full(X.shape[0], 5)).fit(X)
    with pytest.raises(ValueError, match="shape"):
        SparseGaussianMixture(2, init_params=np.ones((4, 2))).fit(X)
    with pytest.raises(ValueError, match="algorithm"):
        SparseGaussianMixture(2, algorithm="gibbs").fit(X)


@pytest.mark.parametrize("ct,zero_mean", ALL_CASES)
def test_float32_in_float32_out(ct, zero_mean):
    X, _ = _blobs(n_per=100)
    kw = dict(
        n_components=3,
        L=2,
        covariance_type=ct,
        zero_mean=zero_mean,
        random_state=0,
        max_iter=30,
        tol=1e-10,
    )
    e32 = _ours(X.astype(np.float32), **kw)
    e64 = _ours(X, **kw)
    for a in ["weights_", "means_", "covariances_", "precisions_", "precisions_cholesky_"]:
        assert getattr(e32, a).dtype == np.float32, a
        np.testing.assert_allclose(
            getattr(e32, a), getattr(e64, a), rtol=2e-3, atol=2e-3, err_msg=a
        )
    assert e32.transform(X.astype(np.float32)).dtype == np.float32
    assert e32.sample(5)[0].dtype == np.float32
    np.testing.assert_allclose(e32.score(X.astype(np.float32)), e64.score(X), rtol=1e-4)


@pytest.mark.contract
def test_pickle_determinism_and_input_untouched():
    X, _ = _blobs(n_per=100)
    X.setflags(write=False)  # read-only input must work and stay untouched
    X_before = X.copy()
    kw = dict(n_components=4, L=2, algorithm="memoized", n_batches=3, random_state=42)
    a = _ours(X, **kw)
    b = _ours(X, **kw)
    np.testing.assert_array_equal(X, X_before)
    for attr in ATTRS + ["lower_bounds_"]:
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(c.predict_proba(X), a.predict_proba(X))
    np.testing.assert_array_equal(c.score_samples(X), a.score_samples(X))
    # a different seed gives a different initialization
    d = _ours(X, **{**kw, "random_state": 3, "init_params": "random"})
    assert not np.array_equal(d.lower_bounds_, a.lower_bounds_)


@pytest.mark.contract
def test_warm_start_and_n_init():
    X, _ = _blobs(n_per=80)
    est = _ours(X, n_components=3, max_iter=2, tol=0, random_state=0, warm_start=True)
    first = est.lower_bound_
    with pytest.warns(ConvergenceWarning):
        est.fit(X)
    assert est.lower_bound_ >= first - 1e-9 * abs(first)
    # a changed n_components cannot be continued: a clear error, and the fit is left as is
    weights = est.weights_.copy()
    est.set_params(n_components=5)
    with pytest.raises(ValueError, match=r"n_components=5 differs from the n_components=3"):
        est.fit(X)
    np.testing.assert_array_equal(est.weights_, weights)
    # without warm_start the new n_components is simply a new fit
    assert _ours(X, **{**est.get_params(), "warm_start": False}).n_components_ == 5
    # n_init keeps the initialization with the largest final ELBO: record every run
    runs = []
    original = SparseGaussianMixture._run_engine

    def recording(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        runs.append(result)
        return result

    kw = dict(n_components=3, init_params="random", max_iter=5, random_state=0)
    SparseGaussianMixture._run_engine = recording
    try:
        best = _ours(X, n_init=4, **kw)
    finally:
        SparseGaussianMixture._run_engine = original
    finals = [r.lower_bound for r in runs]
    assert len(finals) == 4 and len(set(finals)) > 1  # the initializations differ
    kept = int(np.argmax(finals))
    assert best.lower_bound_ == finals[kept]
    assert best.lower_bounds_ == runs[kept].lower_bounds
    np.testing.assert_array_equal(best.weight_concentration_, runs[kept].params.theta)


@pytest.mark.kernels
@pytest.mark.parametrize("algorithm", ["batch", "memoized", "stochastic"])
@pytest.mark.parametrize("ct,zero_mean", ALL_CASES)
def test_threads_give_identical_results(algorithm, ct, zero_mean):
    # blocks of n_rows * K weights above the size where the kernels start to use threads, so
    # that two threads really share the work; everything must be bit-identical
    from sparseclust.mixture._gmm_model import _MIN_PARALLEL_WEIGHTS
    from sparseclust.utils._threads import threads_for_work

    X, _ = _blobs(n_per=4000, D=5, n_clusters=3, sep=3.0)
    K = 8
    kw = dict(n_components=K, L=3, covariance_type=ct, zero_mean=zero_mean,
              algorithm=algorithm, n_batches=2, batch_size=6000, max_iter=4, tol=0,
              random_state=0)
    assert (X.shape[0] // 2) * K >= _MIN_PARALLEL_WEIGHTS
    assert threads_for_work(2, 6000 * K, _MIN_PARALLEL_WEIGHTS, scale=False) == 2
    a = _ours(X, n_threads=1, **kw)
    b = _ours(X, n_threads=2, **kw)
    for attr in ATTRS + ["precisions_", "lower_bounds_"]:
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
    for method in ("predict_proba", "score_samples", "predict"):
        np.testing.assert_array_equal(getattr(a, method)(X), getattr(b, method)(X))
    np.testing.assert_array_equal(
        a.transform(X, sparse_output=True).toarray(), b.transform(X, sparse_output=True).toarray()
    )


# ----------------------------------------------------------------------------- weight kernel
@pytest.mark.kernels
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_weight_kernels_match_numpy(dtype, n_threads):
    rng = np.random.RandomState(0)
    # N not a multiple of the row block; D = 37 exercises two uneven levels of triangular
    # blocking, D = 7 none
    for N, D, K in [(1000, 7, 5), (300, 37, 3)]:
        X = rng.randn(N, D).astype(dtype)
        C = np.triu(rng.randn(K, D, D)).astype(dtype)
        off = rng.randn(K, D).astype(dtype)
        for a in (X, C, off):
            a.setflags(write=False)  # read-only inputs must work
        _check_weight_kernels(X, C, off, dtype, n_threads)


def _check_weight_kernels(X, C, off, dtype, n_threads):
    from sparseclust._kernels._gmm_weights import mahalanobis_sq, mahalanobis_sq_diag

    N, K = X.shape[0], C.shape[0]
    rtol = 1e-4 if dtype == np.float32 else 1e-12
    for use_off in (True, False):
        out = np.empty((N, K), dtype=dtype)
        mahalanobis_sq(X, C, off, out, use_off, n_threads)
        Y = np.einsum("ni,kij->nkj", X.astype(float), C.astype(float))
        Y = Y - (off if use_off else 0)
        np.testing.assert_allclose(out, np.einsum("nkd,nkd->nk", Y, Y), rtol=rtol)
        S = np.abs(off)
        mahalanobis_sq_diag(X, S, off, out, use_off, n_threads)
        ref = ((X[:, None, :].astype(float) * S - (off if use_off else 0)) ** 2).sum(-1)
        np.testing.assert_allclose(out, ref, rtol=rtol)


@pytest.mark.kernels
@pytest.mark.parametrize("n_threads", [1, 2])
def test_scale_factors_kernel_against_numpy(n_threads):
    # the global step's factors of the posterior scale matrices against numpy's Cholesky and
    # inverse: symmetrized in place, log |Psi|, C = sqrt(nu) L^-T (upper triangular, C C^T =
    # nu Psi^-1), tr(C C^T); D = 70 > one LAPACK block; a matrix that is not positive definite
    # and one with a zero dimension are flagged, not factored silently
    from sparseclust._kernels._gmm_weights import scale_factors

    rng = np.random.RandomState(0)
    for K, D in [(6, 3), (4, 70)]:
        A = rng.randn(K, D + 5, D)
        S = np.einsum("kni,knj->kij", A, A) + 0.1 * np.eye(D)
        S_in = S + 1e-9 * rng.randn(K, D, D)  # slightly asymmetric
        nu = rng.uniform(D, 2 * D, K)
        sym = 0.5 * (S_in + np.swapaxes(S_in, 1, 2))
        for invert in (True, False):
            work = S_in.copy()
            out = np.empty_like(work)
            logdet, tr = np.full(K, np.nan), np.full(K, np.nan)
            status = np.full(K, 7, dtype=np.int32)
            scale_factors(work, out, nu, logdet, tr, status, True, invert, n_threads)
            np.testing.assert_array_equal(status, 0)
            np.testing.assert_array_equal(work, np.swapaxes(work, 1, 2))
            np.testing.assert_allclose(work, sym, rtol=1e-15)
            np.testing.assert_allclose(logdet, np.linalg.slogdet(sym)[1], rtol=1e-12)
            L = np.linalg.cholesky(sym)
            if invert:
                C = np.sqrt(nu)[:, None, None] * np.swapaxes(np.linalg.inv(L), 1, 2)
                np.testing.assert_allclose(out, C, rtol=1e-10, atol=1e-12 * np.abs(C).max())
                np.testing.assert_array_equal(np.tril(out, -1), 0.0)
                np.testing.assert_allclose(tr, (C ** 2).sum((1, 2)), rtol=1e-12)
                np.testing.assert_allclose(out @ np.swapaxes(out, 1, 2),
                                           nu[:, None, None] * np.linalg.inv(sym), rtol=1e-8,
                                           atol=1e-10)
            else:
                np.testing.assert_allclose(out, np.swapaxes(L, 1, 2), rtol=1e-12,
                                           atol=1e-14 * np.abs(L).max())
    bad = np.stack([np.eye(3), -np.eye(3), np.diag([1.0, 0.0, 1.0])])
    status = np.zeros(3, dtype=np.int32)
    scale_factors(bad.copy(), np.empty_like(bad), np.ones(3), np.empty(3), np.empty(3), status,
                  True, True, n_threads)
    np.testing.assert_array_equal(status, [0, 1, 1])


@pytest.mark.kernels
@pytest.mark.parametrize("n_threads", [1, 2])
def test_factor_kernels_flag_each_matrix_on_its_own(n_threads):
    # LAPACK's ``info`` is per thread: with good and non-positive-definite matrices
    # interleaved over many components, each status (and log-determinant) is that matrix's
    # own, for both the global step's kernel and the merge candidates' kernel
    from sparseclust._kernels import _gmm_weights

    rng = np.random.RandomState(5)
    K, D = 400, 8
    A = rng.randn(K, D + 4, D)
    S = np.einsum("kni,knj->kij", A, A) + 0.1 * np.eye(D)
    bad = rng.rand(K) < 0.5
    S[bad] = -S[bad]
    ref = np.where(bad, 0.0, np.linalg.slogdet(np.where(bad[:, None, None], np.eye(D), S))[1])
    for _ in range(3):
        status = np.full(K, 7, dtype=np.int32)
        logdet = np.zeros(K)
        _gmm_weights.scale_factors(S.copy(), np.empty_like(S), np.full(K, D + 1.0), logdet,
                                   np.empty(K), status, False, True, n_threads)
        np.testing.assert_array_equal(status, bad.astype(np.int32))
        np.testing.assert_allclose(logdet[~bad], ref[~bad], rtol=1e-12)
        # pairs (k, k) with a zero prior: the pooled matrix is 2 S_k
        pa = np.arange(K, dtype=np.int64)
        status = np.full(K, 7, dtype=np.int32)
        logdet = np.zeros(K)
        _gmm_weights.pooled_logdet(S, np.zeros((D, D)), pa, pa, np.zeros(K), False, logdet,
                                   status, n_threads)
        np.testing.assert_array_equal(status, bad.astype(np.int32))
        np.testing.assert_allclose(logdet[~bad], ref[~bad] + D * np.log(2.0), rtol=1e-12)


def test_pooled_logdet_rejects_inconsistent_input():
    from sparseclust._kernels import _gmm_weights

    S = np.repeat(np.eye(3)[None], 4, axis=0)
    pa = np.array([0, 1], dtype=np.int64)
    ld, st = np.empty(2), np.empty(2, dtype=np.int32)
    with pytest.raises(IndexError):
        _gmm_weights.pooled_logdet(S, np.eye(3), pa, np.array([0, 4], dtype=np.int64),
                                   np.zeros(2), False, ld, st, 1)
    with pytest.raises(ValueError):
        _gmm_weights.pooled_logdet(S, np.eye(2), pa, pa, np.zeros(2), False, ld, st, 1)
    with pytest.raises(ValueError):
        _gmm_weights.pooled_logdet(S, np.eye(3), pa, pa, np.zeros(3), False, ld, st, 1)


def test_float32_weights_accurate_for_nearly_singular_covariance():
    # mean-removed patches lie in a hyperplane: precisions along its normal are huge; the
    # float32 quadratic form must still match float64 (squares taken after the product)
    rng = np.random.RandomState(0)
    X = rng.randn(2000, 16) * np.linspace(0.01, 1.0, 16)
    X -= X.mean(axis=1, keepdims=True)
    est = _ours(X, n_components=4, zero_mean=True, reg_covar=1e-9, max_iter=5, random_state=0)
    W64 = est._weights(X)
    W32 = est._weights(X.astype(np.float32))
    assert W32.dtype == np.float32
    np.testing.assert_allclose(W32, W64, rtol=1e-4, atol=1e-3 * np.abs(W64).mean())


@pytest.mark.contract
def test_feature_names_out_and_partial_fit_after_fit():
    X, _ = _blobs(n_per=60)
    est = _ours(X, n_components=3, random_state=0)
    names = est.get_feature_names_out()
    assert list(names) == [f"sparsegaussianmixture{k}" for k in range(3)]
    # partial_fit continues from the fitted statistics with stochastic steps
    before = est.means_.copy()
    t_before = est._svi_state.t
    est.set_params(total_samples=X.shape[0]).partial_fit(X[:50])
    assert est._svi_state.t == t_before + 1 and not np.array_equal(est.means_, before)
    np.testing.assert_allclose(est.means_, before, atol=1.0)


# ----------------------------------------------------------------------------- candidate sets
def _overlapping(seed=0, n=600, D=4, n_clusters=8):
    rng = np.random.RandomState(seed)
    centers = rng.randn(n_clusters, D) * 1.5
    return rng.randn(n, D) + centers[rng.randint(n_clusters, size=n)]


@pytest.mark.parametrize("ct,zero_mean", CASES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_restricted_weights_match_full_weights(ct, zero_mean, dtype):
    """The candidate-pair weights equal the corresponding entries of the dense W."""
    X = _overlapping(seed=3).astype(dtype)
    est = _ours(
        X,
        n_components=12,
        L=3,
        covariance_type=ct,
        zero_mean=zero_mean,
        max_iter=3,
        random_state=0,
    )
    model = _SparseGMMModel(est._prior, 12, 3, X.dtype)
    W = model.weights(X, est._params)
    rng = np.random.RandomState(1)
    cand = np.argsort(rng.rand(X.shape[0], 12), axis=1)[:, :5].astype(np.int32)
    cand[:7] = 4  # many rows sharing one component (groups longer than one kernel block)
    Wc = model.restricted_weights(X, est._params, cand)
    assert Wc.dtype == X.dtype and Wc.shape == cand.shape
    ref = np.take_along_axis(W, cand, axis=1)
    tol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(Wc, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("n_candidates_factor", [1, 2])
@pytest.mark.parametrize("refresh", [2, 5])
@pytest.mark.parametrize("ct,zero_mean", [("full", False), ("diag", True)])
def test_candidates_elbo_never_decreases(n_candidates_factor, refresh, ct, zero_mean):
    X = _overlapping(seed=5)
    L = 2
    est = _ours(
        X,
        n_components=10,
        L=L,
        n_candidates=n_candidates_factor * L,
        candidate_refresh=refresh,
        covariance_type=ct,
        zero_mean=zero_mean,
        algorithm="memoized",
        n_batches=4,
        max_iter=20,
        tol=0,
        random_state=0,
        init_params="random",
    )
    lb = np.asarray(est.lower_bounds_)
    assert len(lb) == 20
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    assert lb[-1] > lb[0]


@pytest.mark.parametrize("algorithm", ["batch", "memoized"])
@pytest.mark.parametrize("ct,zero_mean", CASES)
def test_all_candidates_equal_dense_fit(algorithm, ct, zero_mean):
    """C = K runs the restricted code on every pair: same fit as without candidates."""
    X = _overlapping(seed=2, n=300)
    kw = dict(
        n_components=6,
        L=2,
        covariance_type=ct,
        zero_mean=zero_mean,
        algorithm=algorithm,
        n_batches=3,
        max_iter=8,
        tol=0,
        random_state=0,
        init_params="random",
    )
    a = _ours(X, **kw)
    b = _ours(X, n_candidates=50, candidate_refresh=3, **kw)  # clamped to K = 6
    np.testing.assert_allclose(b.lower_bounds_, a.lower_bounds_, rtol=1e-12)
    for attr in ATTRS:
        np.testing.assert_allclose(
            getattr(b, attr), getattr(a, attr), rtol=1e-12, atol=1e-12, err_msg=attr
        )


def test_candidates_are_cached_between_refreshes():
    """With C = L = 1 the hard assignments can only change on refresh passes, so the counts
    N_k stay fixed between them; with the dense W they keep moving."""
    X = _overlapping(seed=4, n=800)
    kw = dict(n_components=10, L=1, algorithm="memoized", n_batches=4, tol=0, random_state=0)
    counts = []

    def record(info):
        counts.append(np.asarray(info["stats"]["N"]).copy())

    est = SparseGaussianMixture(max_iter=7, n_candidates=1, candidate_refresh=4, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est._fit(X, callback=record)
    # passes 1 and 5 are refreshes (visits 0 and 4 of each batch); 2-4 and 6-7 reuse the cache
    assert len(counts) == 7
    for p in (1, 2, 3, 5, 6):
        np.testing.assert_array_equal(counts[p], counts[0 if p < 4 else 4])
    assert not np.array_equal(counts[4], counts[3])
    dense = []
    est = SparseGaussianMixture(max_iter=3, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est._fit(X, callback=lambda info: dense.append(np.asarray(info["stats"]["N"]).copy()))
    assert not np.array_equal(dense[1], dense[0])


@pytest.mark.parametrize("ct,zero_mean", [("full", False), ("diag", True)])
def test_adaptive_refresh_renews_exactly_the_rows_whose_weights_moved(ct, zero_mean):
    """One adaptive visit, checked against the dense weights computed here: a row is refreshed
    iff its candidate weights moved unevenly by at least its gap; refreshed rows get the top-L
    of the full row and new candidates (its top-C), the others the top-L among their old
    candidates."""
    X = _overlapping(seed=7, n=400)
    K, L, C = 12, 2, 4
    fits = [_ours(X, n_components=K, L=L, covariance_type=ct, zero_mean=zero_mean,
                  max_iter=it, tol=0, random_state=0, init_params="random") for it in (1, 3)]
    p0, p1 = fits[0]._params, fits[1]._params
    model = _SparseGMMModel(fits[0]._prior, K, L, X.dtype, n_candidates=C, refresh="auto")
    got = []
    model._collect = lambda s0, v, i, Xc: got.append((s0, np.array(v), np.array(i)))
    model.local_step(X, p0)  # first visit: full weights, candidate sets cached
    entry = model._cand_cache[0]
    W0 = model.weights(X, p0)
    order = np.argsort(-W0, axis=1)
    np.testing.assert_array_equal(np.sort(entry.cand, axis=1), np.sort(order[:, :C], axis=1))
    # two bytes a candidate id up to 65,536 components (ids 0..65,535), four beyond
    assert entry.cand.dtype == np.uint16
    assert _index_dtype(1 << 16) == np.uint16 and _index_dtype((1 << 16) + 1) == np.int32
    top = -np.sort(-W0, axis=1)
    np.testing.assert_allclose(entry.gap, top[:, L - 1] - top[:, C], rtol=1e-12)
    cand0, wref0, gap0 = entry.cand.copy(), entry.w_ref.copy(), entry.gap.copy()
    got.clear()
    model.local_step(X, p1)  # second visit: restricted, adaptive
    values = np.vstack([g[1] for g in sorted(got, key=lambda g: g[0])])
    indices = np.vstack([g[2] for g in sorted(got, key=lambda g: g[0])])
    W1 = model.weights(X, p1)
    dW = np.take_along_axis(W1, cand0, axis=1) - wref0
    stale = (dW.max(1) - dW.min(1)) >= gap0
    assert 0 < stale.sum() < X.shape[0]  # the test exercises both kinds of rows
    assert entry.rows_refreshed == stale.sum()
    v_full, i_full = posteriors.responsibilities(W1, L)
    Wc = np.take_along_axis(W1, cand0, axis=1)
    v_c, loc = posteriors.responsibilities(Wc, L)
    i_c = np.take_along_axis(cand0, loc.astype(np.intp), axis=1)

    def as_dense(v, i):
        R = np.zeros((X.shape[0], K))
        np.put_along_axis(R, i.astype(np.intp), v, axis=1)
        return R

    R = as_dense(values, indices)
    np.testing.assert_allclose(R[stale], as_dense(v_full, i_full)[stale], atol=1e-12)
    np.testing.assert_allclose(R[~stale], as_dense(v_c, i_c)[~stale], atol=1e-12)
    np.testing.assert_array_equal(entry.cand[~stale], cand0[~stale])
    order1 = np.argsort(-W1, axis=1)
    np.testing.assert_array_equal(np.sort(entry.cand[stale], axis=1),
                                  np.sort(order1[stale, :C], axis=1))


@pytest.mark.parametrize("ct,zero_mean", [("full", False), ("diag", True)])
def test_adaptive_refresh_elbo_never_decreases_and_tracks_the_dense_fit(ct, zero_mean):
    X = _overlapping(seed=5, n=900)
    kw = dict(n_components=24, L=2, covariance_type=ct, zero_mean=zero_mean,
              algorithm="memoized", n_batches=3, max_iter=25, tol=0, random_state=0)
    auto = _ours(X, n_candidates="auto", **kw)  # C = 16 < K = 24
    assert auto._effective_candidates() == 16
    lb = np.asarray(auto.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    dense = _ours(X, n_candidates=None, **kw)
    fixed = _ours(X, n_candidates=2, candidate_refresh=10, **kw)
    # the adaptive fit ends near the dense one; candidates frozen for 10 passes lag behind
    gap_auto = abs(auto.lower_bound_ - dense.lower_bound_)
    assert gap_auto < 1e-3 * abs(dense.lower_bound_)
    assert gap_auto < abs(fixed.lower_bound_ - dense.lower_bound_)


def test_auto_candidates_resolution():
    est = SparseGaussianMixture(40)
    assert est.n_candidates == "auto" and est.candidate_refresh == "auto"
    assert est._effective_candidates() == 16  # L = 4: max(16, 2 L)
    assert SparseGaussianMixture(40, L=8)._effective_candidates() == 16
    assert SparseGaussianMixture(40, L=16)._effective_candidates() == 32
    assert SparseGaussianMixture(16)._effective_candidates() is None  # not fewer than K
    assert SparseGaussianMixture(40, L=None)._effective_candidates() is None
    assert SparseGaussianMixture(40, algorithm="stochastic")._effective_candidates() is None
    # the DP mixture recomputes them when moves shrink K
    X = _overlapping(seed=1, n=200)
    est = SparseGaussianMixture(30, weight_concentration_prior_type="dirichlet_process")
    model = est._make_model(est._build_prior(X), X.dtype, candidates=True,
                            moves=("merge", "delete"))
    assert model.n_candidates == 16
    model.set_n_components(12)
    assert model.n_candidates is None
    with pytest.raises(ValueError, match="candidate_refresh"):
        SparseGaussianMixture(4, candidate_refresh="always").fit(X)
    with pytest.raises(ValueError, match="n_candidates"):
        SparseGaussianMixture(4, n_candidates="many").fit(X)


def test_candidates_validation_and_stochastic():
    X = _overlapping(seed=6, n=200)
    with pytest.raises(ValueError, match="n_candidates must be >= L"):
        SparseGaussianMixture(4, L=3, n_candidates=2, algorithm="memoized").fit(X)
    with pytest.raises(ValueError, match="candidate_refresh"):
        SparseGaussianMixture(4, n_candidates=2, L=1, candidate_refresh=0).fit(X)
    with pytest.raises(ValueError, match="n_candidates"):
        SparseGaussianMixture(4, n_candidates=0).fit(X)
    # stochastic minibatches are random: candidates are not cached, the full W is used
    kw = dict(
        n_components=4, L=2, algorithm="stochastic", batch_size=50, max_iter=3, random_state=0
    )
    a = _ours(X, **kw)
    b = _ours(X, n_candidates=2, **kw)
    np.testing.assert_array_equal(a.lower_bounds_, b.lower_bounds_)
    c = SparseGaussianMixture(n_candidates=2, **kw).partial_fit(X).partial_fit(X)
    d = SparseGaussianMixture(**kw).partial_fit(X).partial_fit(X)
    np.testing.assert_array_equal(c.means_, d.means_)


def test_partial_fit_after_batch_fit_is_a_small_step():
    rng = np.random.RandomState(0)
    centers = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0], [8.0, 8.0]])
    X = np.concatenate([c + rng.randn(100, 2) for c in centers])
    gmm = SparseGaussianMixture(
        n_components=4, algorithm="batch", max_iter=50, batch_size=40, random_state=0
    ).fit(X)
    w0, score0 = gmm.weights_.copy(), gmm.score(X)
    t0 = gmm.n_iter_ * 10  # ceil(400 / 40) steps per pass
    n_passes = gmm.n_iter_
    assert not hasattr(gmm, "n_batch_iter_")  # set by partial_fit only
    gmm.partial_fit(X[:10])  # ten points from one cluster
    assert gmm._svi_state.t == t0 + 1
    # n_iter_ keeps fit's passes; n_batch_iter_ continues fit's updates (one per batch pass)
    assert gmm.n_iter_ == n_passes and gmm.n_batch_iter_ == n_passes + 1
    rho = (gmm.delta + t0 + 1) ** -gmm.kappa
    # the weights move by at most the step size (a convex blend of count vectors), which is
    # small because the step counter resumed after the batch passes (not rho_1 = 0.66)
    assert rho < 0.3
    assert np.abs(gmm.weights_ - w0).max() <= rho + 1e-9
    assert gmm.score(X) > score0 - 0.05 * abs(score0)
    with pytest.raises(ValueError, match="n_components=5"):
        gmm.set_params(n_components=5).partial_fit(X[:10])
    gmm.set_params(n_components=4).fit(X)  # a new fit drops the count of the old steps
    assert not hasattr(gmm, "n_batch_iter_")


# ----------------------------------------------------------------------------- initialization
@pytest.mark.parametrize("ct", ["full", "diag", "spherical"])
def test_weights_means_precisions_init(ct):
    # the initial statistics are those of the top-L posterior of the given point mixture:
    # compare with responsibilities computed by scipy from the same parameters
    X, _ = _blobs(n_per=50, D=3)
    K, D = 3, 3
    rng = np.random.RandomState(1)
    w = np.array([0.5, 0.3, 0.2])
    means = X[rng.choice(X.shape[0], K, replace=False)]
    A = rng.randn(K, D, D)
    P_full = np.einsum("kij,klj->kil", A, A) + 2 * np.eye(D)
    P = {"full": P_full, "diag": rng.uniform(0.5, 2.0, (K, D)),
         "spherical": rng.uniform(0.5, 2.0, K)}[ct]
    if ct == "full":
        cov = np.linalg.inv(P_full)
    elif ct == "diag":
        cov = np.array([np.diag(1 / p) for p in P])
    else:
        cov = np.array([np.eye(D) / p for p in P])
    logp = np.column_stack([np.log(w[k]) + stats.multivariate_normal.logpdf(X, means[k], cov[k])
                            for k in range(K)])
    for L in (K, 2):
        ref_R = np.zeros_like(logp)
        top = np.argsort(-logp, axis=1)[:, :L]
        sel = np.take_along_axis(logp, top, 1)
        np.put_along_axis(ref_R, top, np.exp(sel - logsumexp(sel, 1, keepdims=True)), 1)
        est = SparseGaussianMixture(K, L=L, covariance_type=ct, weights_init=w,
                                    means_init=means, precisions_init=P, random_state=0)
        prior = est._build_prior(X)
        model = est._make_model(prior, X.dtype)
        s = est._initial_stats(model, X, np.random.RandomState(0))
        np.testing.assert_allclose(s["N"], ref_R.sum(0), rtol=1e-10)
        np.testing.assert_allclose(s["Sx"], ref_R.T @ X, rtol=1e-10)
    # a fit started at well-separated true centers keeps them
    est = _ours(X, n_components=K, covariance_type=ct, means_init=means, random_state=0)
    assert est.converged_


def test_partial_parameter_init_and_errors():
    X, y = _blobs(n_per=50, D=3)
    K = 3
    centers = np.array([X[y == k].mean(0) for k in range(K)])
    # only the means: weights and precisions come from the init_params initialization
    est = _ours(X, n_components=K, L=1, means_init=centers, init_params="random",
                random_state=0, max_iter=1)
    # one batch iteration from the hard responsibilities of those means: each point goes to
    # its own cluster's center (well separated), so the fitted means are the posterior means
    # of the clusters, (beta0 m0 + n_k xbar_k) / (beta0 + n_k)
    n_k = np.bincount(y)[:, None]
    expected = (est.mean_prior_ + n_k * centers) / (1.0 + n_k)
    np.testing.assert_allclose(est.means_, expected, rtol=1e-6)
    bad = [
        (dict(weights_init=[0.5, 0.5]), "weights_init must be 3"),
        (dict(weights_init=[0.5, 0.3, 0.3]), "sum to 1"),
        (dict(means_init=np.zeros((2, 3))), "means_init must be"),
        (dict(means_init=centers, zero_mean=True), "zero_mean"),
        (dict(precisions_init=np.ones((3, 3))), "precisions_init must be"),
        (dict(precisions_init=-np.tile(np.eye(3), (3, 1, 1))), "not positive definite"),
        (dict(precisions_init=np.ones((3, 3)), covariance_type="diag", L=None), None),
        (dict(precisions_init=-np.ones(3), covariance_type="spherical"), "positive"),
        (dict(covariance_type="spherical", covariance_prior=np.ones(3)), "positive float"),
    ]
    for kw, match in bad:
        est = SparseGaussianMixture(K, random_state=0, **kw)
        if match is None:
            est.fit(X)  # valid
        else:
            with pytest.raises(ValueError, match=match):
                est.fit(X)


def test_tol_is_the_elbo_change_per_sample():
    X, _ = _blobs(n_per=100, D=3, sep=2.0)
    est = SparseGaussianMixture(6, algorithm="batch", max_iter=500, tol=1e-4,
                                random_state=0).fit(X)
    assert est.converged_
    change = np.abs(np.diff(est.lower_bounds_)) / X.shape[0]
    np.testing.assert_allclose([e["elbo_change"] for e in est.trace_[1:]], change, rtol=1e-12)
    assert change[-1] < 1e-4 and np.all(change[:-1] >= 1e-4)
    with pytest.warns(ConvergenceWarning, match="nats per sample"):
        SparseGaussianMixture(6, max_iter=2, tol=1e-12, random_state=0).fit(X)


def test_defaults_are_sparse_and_memoized():
    est = SparseGaussianMixture(10)
    assert est.L == 4 and est.algorithm == "memoized"
    X, _ = _blobs(n_per=100, D=3, sep=2.0)
    est.set_params(random_state=0).fit(X)
    assert est.predict_proba(X).astype(bool).sum(1).max() <= 4
    # memoized: one global step per batch after the first pass
    assert est.trace_[-1]["step"] == 1 + (est.n_iter_ - 1) * est.n_batches


# ============================================================================= Dirichlet process
# The Dirichlet-process prior and its memoized moves. References: scikit-learn's
# BayesianGaussianMixture(weight_concentration_prior_type='dirichlet_process') from the same
# responsibilities, a dense per-sample numpy evaluation of the stick-breaking ELBO
# (scipy.stats.beta for the Beta entropies), a from-scratch evaluation of the merged model, and
# properties (monotone objective across passes with moves, planted-K recovery over seeds).
from sparseclust._engine import SuffStats, fit_engine  # noqa: E402
from sparseclust._moves import MoveRound  # noqa: E402
from sparseclust.mixture import _gaussian  # noqa: E402
from sparseclust.mixture._dp_moves import _symmetric_kl  # noqa: E402
from sparseclust.mixture._dp_rows import (  # noqa: E402
    _pair_lookup,
    _row_pair_entropy,
    _sum_pairs,
    restrict,
)
from sparseclust.mixture._dp_workspace import _Workspace  # noqa: E402
from sparseclust.mixture._gmm_model import _DPMixtureModel  # noqa: E402

DP = "dirichlet_process"


def _sk_dp(X, R0, max_iter, gamma):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return _BGMFixedInit(
            resp0=R0,
            n_components=R0.shape[1],
            covariance_type="full",
            weight_concentration_prior_type=DP,
            weight_concentration_prior=gamma,
            # our default nu0 for a full-covariance DP mixture, given explicitly to theirs
            degrees_of_freedom_prior=1.5 * X.shape[1],
            max_iter=max_iter,
            tol=0,
            reg_covar=0,
        ).fit(X)


def _dense_idx(n, K):
    return np.broadcast_to(np.arange(K, dtype=np.int32), (n, K)).copy()


# ----------------------------------------------------------------------------- the prior
@pytest.mark.contract
@pytest.mark.parametrize("gamma", [None, 0.3, 2.5])
def test_dp_global_step_matches_sklearn(gamma):
    # one M-step from the same responsibilities: sticks, E[log pi], weights
    X, _ = _blobs(D=3)
    K = 5
    R0 = np.random.RandomState(3).dirichlet(np.ones(K) * 0.7, size=X.shape[0])
    sk = _sk_dp(X, R0, 1, gamma)
    sk._initialize(X, R0)
    est = SparseGaussianMixture(
        K, weight_concentration_prior_type=DP, weight_concentration_prior=gamma, reg_covar=0
    )
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, K, K, X.dtype)
    params = model.global_step(model.stats_from_responsibilities(R0, _dense_idx(*R0.shape), X))
    est._set_fitted(params, None, X.dtype)
    a, b = est.weight_concentration_
    np.testing.assert_allclose(a, sk.weight_concentration_[0], rtol=1e-10)
    np.testing.assert_allclose(b, sk.weight_concentration_[1], rtol=1e-10)
    np.testing.assert_allclose(params.elog_pi, sk._estimate_log_weights(), rtol=1e-10)
    sk._set_parameters(sk._get_parameters())  # computes scikit-learn's weights_
    np.testing.assert_allclose(est.weights_, sk.weights_, rtol=1e-10)


@pytest.mark.contract
def test_dp_fit_matches_sklearn_iterations():
    # exact dense batch coordinate ascent = scikit-learn's variational EM with its DP prior
    X, _ = _blobs()
    K = 4
    R0 = np.random.RandomState(1).dirichlet(np.ones(K), size=X.shape[0])
    sk = _sk_dp(X, R0, 6, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        us = SparseGaussianMixture(
            K, L=None, algorithm="batch", weight_concentration_prior_type=DP, moves="none",
            init_params=R0, max_iter=6, tol=0, reg_covar=0,
        ).fit(X)
    for a in ATTRS:
        ours, ref = getattr(us, a), getattr(sk, a)
        if a == "weight_concentration_":
            for u, r in zip(ours, ref, strict=True):
                np.testing.assert_allclose(u, r, rtol=1e-6, err_msg=a)
        else:
            np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-9, err_msg=a)
    # scikit-learn's bound drops prior-only constants: the difference must be constant
    diff = np.asarray(us.lower_bounds_) - np.asarray(sk.recorded_bounds_)
    np.testing.assert_allclose(diff, diff[0], rtol=1e-9)


@pytest.mark.parametrize("ct", ["full", "diag", "spherical"])
@pytest.mark.parametrize("prior_type", [DP, "dirichlet_distribution"])
def test_default_degrees_of_freedom_prior(ct, prior_type):
    # nu0 = 1.5 D only for a full-covariance DP mixture, D otherwise; the default acts as the
    # same value given explicitly, and an explicit value is kept
    X, _ = _blobs(n_per=20, D=4)
    D = X.shape[1]
    kw = dict(n_components=3, covariance_type=ct, weight_concentration_prior_type=prior_type,
              max_iter=3, tol=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        default = SparseGaussianMixture(**kw).fit(X)
        nu0 = 1.5 * D if (ct == "full" and prior_type == DP) else float(D)
        explicit = SparseGaussianMixture(degrees_of_freedom_prior=nu0, **kw).fit(X)
        other = SparseGaussianMixture(degrees_of_freedom_prior=D + 7.0, **kw).fit(X)
    assert default.degrees_of_freedom_prior_ == nu0
    assert default.get_params()["degrees_of_freedom_prior"] is None
    np.testing.assert_array_equal(default.lower_bounds_, explicit.lower_bounds_)
    assert other.degrees_of_freedom_prior_ == D + 7.0
    assert not np.allclose(default.degrees_of_freedom_, other.degrees_of_freedom_)


def _dense_dp_elbo(X, R, prior, params):
    """Dense numpy ELBO of responsibilities R under the stick-breaking prior: the Dirichlet
    allocation terms of the reference ``_direct_elbo`` replaced by the DP ones."""
    K = R.shape[1]
    a0, theta = prior.alpha0, params.theta
    elog_dir = digamma(theta) - digamma(theta.sum())
    dir_alloc = (
        np.sum(R @ elog_dir)
        + gammaln(K * a0) - K * gammaln(a0) + (a0 - 1) * elog_dir.sum()
        - (gammaln(theta.sum()) - gammaln(theta).sum() + np.sum((theta - 1) * elog_dir))
    )
    gamma = prior.alpha0
    a, b = params.rho * params.omega, (1 - params.rho) * params.omega
    elu = digamma(a) - digamma(a + b)
    el1mu = digamma(b) - digamma(a + b)
    dp = 0.0
    for n in range(R.shape[0]):
        for k in range(K):
            dp += R[n, k] * (elu[k] + el1mu[:k].sum())
    for k in range(K):
        # E log Beta(u | 1, gamma) + H[Beta(a_k, b_k)]
        dp += np.log(gamma) + (gamma - 1) * el1mu[k] + stats.beta(a[k], b[k]).entropy()
    return _direct_elbo(X, R, prior, params) - dir_alloc + dp


@pytest.mark.kernels
def test_dp_elbo_matches_dense_formula():
    X, _ = _blobs(n_per=15, D=3)
    K = 4
    R = np.random.RandomState(5).dirichlet(np.ones(K) * 0.5, size=X.shape[0])
    est = SparseGaussianMixture(K, weight_concentration_prior_type=DP,
                                weight_concentration_prior=0.8, reg_covar=0)
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, K, K, X.dtype)
    s = model.stats_from_responsibilities(R, _dense_idx(*R.shape), X)
    params = model.global_step(s * 1.2)  # any params, not only the optimum
    np.testing.assert_allclose(
        model.elbo(s, params), _dense_dp_elbo(X, R, prior, params), rtol=1e-10
    )
    assert model.elbo(s, model.global_step(s)) > model.elbo(s, params)


# ----------------------------------------------------------------------------- the moves
def _planted(seed, K=8, D=4, n_per=250, sep=6.0):
    rng = np.random.RandomState(seed)
    C = rng.randn(K, D) * sep
    X = np.vstack([rng.randn(n_per, D) * (0.6 + 0.1 * k) + C[k] for k in range(K)])
    return X[rng.permutation(X.shape[0])]


def _dp(**kw):
    kw.setdefault("weight_concentration_prior_type", DP)
    kw.setdefault("weight_concentration_prior", 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SparseGaussianMixture(**kw)


@pytest.mark.parametrize("moves", ["all", "merge", "delete", "merge+sort"])
@pytest.mark.parametrize("ct,zero_mean", [("full", False), ("diag", True)])
def test_objective_monotone_with_moves(moves, ct, zero_mean):
    X = _planted(1, D=3, n_per=120)
    m = _dp(n_components=20, covariance_type=ct, zero_mean=zero_mean, moves=moves,
            n_batches=4, max_iter=12, tol=0, random_state=0).fit(X)
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    accepted = sum(e.get("merges_accepted", 0) + e.get("deletes_accepted", 0) for e in m.trace_)
    assert accepted > 0
    # clusters left by the moves, less those holding under one expected sample
    assert m.n_components_ <= m.trace_[-1]["n_components"] < 20
    assert np.all(m._stats["N"] >= 1.0)
    # the fitted statistics equal a fresh local step's bookkeeping: weights over live clusters
    assert m.weights_.shape == (m.n_components_,)
    assert m.predict_proba(X).shape == (X.shape[0], m.n_components_)
    np.testing.assert_allclose(m.predict_proba(X).sum(1), 1.0, rtol=1e-6)


def test_merge_objective_equals_from_scratch():
    # one batch, one pass of dense responsibilities: the merged statistics from the gathered
    # pair entropy must equal the statistics of the merged responsibilities r_a + r_b
    X = _planted(2, K=3, D=2, n_per=60, sep=1.5)
    K = 6
    est = SparseGaussianMixture(K, L=3, weight_concentration_prior_type=DP, reg_covar=0)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, K, 3, X.dtype, moves=("merge",))
    params = model.global_step(
        est._initial_stats_from_init_params(model, X, np.random.RandomState(0))
    )
    model.usage = dict(n_users=np.ones(K), sum_p=np.ones(K), sum_pp=np.eye(K), n=1.0)
    pairs = np.array([[0, 1], [2, 4], [3, 5], [1, 4]], dtype=np.int32)
    model.round = MoveRound(K, np.zeros((0, 2), dtype=np.int32), [])
    model.round.pair_entropy = True
    model._usage_acc = None
    rows = []
    model_collect = model._collect
    assert model_collect is None
    stats = model.visit(X, params, 0)
    # the responsibilities themselves, from a plain local step under the same params
    plain = _SparseGMMModel(prior, K, 3, X.dtype)
    plain._collect = lambda s0, v, i, Xc: rows.append((v.copy(), i.copy()))
    plain.local_step(X, params)
    R = np.zeros((X.shape[0], K))
    np.put_along_axis(R, rows[0][1].astype(np.intp), rows[0][0], axis=1)
    PH = _pair_lookup(model.round.batch[0]["PH"], pairs[:, 0] * K + pairs[:, 1])
    assert np.count_nonzero(PH < 0) >= 2  # pairs that share rows have an entropy change
    small = _SparseGMMModel(prior, K - 1, K - 1, X.dtype)
    for p, (a, b) in enumerate(pairs):
        Rm = R.copy()
        Rm[:, a] += Rm[:, b]
        Rm = np.delete(Rm, b, axis=1)
        sm = small.stats_from_responsibilities(Rm, _dense_idx(*Rm.shape), X)
        ref = _gaussian.elbo(sm, _gaussian.global_step(sm, prior), prior)
        # the proposal's value (accepted whatever it is by a workspace that starts at -1e300)
        work = _Workspace(model, stats.copy())
        # the closed-form gain the merge round ranks the pairs by is the exact change
        pooled_ab = SuffStats(**{f: v[[a]] + v[[b]] for f, v in stats.items()})
        gain = (_gaussian.optimal_component_terms(pooled_ab, prior)[0] - work.comp[a]
                - work.comp[b] + PH[p]
                + _gaussian.merge_allocation_gain(stats["N"], prior, [a], [b])[0])
        np.testing.assert_allclose(work.value + gain, ref, rtol=1e-8)
        work.value = -1e300
        assert work.try_merge(int(a), int(b), PH[p])
        np.testing.assert_allclose(work.value, ref, rtol=1e-8)
        # the batched data terms of every pair (as the merge round computes them) agree
        pooled = SuffStats(**{f: v[pairs[:, 0]] + v[pairs[:, 1]] for f, v in stats.items()})
        comp = _gaussian.component_terms(pooled, _gaussian.global_step(pooled, prior), prior)
        work2 = _Workspace(model, stats.copy())
        work2.value = -1e300
        assert work2.try_merge(int(a), int(b), PH[p], comp[p])
        np.testing.assert_allclose(work2.value, work.value, rtol=1e-12)
        keep = np.delete(np.arange(K), b)
        merged = restrict(work.stats, keep)
        for f in ("N", "Sx", "Sxx", "entropy"):
            np.testing.assert_allclose(merged[f], sm[f], rtol=1e-10, atol=1e-10, err_msg=f)


def test_pair_entropy_of_every_shared_pair_matches_dense():
    # the sparse pair entropies gathered from L-sparse rows equal the dense
    # sum_n h(r_na, r_nb) for every pair, and are absent (0) exactly where no row holds both
    rng = np.random.default_rng(3)
    n, K, L = 200, 9, 3
    idx = np.stack([rng.choice(K, L, replace=False) for _ in range(n)])
    vals = rng.dirichlet(np.ones(L), size=n)
    vals[rng.random((n, L)) < 0.2] = 0.0  # some support entries unused
    R = np.zeros((n, K))
    np.put_along_axis(R, idx, vals, axis=1)
    halves = [_row_pair_entropy(vals[:90], idx[:90], K), _row_pair_entropy(vals[90:], idx[90:], K)]
    PH = _sum_pairs([h[0] for h in halves], [h[1] for h in halves])
    for a in range(K):
        for b in range(a + 1, K):
            x, y = R[:, a], R[:, b]
            both = (x > 0) & (y > 0)
            ref = np.sum(x[both] * np.log(x[both]) + y[both] * np.log(y[both])
                         - (x[both] + y[both]) * np.log(x[both] + y[both]))
            got = _pair_lookup(PH, [a * K + b])[0]
            np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
            assert (got != 0.0) == bool(both.any())


def test_block_pair_entropy_sums_in_chunks_with_bounded_memory(monkeypatch):
    """A block's pair entropies are summed per key over chunks of rows: the same sums as
    the row-by-row pairs, and with dense rows (L = K) a peak memory far below the rows x
    K(K - 1)/2 pair entries (about 3.5 million here, over 150 MB as arrays)."""
    import tracemalloc

    from sparseclust.mixture import _dp_rows

    rng = np.random.default_rng(4)
    n, K = 2000, 60
    vals = rng.dirichlet(np.ones(K), size=n)
    idx = np.tile(np.arange(K, dtype=np.int32), (n, 1))
    ref = _sum_pairs(*[[a] for a in _row_pair_entropy(vals[:50], idx[:50], K)])
    monkeypatch.setattr(_dp_rows, "PAIR_CHUNK", 5000)  # several chunks in 50 rows
    got = _dp_rows._block_pair_entropy(vals[:50], idx[:50], K)
    np.testing.assert_array_equal(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    monkeypatch.undo()
    tracemalloc.start()
    keys, h = _dp_rows._block_pair_entropy(vals, idx, K)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert keys.size == K * (K - 1) // 2
    assert peak < 40e6


@pytest.mark.kernels
@pytest.mark.parametrize("dp", [True, False])
def test_merge_allocation_gain_equals_recomputed_terms(dp):
    # the closed-form change of the allocation terms equals the terms recomputed on the
    # merged counts (b removed, a holding N_a + N_b) for every pair
    X = _planted(2, K=3, D=2, n_per=30)
    kw = dict(weight_concentration_prior_type=DP) if dp else {}
    prior = SparseGaussianMixture(8, weight_concentration_prior=2.5, **kw)._build_prior(X)
    assert prior.dp == dp
    N = np.random.default_rng(1).gamma(0.7, 40.0, size=8)
    N[5] = 0.0
    pa, pb = np.triu_indices(8, 1)
    pa, pb = np.concatenate([pa, pb]), np.concatenate([pb, pa])  # both orders
    got = _gaussian.merge_allocation_gain(N, prior, pa, pb, chunk=5)
    np.testing.assert_array_equal(got, _gaussian.merge_allocation_gain(N, prior, pa, pb))
    base = _gaussian.optimal_allocation_terms(N, prior)
    # the closed form at the optimum equals the general terms at the optimal q(pi)
    general = _gaussian.allocation_terms(N, _gaussian.weight_posterior(N, prior), prior)
    np.testing.assert_allclose(base, general, rtol=1e-12)
    for g, a, b in zip(got, pa, pb, strict=True):
        M = N.copy()
        M[a] += N[b]
        ref = _gaussian.optimal_allocation_terms(np.delete(M, b), prior) - base
        np.testing.assert_allclose(g, ref, rtol=1e-10, atol=1e-9)


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
@pytest.mark.parametrize("zero_mean", [True, False])
def test_symmetric_kl_equals_the_dense_gaussian_divergence(covariance_type, zero_mean):
    # the merge candidates' distance against KL(a || b) + KL(b || a) of the point-estimate
    # Gaussians N(m_k, E[Lambda_k]^-1) from explicit inverses and log determinants (x 2)
    rng = np.random.RandomState(3)
    X = rng.randn(400, 4) @ rng.randn(4, 4) + (0.0 if zero_mean else 2.0)
    est = SparseGaussianMixture(5, covariance_type=covariance_type, zero_mean=zero_mean,
                                reg_covar=1e-3)
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, 5, 5, X.dtype)
    st = model.stats_from_responsibilities(rng.dirichlet(np.ones(5), 400), _dense_idx(400, 5), X)
    params = _gaussian.global_step(st, prior)
    P = params.precisions
    if covariance_type == "diag":
        P = P[:, None, :] * np.eye(4)[None]
    elif covariance_type == "spherical":
        P = P[:, None, None] * np.eye(4)[None]
    S = np.linalg.inv(P)
    m = np.zeros((5, 4)) if zero_mean else params.means

    def kl(a, b):
        d = m[b] - m[a]
        return 0.5 * (np.trace(P[b] @ S[a]) + d @ P[b] @ d - 4
                      + np.linalg.slogdet(S[b])[1] - np.linalg.slogdet(S[a])[1])

    ref = np.array([[2.0 * (kl(a, b) + kl(b, a)) for b in range(5)] for a in range(5)])
    np.testing.assert_allclose(_symmetric_kl(params, prior), ref, rtol=1e-9, atol=1e-9)


def test_delete_removes_a_junk_cluster_and_stays_exact():
    # a cluster seeded on a handful of samples is deleted; the result equals the objective
    # of the statistics recomputed from scratch at the end
    X = _planted(3, K=3, D=2, n_per=100)
    m = _dp(n_components=12, moves="delete", n_batches=3, max_iter=10, tol=0,
            random_state=0, L=2).fit(X)
    assert sum(e["deletes_accepted"] for e in m.trace_) > 0
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    # memoized bookkeeping: the cached whole-data statistics equal the sum of a fresh pass
    # of the final responsibilities only up to the last pass's parameter change, but their
    # counts must still cover every sample exactly
    np.testing.assert_allclose(m._stats["N"].sum(), X.shape[0], rtol=1e-9)


@pytest.mark.parametrize("zero_mean", [True, False])
@pytest.mark.parametrize("reg", [0.0, 1e-3])
def test_optimal_component_terms_equal_the_general_terms(zero_mean, reg):
    # the closed form at the optimal q(phi) (log marginal likelihood) against the general
    # data terms evaluated at the global step's parameters
    rng = np.random.RandomState(0)
    X = rng.randn(300, 5) @ rng.randn(5, 5)
    est = SparseGaussianMixture(4, zero_mean=zero_mean, reg_covar=reg)
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, 4, 4, X.dtype)
    R = rng.dirichlet(np.ones(4), 300)
    st = model.stats_from_responsibilities(R, _dense_idx(300, 4), X)
    ref = _gaussian.component_terms(st, _gaussian.global_step(st, prior), prior)
    np.testing.assert_allclose(_gaussian.optimal_component_terms(st, prior), ref, rtol=1e-11)


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
@pytest.mark.parametrize("zero_mean", [True, False])
def test_merged_component_terms_equal_the_terms_of_pooled_statistics(covariance_type,
                                                                     zero_mean):
    # the merge candidates' data terms, built pair by pair in chunks, against the closed form
    # on statistics pooled by hand (both orders of a pair, a pair with itself excluded)
    rng = np.random.RandomState(1)
    X = rng.randn(300, 5) @ rng.randn(5, 5)
    est = SparseGaussianMixture(6, covariance_type=covariance_type, zero_mean=zero_mean,
                                reg_covar=1e-4)
    prior = est._build_prior(X)
    model = _SparseGMMModel(prior, 6, 6, X.dtype)
    st = model.stats_from_responsibilities(rng.dirichlet(np.ones(6), 300), _dense_idx(300, 6), X)
    pa, pb = np.nonzero(~np.eye(6, dtype=bool))
    got = _gaussian.merged_component_terms(st, pa, pb, prior, chunk=7)
    pooled = SuffStats(**{k: v[pa] + v[pb] for k, v in st.items()})
    ref = _gaussian.optimal_component_terms(pooled, prior)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert np.all(np.isfinite(got))


@pytest.mark.parametrize("zero_mean", [True, False])
def test_pooled_component_terms_are_bitwise_the_one_by_one_merge_terms(zero_mean):
    # the chained merges' data terms, computed for many pairs at once, must be the very
    # numbers Workspace.try_merge computes for one pair (the round's decisions depend on them)
    rng = np.random.RandomState(2)
    X = rng.randn(400, 4) @ rng.randn(4, 4)
    K = 7
    est = SparseGaussianMixture(K, zero_mean=zero_mean, weight_concentration_prior_type=DP,
                                reg_covar=1e-5)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, K, 3, X.dtype, moves=("merge",))
    st = model.stats_from_responsibilities(rng.dirichlet(np.ones(K), 400),
                                           _dense_idx(400, K), X)
    work = _Workspace(model, st.copy())
    pa, pb = np.nonzero(~np.eye(K, dtype=bool))
    got = work.pooled_component_terms(pa, pb)
    for p, (a, b) in enumerate(zip(pa.tolist(), pb.tolist(), strict=True)):
        pooled = SuffStats(**{f: v[[a]] + v[[b]] for f, v in st.items()})
        assert got[p] == _gaussian.optimal_component_terms(pooled, prior)[0]


@pytest.mark.kernels
@pytest.mark.parametrize("reg", [0.0, 1e-3])
def test_pooled_logdet_kernel_matches_numpy(reg):
    # the merge candidates' log-determinants, built and factored in the kernel's buffer:
    # bitwise the factor of the matrix numpy builds, close to slogdet, and the same for any
    # thread count
    from sparseclust._kernels import _gmm_weights

    rng = np.random.RandomState(3)
    K, D = 9, 6
    A = rng.randn(K, 20, D)
    Sxx = np.einsum("kni,knj->kij", A, A)
    B = rng.randn(D, D)
    psi0 = B @ B.T + np.eye(D)
    psi0 = 0.5 * (psi0 + psi0.T)
    pa, pb = (x.astype(np.int64) for x in np.nonzero(~np.eye(K, dtype=bool)))
    N = rng.uniform(1.0, 30.0, pa.size)
    out = {}
    for nt in (1, 2):
        ld = np.empty(pa.size)
        status = np.ones(pa.size, dtype=np.int32)
        _gmm_weights.pooled_logdet(Sxx, psi0, pa, pb, reg * N, bool(reg), ld, status, nt)
        assert not status.any()
        out[nt] = ld
    assert np.array_equal(out[1], out[2])
    M = (np.take(Sxx, pa, axis=0) + Sxx[pb]) + psi0
    ref = _gaussian._wishart_factors(M.copy(), reg, N, symmetrize=False)[1]
    assert np.array_equal(out[1], ref)
    M[:, np.arange(D), np.arange(D)] += (reg * N)[:, None]
    np.testing.assert_allclose(out[1], np.linalg.slogdet(M)[1], rtol=1e-12)
    # a matrix that is not positive definite is flagged
    bad = -np.eye(D)[None].repeat(K, 0) * 1e3
    st = np.zeros(pa.size, dtype=np.int32)
    _gmm_weights.pooled_logdet(bad, psi0, pa, pb, N, False, np.empty(pa.size), st, 1)
    assert st.all()


def test_chained_merge_precheck_keeps_every_decision(monkeypatch):
    # the chained merges rejected by the vectorized ELBO change (below -CHAIN_MARGIN S)
    # are exactly those the exact whole-data test rejects: with the pre-check disabled
    # (margin infinite) the fit is bitwise the same, and it needs more exact evaluations
    from sparseclust.mixture import _dp_moves, _dp_workspace

    X = _planted(4, K=6, D=3, n_per=120)
    calls = {"n": 0}
    exact = _dp_workspace._Workspace.try_merge

    def counted(self, *a, **kw):
        calls["n"] += 1
        return exact(self, *a, **kw)

    monkeypatch.setattr(_dp_workspace._Workspace, "try_merge", counted)
    fits = {}
    for margin in (_dp_moves.CHAIN_MARGIN, np.inf):
        monkeypatch.setattr(_dp_moves, "CHAIN_MARGIN", margin)
        calls["n"] = 0
        m = _dp(n_components=60, moves="merge", n_batches=2, max_iter=6, tol=0,
                random_state=0, L=3).fit(X)
        fits[margin] = (np.asarray(m.lower_bounds_), m.covariances_, m.weights_,
                        [e["merges_accepted"] for e in m.trace_], calls["n"])
    (lb0, cov0, w0, acc0, n0), (lb1, cov1, w1, acc1, n1) = fits.values()
    assert sum(acc0) > 0 and acc0 == acc1
    assert np.array_equal(lb0, lb1) and np.array_equal(cov0, cov1) and np.array_equal(w0, w1)
    assert n0 < n1, (n0, n1)


def _merged_away(seed=0, n_per=300):
    # three well separated clusters; the initial labels put the last two in one cluster
    rng = np.random.RandomState(seed)
    C = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0], [0.0, 8.0, 0.0]])
    X = np.vstack([rng.randn(n_per, 3) + c for c in C])
    perm = rng.permutation(X.shape[0])
    true = np.repeat(np.arange(3), n_per)[perm]
    return X[perm], true, np.where(true == 2, 1, true)


@pytest.mark.parametrize("seed", range(3))
def test_birth_recovers_a_merged_away_cluster(seed):
    from sklearn.metrics import adjusted_rand_score

    X, true, labels = _merged_away(seed)
    # 30 passes: a birth may leave a cluster of a sample or two behind for a few passes
    kw = dict(n_components=2, init_params=labels, max_iter=30, tol=0, n_batches=3,
              random_state=seed)
    # without births the merged pair stays one cluster: no move can split it
    m0 = _dp(moves="merge+delete+sort", **kw).fit(X)
    assert m0.n_components_ == 2
    m = _dp(moves="all", **kw).fit(X)
    assert sum(e["births_accepted"] for e in m.trace_) >= 1
    assert m.n_components_ == 3
    assert adjusted_rand_score(true, m.predict(X)) > 0.99
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    assert m.lower_bound_ > m0.lower_bound_
    # the counts cover every sample (less the clusters under one expected sample, dropped)
    assert X.shape[0] - 1.0 < m._stats["N"].sum() <= X.shape[0] * (1 + 1e-9)


def test_births_in_the_first_round_then_after_a_round_that_accepted_no_merge():
    # the first move round (pass 2) proposes births beside its merges; later, with merges
    # or deletes on, a birth is proposed only after a round that tried them and accepted
    # none; with births alone they start at the first move round too
    X, true, labels = _merged_away(0)
    kw = dict(n_components=2, init_params=labels, max_iter=8, tol=0, n_batches=3,
              random_state=0)
    m = _dp(moves="all", **kw).fit(X)
    t = m.trace_
    assert t[0]["births_tried"] == 0 and t[1]["births_tried"] >= 1
    for prev, cur in zip(t[1:], t[2:], strict=False):
        if cur["births_tried"]:
            assert prev["merges_tried"] + prev["deletes_tried"] > 0
            assert prev["merges_accepted"] + prev["deletes_accepted"] == 0
    only = _dp(moves="birth", **kw).fit(X)
    # up to 4 targets per round, here both clusters
    assert only.trace_[1]["births_tried"] == 2


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_birth_statistics_on_used_clusters_equal_the_full_width_update(covariance_type):
    """A birth edits the statistics on the clusters its rows use only
    (:func:`_dp_rows._used_stats`, :func:`_dp_rows._move_stats`): bit for bit the update
    ``stats - before + after`` computed over all K clusters."""
    from sparseclust.mixture._dp_rows import _move_stats, _used_stats

    rng = np.random.RandomState(0)
    X = rng.randn(300, 5)
    est = SparseGaussianMixture(2, covariance_type=covariance_type,
                                weight_concentration_prior_type="dirichlet_process")
    model = _DPMixtureModel(est._build_prior(X), 12, 3, X.dtype, moves=("birth",))
    K = 12
    wide = model.plain_model(K)
    stats = wide.stats_from_responsibilities(
        rng.dirichlet(np.ones(3), 300), np.argsort(rng.rand(300, K), 1)[:, :3].astype(np.int32),
        X)
    rows = X[:120]
    old_i = np.array([rng.choice([0, 3, 4, 9], 3, replace=False) for _ in range(120)],
                     dtype=np.int32)
    new_i = np.array([rng.choice([0, 4, 10, 11], 3, replace=False) for _ in range(120)],
                     dtype=np.int32)
    old_v, new_v = rng.dirichlet(np.ones(3), 120), rng.dirichlet(np.ones(3), 120)
    expected = (stats - wide.stats_from_responsibilities(old_v, old_i, rows)
                + wide.stats_from_responsibilities(new_v, new_i, rows))
    ids_old, before = _used_stats(model, old_v, old_i, rows)
    ids_new, after = _used_stats(model, new_v, new_i, rows)
    np.testing.assert_array_equal(ids_old, [0, 3, 4, 9])
    np.testing.assert_array_equal(ids_new, [0, 4, 10, 11])
    got = stats.copy()
    _move_stats(got, ids_old, before, ids_new, after)
    assert got.keys() == expected.keys()
    for f in expected.keys():
        np.testing.assert_array_equal(got[f], expected[f])


def _birth_round(X, labels):
    """A DP model over the two clusters ``labels`` after a pass of one batch whose round
    proposes a birth at cluster 1: (model, parameters, the pass's statistics, the
    responsibilities (values, indices) of every sample from a plain local step)."""
    est = SparseGaussianMixture(2, L=2, weight_concentration_prior_type=DP)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, 2, 2, X.dtype, moves=("birth",))
    init = model.stats_from_responsibilities(np.ones((X.shape[0], 1)),
                                             labels[:, None].astype(np.int32), X)
    params = model.global_step(init)
    model.begin_pass(2, 2)
    model.round = MoveRound(2, np.zeros((0, 2), dtype=np.int32), [], births=[1])
    model._usage_acc = None
    stats = model.visit(X, params, 0)
    rows = []
    plain = _SparseGMMModel(prior, 2, 2, X.dtype)
    plain._collect = lambda s0, v, i, Xc: rows.append((v.copy(), i.copy()))
    plain.local_step(X, params)
    return model, params, stats, rows


def test_birth_target_is_every_sample_the_cluster_has_a_share_in():
    """A birth at k targets the samples in which k holds at least BIRTH_SHARE of the
    responsibility (k's own samples and those it shares with its neighbours, so the fresh
    clusters can take samples from the neighbours too): the pass gathers exactly those, by
    the responsibilities of an independent local step, and they include shared samples."""
    from sparseclust.mixture._dp_moves import BIRTH_SHARE

    X, _, labels = _merged_away(1, n_per=80)
    X = X * 0.35  # overlapping clusters: samples shared between them
    model, params, _, rows = _birth_round(X, labels)
    v = np.concatenate([r[0] for r in rows])
    i = np.concatenate([r[1] for r in rows])
    share = np.where(i == 1, v, 0.0).sum(axis=1)
    expect = np.flatnonzero(share >= BIRTH_SHARE)
    assert np.array_equal(np.sort(model.round.batch[0]["rows"]), expect)
    assert np.any((share[expect] < 0.5) & (share[expect] > 0))  # shared with cluster 0
    assert np.any((share > 0) & (share < BIRTH_SHARE))  # and a cut that leaves some out


def test_births_in_a_fit_target_the_gathered_samples_of_their_share(monkeypatch):
    """In a whole fit, every birth's target is every gathered sample in which the target
    cluster holds at least BIRTH_SHARE (the pass also gathers the delete candidates'
    samples, which the target must leave out), and an accepted birth's fresh clusters take
    responsibility for samples of the neighbours, which k held less than half of."""
    from sparseclust.mixture._dp_moves import BIRTH_SHARE

    orig = _Workspace.try_birth

    def spy(self, k, targets, rnd, batches, opts, rng):
        for bb, g in rnd.batch.items():
            if g["values"] is None:
                continue
            share = np.where(g["indices"] == k, g["values"], 0.0).sum(axis=1)
            got = np.sort(targets.get(bb, np.zeros(0, dtype=np.int64)))
            assert np.array_equal(got, np.flatnonzero(share >= BIRTH_SHARE))
            seen.append(int(np.count_nonzero((share >= BIRTH_SHARE) & (share < 0.5))))
        K0 = self.K
        res = orig(self, k, targets, rnd, batches, opts, rng)
        if res is not None:
            # what the fresh clusters took from the target's rows that k held less than half
            # of: rows of its neighbours
            for bb, t in targets.items():
                g = rnd.batch[bb]
                share = np.where(g["indices"][t] == k, g["values"][t], 0.0).sum(axis=1)
                vals, idx = res[1][bb][-2:]
                taken.append(float(np.where(idx >= K0, vals, 0.0)[share < 0.5].sum()))
        return res

    seen, taken = [], []
    monkeypatch.setattr(_Workspace, "try_birth", spy)
    X, _ = _blobs(n_per=150, D=2, n_clusters=4, sep=3.0)
    _dp(n_components=2, covariance_type="full", max_iter=30, n_batches=2,
        random_state=0).fit(X)
    assert seen and sum(seen) > 0
    assert taken and sum(taken) > 0


def test_birth_proposal_equals_from_scratch():
    # one batch: the statistics and the objective of an accepted birth equal those of the
    # full responsibilities (the target's rows re-inferred, the others as the pass left them)
    # recomputed from scratch; a rejected birth leaves the workspace untouched
    X, _, labels = _merged_away(1, n_per=80)
    model, params, stats, rows = _birth_round(X, labels)
    prior = model.prior
    work = _Workspace(model, stats.copy())
    v0 = work.value
    g = model.round.batch[0]
    target = np.flatnonzero(((g["indices"] == 1) & (g["values"] >= 0.5)).any(1))
    opts = dict(model.move_opts)
    res = work.try_birth(1, {0: target}, model.round, [X], opts, np.random.RandomState(0))
    assert res is not None
    J, out = res
    assert work.K == 2 + J and work.value > v0
    vals, idx = out[0][-2:]
    R = np.zeros((X.shape[0], 2 + J))
    np.put_along_axis(R[:, :2], rows[0][1].astype(np.intp), rows[0][0], axis=1)
    ids = g["rows"][target]
    R[ids] = 0.0
    for r, i_row in enumerate(ids):
        R[i_row, idx[r]] = vals[r]
    wide = _SparseGMMModel(prior, 2 + J, 2 + J, X.dtype)
    ref = wide.stats_from_responsibilities(R, _dense_idx(*R.shape), X)
    for f in ("N", "Sx", "Sxx", "entropy"):
        np.testing.assert_allclose(work.stats[f], ref[f], rtol=1e-9, atol=1e-8, err_msg=f)
    live = ref["N"] > 0
    sub = restrict(ref, np.flatnonzero(live))
    np.testing.assert_allclose(
        work.value, _gaussian.elbo(sub, _gaussian.global_step(sub, prior), prior), rtol=1e-9)
    # the same proposal from a workspace that already holds a better value is rejected
    work2 = _Workspace(model, stats.copy())
    work2.value = work.value + 1.0
    before = work2.stats["N"].copy()
    assert work2.try_birth(1, {0: target}, model.round, [X], opts,
                           np.random.RandomState(0)) is None
    assert work2.K == 2
    np.testing.assert_array_equal(work2.stats["N"], before)


@pytest.mark.parametrize("zero_mean", [True, False])
def test_delete_workspace_caches_equal_recomputation(zero_mean):
    # the delete's parameters from the workspace's cached per-component posterior equal a
    # global step on the kept clusters' statistics, bit for bit, also after a merge changed
    # two clusters' statistics; the re-inferred rows' statistics on the clusters they use
    # equal the K-cluster statistics there and are zero elsewhere
    from sparseclust.mixture._dp_rows import reinfer_rows

    X = _planted(4, K=4, D=3, n_per=60) + (0.0 if zero_mean else 1.0)
    K = 6
    est = SparseGaussianMixture(K, L=3, weight_concentration_prior_type=DP,
                                zero_mean=zero_mean)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, K, 3, X.dtype, moves=("delete",))
    rng = np.random.RandomState(0)
    R = rng.dirichlet(np.ones(K) * 0.3, X.shape[0])
    stats = model.stats_from_responsibilities(R, _dense_idx(*R.shape), X)
    work = _Workspace(model, stats.copy())

    def check(idx):
        got = work._params_of(idx)
        ref = _gaussian.global_step(restrict(work.stats, idx), prior)
        for f in ("theta", "elog_pi", "nu", "scale_inv", "prec_chol", "elog_det", "const",
                  "means"):
            np.testing.assert_array_equal(getattr(got, f), getattr(ref, f), err_msg=f)

    check(np.array([0, 1, 2, 4, 5]))
    work.value = -1e300  # accept any merge
    assert work.try_merge(1, 3, 0.0)
    assert work._stale == {1, 3}
    check(np.array([0, 1, 2, 5]))
    assert not work._stale

    params = model.global_step(stats)
    v_old, i_old = posteriors.responsibilities(model.weights(X[:40], params), 3)
    idx = np.array([0, 2, 3, 4, 5])
    plain = model.plain_model(idx.size)
    ids, before, after, vals, new = reinfer_rows(X[:40], model, plain,
                                                 _gaussian.global_step(restrict(stats, idx),
                                                                       prior),
                                                 idx, K, v_old, i_old)
    np.testing.assert_array_equal(ids, np.union1d(i_old, new))
    assert 1 not in new
    for st, (v, i) in ((before, (v_old, i_old)), (after, (vals, new))):
        full = model.stats_from_responsibilities(v, i, X[:40])
        out = np.setdiff1d(np.arange(K), ids)
        for f in full.keys():
            np.testing.assert_allclose(st[f], full[f][ids], rtol=1e-13, atol=1e-12, err_msg=f)
            np.testing.assert_array_equal(full[f][out], 0.0)


def test_fold_merged_rows_sum_groups_and_keep_distinct_indices():
    from sparseclust.mixture._dp_rows import _fold_merged

    # clusters 1 and 3 merged into 0, 5 into 4 (a chain: 0 absorbed two clusters)
    merge_map = np.array([0, 0, 2, 0, 4, 4, 6])
    vals = np.array([[0.5, 0.2, 0.3, 0.0], [0.1, 0.6, 0.3, 0.0], [0.4, 0.1, 0.2, 0.3]])
    idx = np.array([[1, 3, 0, 2], [3, 1, 6, 2], [5, 4, 0, 1]], dtype=np.int32)
    v, i = _fold_merged(vals, idx, merge_map)
    for r in range(3):
        assert len(set(i[r].tolist())) == 4  # distinct within the row
        # per target cluster, the folded row carries the summed responsibility
        dense = np.zeros(7)
        np.add.at(dense, merge_map[idx[r]], vals[r])
        got = np.zeros(7)
        np.add.at(got, i[r], v[r])
        np.testing.assert_allclose(got, dense)
        # an entry on a removed cluster holds no responsibility, and every target holds one
        removed = merge_map[i[r]] != i[r]
        assert np.all(v[r][removed] == 0)
        assert removed.sum() == 4 - np.unique(merge_map[idx[r]]).size
    np.testing.assert_array_equal(vals, [[0.5, 0.2, 0.3, 0.0], [0.1, 0.6, 0.3, 0.0],
                                         [0.4, 0.1, 0.2, 0.3]])  # the input is not modified


@pytest.mark.parametrize("L", [1, 2])
def test_chained_merges_into_one_cluster_stay_exact(L):
    # one Gaussian blob initialized as a centre and four outer quadrants: the centre absorbs
    # quadrants that share no row (opposite ones) in the same round; with hard assignments
    # (L = 1) the round ends at one cluster whose objective equals the one-cluster ELBO
    # computed from scratch
    rng = np.random.RandomState(0)
    X = rng.randn(1200, 2)
    ang = np.arctan2(X[:, 1], X[:, 0])
    quad = ((ang + np.pi) // (np.pi / 2)).astype(int) % 4
    labels = np.where(np.hypot(X[:, 0], X[:, 1]) < 1.0, 0, 1 + quad)
    m = _dp(n_components=5, L=L, init_params=labels, moves="merge", n_batches=3, max_iter=4,
            tol=0, random_state=0).fit(X)
    merges = [e["merges_accepted"] for e in m.trace_]
    assert merges[1] >= 2 and sum(merges) == 4 and m.n_components_ == 1
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    np.testing.assert_allclose(m._stats["N"].sum(), X.shape[0], rtol=1e-12)
    if L == 1:
        assert merges[1] == 4
        model = _SparseGMMModel(m._prior, 1, 1, X.dtype)
        st = model.stats_from_responsibilities(np.ones((X.shape[0], 1)),
                                               np.zeros((X.shape[0], 1), dtype=np.int32), X)
        ref = _gaussian.elbo(st, _gaussian.global_step(st, m._prior), m._prior)
        np.testing.assert_allclose(lb[1], ref, rtol=1e-10)


def test_delete_after_merge_in_one_round_stays_exact():
    # a round that merges and then deletes revisits rows that also use the merged cluster:
    # their cached responsibilities are folded into the merged cluster first, so the counts
    # stay exact and the objective monotone
    X = _planted(6, K=4, D=2, n_per=80)
    m = _dp(n_components=30, moves="merge+delete", n_batches=2, max_iter=8, tol=0,
            random_state=0, L=3).fit(X)
    both = [e for e in m.trace_ if e["merges_accepted"] and e["deletes_accepted"]]
    assert both, [(e["merges_accepted"], e["deletes_tried"]) for e in m.trace_]
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:])), np.diff(lb).min()
    assert X.shape[0] - 1.0 < m._stats["N"].sum() <= X.shape[0] * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_planted_k_recovery(seed):
    X = _planted(seed)
    m = _dp(n_components=30, random_state=seed, max_iter=40).fit(X)
    # every seed is run (none hand-picked); the band allows one extra cluster
    assert 8 <= m.n_components_ <= 9, m.n_components_


def test_moves_inactive_without_dp_or_stochastic():
    X = _planted(0, D=3, n_per=60)
    a = SparseGaussianMixture(12, random_state=0, max_iter=5, tol=0).fit(X)
    assert a.n_components_ == 12
    s = _dp(n_components=12, algorithm="stochastic", random_state=0, max_iter=3,
            batch_size=64).fit(X)
    assert s.n_components_ == 12
    with pytest.raises(ValueError, match="moves"):
        _dp(n_components=3, moves="split").fit(X)


def test_partial_fit_after_moves_and_pickle():
    X = _planted(4, D=3, n_per=80)
    m = _dp(n_components=16, random_state=0, max_iter=15).fit(X)
    K = m.n_components_
    assert K < 16
    m2 = pickle.loads(pickle.dumps(m))
    np.testing.assert_allclose(m2.score_samples(X), m.score_samples(X))
    m.partial_fit(X[:50])
    assert m.n_components_ == K and m.means_.shape[0] == K
    assert m.get_feature_names_out().shape == (K,)


def test_engine_moves_with_candidates_monotone():
    X = _planted(5, D=3, n_per=100)
    m = _dp(n_components=20, n_candidates=6, candidate_refresh=3, random_state=0,
            max_iter=15, tol=0, n_batches=3).fit(X)
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    assert m.n_components_ < 20


def test_candidate_sets_follow_moves():
    # renumbering: kept rows get the new ids, rows that named a removed cluster or both
    # clusters of a merge are refreshed on their next visit (adaptive) or the batch is (fixed)
    X = _planted(2, D=2, n_per=20)
    est = SparseGaussianMixture(6, weight_concentration_prior_type=DP)
    prior = est._build_prior(X)
    for refresh in ("auto", 3):
        model = _DPMixtureModel(prior, 6, 1, X.dtype, moves=("merge",), n_candidates=2,
                                refresh=refresh)
        entry = model._cache_entry(X)
        entry.cand = np.array([[0, 1], [2, 3], [4, 5], [1, 3]], dtype=np.int32)
        if refresh == "auto":
            entry.gap = np.ones(4)
            entry.w_ref = np.zeros((4, 2))
        # merge 3 into 1, delete 4, then 0 1 2 5 -> 3 0 1 2
        model.renumber_candidates(np.array([3, 0, 1, 0, -1, 2]))
        if refresh == "auto":
            np.testing.assert_array_equal(entry.cand[:2], [[3, 0], [1, 0]])
            np.testing.assert_array_equal(entry.gap, [1.0, 1.0, -np.inf, -np.inf])
        else:
            assert entry.cand is None
    # fits with the default candidate sets and moves stay monotone
    X = _planted(5, D=3, n_per=100)
    m = _dp(n_components=24, random_state=0, max_iter=10, tol=0, n_batches=3).fit(X)
    assert m._effective_candidates() == 16
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))
    assert m.n_components_ < 24


def test_fit_engine_direct_round_logs():
    X = _planted(6, D=2, n_per=50)
    est = SparseGaussianMixture(10, weight_concentration_prior_type=DP)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, 10, 4, X.dtype, moves=("merge", "delete", "sort"))
    init = est._initial_stats_from_init_params(model, X, np.random.RandomState(0))
    res = fit_engine(model, X, init, algorithm="memoized", n_batches=2, max_iter=6, tol=0,
                     random_state=0)
    assert len(model.round_logs) == 6
    assert res.params.theta.shape[0] == model.n_components


@pytest.mark.parametrize("algorithm", ["batch", "memoized", "stochastic"])
def test_fit_callback_sees_every_pass_and_can_stop(algorithm):
    """fit(callback=) as SparseLDA.fit: called once per pass with the pass's trace entry plus
    n_passes (no engine internals), and returning True stops training (no more
    initializations either)."""
    X, _ = _blobs(n_per=60)
    kw = dict(n_components=4, algorithm=algorithm, max_iter=6, tol=0, random_state=0)
    if algorithm != "batch":
        kw.update(n_batches=2, batch_size=64)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est = SparseGaussianMixture(**kw).fit(X, callback=lambda info: seen.append(info))
    assert [i["pass"] for i in seen] == list(range(1, 7))
    assert all(i["n_passes"] == 6 for i in seen)
    current = ("n_passes", "weights", "means", "precisions_cholesky")
    assert [{k: v for k, v in i.items() if k not in current} for i in seen] == est.trace_
    assert not any("params" in i or "stats" in i for i in seen)
    # the point estimates of the last pass are the fitted model's
    for name in current[1:]:
        np.testing.assert_array_equal(seen[-1][name], getattr(est, name + "_"))
    # the same fit without a callback
    plain = _ours(X, **kw)
    np.testing.assert_array_equal(plain.means_, est.means_)
    # stopping: after pass 2, and with n_init=3 only the first initialization runs
    calls = []

    def stop_at_2(info):
        calls.append(info["pass"])
        return info["pass"] == 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a stop is no convergence failure
        stopped = SparseGaussianMixture(**{**kw, "tol": 1e-12, "n_init": 3}).fit(
            X, callback=stop_at_2)
    assert calls == [1, 2] and stopped.n_iter_ == 2 and len(stopped.trace_) == 2
    two = _ours(X, **{**kw, "max_iter": 2})
    np.testing.assert_array_equal(stopped.means_, two.means_)


def test_step_size_parameters_match_the_topic_models():
    # kappa in (0, 1] and delta >= 0 or None, as every estimator: delta=None is four passes'
    # worth of minibatches, 4 ceil(n / batch_size)
    rng = np.random.RandomState(0)
    X = np.concatenate([rng.randn(60, 2) + c for c in ([0, 0], [6, 0], [0, 6])])
    with pytest.raises(ValueError, match="kappa"):
        SparseGaussianMixture(3, algorithm="stochastic", kappa=0.0).fit(X)
    m = SparseGaussianMixture(3, algorithm="stochastic", batch_size=45, delta=None,
                              max_iter=2, tol=0, random_state=0).fit(X)
    assert m.trace_[-1]["rho"] == pytest.approx((4 * 4 + 8) ** -0.6)
    p = SparseGaussianMixture(3, delta=None, batch_size=45, random_state=0)
    p.partial_fit(X[:45]).partial_fit(X[45:90])
    # partial_fit scales to the samples seen so far (total_samples=None): 45, then 90
    assert p.trace_[-1]["rho"] == pytest.approx((4 * 2 + 2) ** -0.6)


def test_births_from_fewer_clusters_than_l():
    """Gathered responsibilities are min(L, K) wide; births at K = 2 with L = 4 re-infer their
    targets with no more than that width (any responsibilities give a valid ELBO), so two
    births accepted in one round grow K past L without a shape error, and training stays
    monotone."""
    X, _ = _blobs(n_per=150, D=2, n_clusters=8, sep=10.0)
    m = SparseGaussianMixture(n_components=2, L=4, covariance_type="diag",
                              weight_concentration_prior_type="dirichlet_process", max_iter=40,
                              random_state=0).fit(X)
    assert max(e["births_accepted"] for e in m.trace_) >= 2
    assert m.n_components_ >= 6
    lb = np.asarray(m.lower_bounds_)
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb[1:]))


def test_dp_fit_that_ends_at_or_above_its_start_warns_that_k_is_a_lower_bound():
    """Eight separated blobs: the DP mixture started from 2 clusters grows by births and warns
    (TruncationWarning, naming the start and the end); from 30 merges and deletes remove
    clusters and it does not warn, nor does the finite mixture or a DP fit without moves."""
    from sparseclust import TruncationWarning

    X, _ = _blobs(n_per=150, D=2, n_clusters=8, sep=10.0)
    kw = dict(covariance_type="diag", weight_concentration_prior_type="dirichlet_process",
              random_state=0)
    with pytest.warns(TruncationWarning) as record:
        m = SparseGaussianMixture(n_components=2, **kw).fit(X)
    assert m.n_components_ > 2
    assert [str(w.message).split(",")[0] for w in record] == [
        f"SparseGaussianMixture started from n_components=2 clusters and grew to "
        f"{m.n_components_}"]
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        assert SparseGaussianMixture(n_components=30, **kw).fit(X).n_components_ < 30
        SparseGaussianMixture(n_components=2, moves="none", **kw).fit(X)
        SparseGaussianMixture(n_components=2, covariance_type="diag", random_state=0).fit(X)


def _start(m):
    """The number of clusters a fit started from (its first pass's)."""
    return m.trace_[0]["n_components"]


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
def test_dp_start_with_births_holds_at_most_one_cluster_per_four_nu0_samples(covariance_type):
    """With the Dirichlet-process prior and births, a start seeded by init_params holds
    min(n_components, max(1, n // (4 nu0))) clusters; without births, with the finite prior or
    with a given start it holds n_components."""
    X, y = _blobs(n_per=100, D=3, n_clusters=3, sep=8.0)
    n = X.shape[0]
    kw = dict(covariance_type=covariance_type, max_iter=3, tol=0, random_state=0)
    dp = dict(kw, weight_concentration_prior_type="dirichlet_process")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for K, nu0 in ((40, None), (40, 6.0), (10, None), (40, 80.0), (40, 1000.0)):
            m = SparseGaussianMixture(n_components=K, degrees_of_freedom_prior=nu0, **dp).fit(X)
            assert _start(m) == int(min(K, max(1, n // (4 * m.degrees_of_freedom_prior_))))
        m = SparseGaussianMixture(n_components=40, init_params="random", **dp).fit(X)
        assert _start(m) == int(n // (4 * m.degrees_of_freedom_prior_)) < 40
        for extra in (dict(moves="merge+delete"), dict(init_params=y % 2),
                      dict(weights_init=np.full(40, 1 / 40))):
            assert _start(SparseGaussianMixture(n_components=40, **dp, **extra).fit(X)) == 40
        assert _start(SparseGaussianMixture(n_components=40, **kw).fit(X)) == 40


def test_dp_capped_start_is_the_fit_from_that_many_clusters_under_the_truncations_prior():
    """The capped start is the fit from n // (4 nu0) clusters with the weight prior of the
    truncation (gamma = 1 / n_components): the same parameters and objective, bit for bit."""
    X, _ = _blobs(n_per=120, D=3, n_clusters=4, sep=6.0)
    dp = dict(weight_concentration_prior_type="dirichlet_process", random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = SparseGaussianMixture(n_components=100, **dp).fit(X)
        S = int(X.shape[0] // (4 * a.degrees_of_freedom_prior_))
        assert _start(a) == S < 100
        b = SparseGaussianMixture(n_components=S, weight_concentration_prior=1 / 100,
                                  **dp).fit(X)
    assert a.lower_bound_ == b.lower_bound_
    assert np.array_equal(a.means_, b.means_)
    assert np.array_equal(a.precisions_cholesky_, b.precisions_cholesky_)
    assert np.array_equal(a.weights_, b.weights_)


def test_dp_capped_start_warns_only_at_the_truncation_naming_the_start_used():
    """A capped start that births grow to n_components or beyond warns, naming the start used,
    the truncation and the cap, and pointing to a larger start through init_params; one
    that stays below n_components does not warn."""
    from sparseclust import TruncationWarning

    X, _ = _blobs(n_per=150, D=2, n_clusters=8, sep=10.0)
    kw = dict(covariance_type="diag", degrees_of_freedom_prior=100.0,
              weight_concentration_prior_type="dirichlet_process", random_state=0)
    with pytest.warns(TruncationWarning) as record:
        m = SparseGaussianMixture(n_components=5, **kw).fit(X)
    assert _start(m) == X.shape[0] // 400 == 3
    assert m.n_components_ >= 5
    assert [str(w.message) for w in record] == [
        f"SparseGaussianMixture started from 3 clusters (n_components=5, at most one cluster "
        f"per 4 * nu0 = 400 samples) and grew to {m.n_components_}, so the number it learned "
        f"is a lower bound: births grow a small start only part of the way. Give init_params "
        f"(labels) or means_init to start from more clusters."]
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncationWarning)
        m = SparseGaussianMixture(n_components=30, **kw).fit(X)
    assert _start(m) == 3 < m.n_components_ < 30


def test_dp_births_that_grow_a_small_start_restore_the_requested_l_and_candidates(
        monkeypatch):
    """L and n_candidates are clamped to the start's size while it is smaller, and come back
    to the values asked for once births grow the model past them."""
    X, _ = _blobs(n_per=150, D=2, n_clusters=8, sep=10.0)
    models = []
    run = SparseGaussianMixture._run_engine

    def spy(self, model, *a, **k):
        models.append(model)
        return run(self, model, *a, **k)

    monkeypatch.setattr(SparseGaussianMixture, "_run_engine", spy)
    kw = dict(covariance_type="diag", weight_concentration_prior_type="dirichlet_process",
              random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = SparseGaussianMixture(n_components=3, L=4, n_candidates=5, **kw).fit(X)
        assert _start(m) == 3 and models[-1].n_components > 5
        assert (models[-1].L, models[-1].n_candidates) == (4, 5)
        SparseGaussianMixture(n_components=3, L=None, **kw).fit(X)
        assert models[-1].L == models[-1].n_components > 3


def test_uncapped_lower_bound_warning_message_is_unchanged():
    """Without a cap the warning keeps its text: the start is n_components."""
    from sparseclust import TruncationWarning

    X, _ = _blobs(n_per=150, D=2, n_clusters=8, sep=10.0)
    with pytest.warns(TruncationWarning) as record:
        m = SparseGaussianMixture(n_components=2, covariance_type="diag",
                                  weight_concentration_prior_type="dirichlet_process",
                                  random_state=0).fit(X)
    assert [str(w.message) for w in record] == [
        f"SparseGaussianMixture started from n_components=2 clusters and grew to "
        f"{m.n_components_}, so the number it learned is a lower bound: births grow a small "
        f"start only part of the way. Fit again from a larger n_components to let the merge "
        f"and delete moves choose the number."]


def test_births_per_round_grow_with_k(monkeypatch):
    """A round proposes births at up to max(max_births, ceil(birth_fraction * K)) clusters:
    4, or a quarter of the clusters."""
    from sparseclust.mixture import _dp_moves

    seen = []
    orig = _dp_moves.select_births

    def spy(size, *, max_candidates, **kw):
        seen.append((size.size, max_candidates))
        return orig(size, max_candidates=max_candidates, **kw)

    monkeypatch.setattr(_dp_moves, "select_births", spy)
    X, _ = _blobs(n_per=120, D=2, n_clusters=3, sep=8.0)
    for K in (2, 40):
        SparseGaussianMixture(n_components=K, covariance_type="diag", moves="birth",
                              weight_concentration_prior_type="dirichlet_process",
                              max_iter=10, tol=0, random_state=0).fit(X)
    assert seen and all(m == max(4, -(-k // 4)) for k, m in seen)
    assert any(m > 4 for _, m in seen)


def _sorted_value(st, prior):
    """The ELBO of plain-mixture statistics on their rows at their optimal global
    parameters, the clusters ordered by size, from numpy-level terms."""
    N = np.sort(st["N"])[::-1]
    return (_gaussian.optimal_allocation_terms(N, prior) + np.sum(st["entropy"])
            + np.sum(_gaussian.optimal_component_terms(st, prior)))


def _one_cluster(X, covariance_type):
    """The statistics of one cluster holding every row of X, by numpy."""
    X = np.asarray(X, dtype=np.float64)
    one = {"N": np.array([float(X.shape[0])]), "Sx": X.sum(0)[None], "entropy": np.zeros(1)}
    if covariance_type == "full":
        one["Sxx"] = (X.T @ X)[None]
    else:
        one["Sxx_diag"] = (X ** 2).sum(0)[None]
    return one


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
@pytest.mark.parametrize("zero_mean", [False, True])
def test_birth_fresh_clusters_must_beat_one_cluster_on_their_rows(covariance_type, zero_mean):
    # the screen of a birth: fresh clusters fit to one Gaussian's rows lose to one cluster
    # on those rows (None: the proposal is rejected before the re-inference; without the
    # screen they are returned); fresh clusters fit to two separated groups beat it, by the
    # ELBO computed here from numpy statistics
    from sparseclust.mixture._dp_rows import _fresh_clusters

    rng = np.random.RandomState(0)
    # isotropic, so that every covariance type explains it as well as one Gaussian can
    blob = rng.randn(800, 3)
    # with a zero mean the groups differ in spread, not in centre
    two = (np.vstack([blob[:400] * [6.0, 0.3, 0.3], blob[400:] * [0.3, 0.3, 6.0]])
           if zero_mean else np.vstack([blob[:400] - 12.0, blob[400:] + 12.0]))
    for X, split in ((blob, False), (two, True)):
        est = SparseGaussianMixture(3, covariance_type=covariance_type, zero_mean=zero_mean,
                                    weight_concentration_prior_type=DP)
        prior = est._build_prior(X)
        model = _DPMixtureModel(prior, 3, 3, X.dtype, moves=("birth",))
        got = _fresh_clusters(model, X, 3, np.random.RandomState(1), 10)
        single = _sorted_value(_one_cluster(X, covariance_type), prior)
        if not split:
            assert got is None
            assert _fresh_clusters(model, X, 3, np.random.RandomState(1), 10,
                                   screen=False) is not None
            continue
        assert got is not None
        assert _sorted_value(got, prior) > single + 100.0


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
def test_birth_fresh_clusters_stop_when_converged_or_unable_to_beat_one_cluster(
        monkeypatch, covariance_type):
    # each start of the fresh-cluster fit stops once an iteration gains less than FRESH_TOL
    # nats per row, and (screened) once its last gain, repeated in every iteration left,
    # cannot lift it past one cluster; the decisions and the fit are those of the loop that
    # runs every iteration: one Gaussian's rows are dropped, separated groups kept with the
    # ELBO the whole loop reaches
    from sparseclust.mixture import _dp_rows

    calls = []
    local_step = _SparseGMMModel.local_step

    def counting(self, X, params):
        calls.append(X.shape[0])
        return local_step(self, X, params)

    monkeypatch.setattr(_SparseGMMModel, "local_step", counting)
    rng = np.random.RandomState(0)
    blob = rng.randn(800, 3)
    two = np.vstack([blob[:400] - 12.0, blob[400:] + 12.0])
    n_iter = 100

    def fit(model, X, tol=_dp_rows.FRESH_TOL, cut=True):
        calls.clear()
        with monkeypatch.context() as m:
            m.setattr(_dp_rows, "FRESH_TOL", tol)
            if not cut:
                m.setattr(_dp_rows, "cannot_pass", lambda *a: False)
            got = _dp_rows._fresh_clusters(model, X, 3, np.random.RandomState(1), n_iter)
        return got, len(calls)

    for X, split in ((blob, False), (two, True)):
        est = SparseGaussianMixture(3, covariance_type=covariance_type,
                                    weight_concentration_prior_type=DP)
        prior = est._build_prior(X)
        model = _DPMixtureModel(prior, 3, 3, X.dtype, moves=("birth",))
        full, n_full = fit(model, X, tol=-np.inf, cut=False)
        assert n_full == 2 * n_iter
        got, n_got = fit(model, X)
        assert n_got < n_full / 4
        if not split:
            # the cut alone (no convergence stop) drops both starts early too
            cut_only, n_cut = fit(model, X, tol=-np.inf)
            assert got is None and full is None and cut_only is None
            assert n_cut < n_full
            continue

        assert got is not None and full is not None
        assert (abs(_sorted_value(got, prior) - _sorted_value(full, prior))
                <= _dp_rows.FRESH_TOL * X.shape[0])
        np.testing.assert_allclose(np.sort(got["N"]), np.sort(full["N"]), atol=1e-3)


@pytest.mark.parametrize("covariance_type", ["full", "spherical"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_birth_fresh_clusters_keep_a_start_that_rises_past_one_cluster(
        monkeypatch, covariance_type, dtype):
    # two overlapping groups: the k-means++ start begins below one cluster holding the rows
    # and rises past it; the cut (its last gain over the iterations left) must not drop it,
    # and the start kept is at least as good as that start run by the rule here (iterations
    # until one gains less than FRESH_TOL nats per row, at most n_iter); the cut is asked
    # with the values from the start on and the iterations left of the n_iter
    from sklearn.cluster import kmeans_plusplus

    from sparseclust.mixture import _dp_rows
    from sparseclust.mixture._dp_rows import FRESH_TOL, _fresh_clusters

    asked = []

    def spy(values, n_left, old):
        asked.append((len(values), n_left, old))
        return cannot_pass(values, n_left, old)

    cannot_pass = _dp_rows.cannot_pass
    monkeypatch.setattr(_dp_rows, "cannot_pass", spy)

    rng = np.random.RandomState(0)
    # full covariances pay more per cluster: their groups lie further apart
    sep = {"full": 2.8, "spherical": 2.2}[covariance_type]
    X = np.vstack([rng.randn(600, 3), rng.randn(600, 3) + [sep, 0.0, 0.0]]).astype(dtype)
    est = SparseGaussianMixture(3, covariance_type=covariance_type,
                                weight_concentration_prior_type=DP)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, 3, 3, X.dtype, moves=("birth",))
    plain = model.plain_model(3)
    n = X.shape[0]
    X64 = X.astype(np.float64)

    def value(st):
        return _sorted_value(st, prior)

    single = value(_one_cluster(X, covariance_type))
    # the first start, by hand: k-means++ draws first from the birth's stream
    centers, _ = kmeans_plusplus(X64, 3, random_state=np.random.RandomState(1))
    labels = ((X64[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1).astype(np.int32)
    st = plain.stats_from_responsibilities(np.ones((n, 1), dtype=dtype), labels[:, None], X)
    values = [value(st)]
    assert values[0] < single
    n_iter = 20
    for _ in range(n_iter):
        st = plain.local_step(X, plain.global_step(st))
        values.append(value(st))
        if values[-1] - values[-2] < FRESH_TOL * n:
            break
    assert values[-1] > single
    got = _fresh_clusters(model, X, 3, np.random.RandomState(1), n_iter)
    assert got is not None
    assert got["N"].dtype == np.float64
    assert asked and all(n_left == n_iter + 1 - n_values and n_values >= 2
                         for n_values, n_left, _ in asked)
    np.testing.assert_allclose([o for _, _, o in asked], single, rtol=1e-9)
    assert value(got) >= values[-1] - 1e-9 * abs(values[-1])


def test_birth_screens_only_a_target_it_fits_whole(monkeypatch):
    # the screen runs when the fresh clusters are fit to every row of the target, and not
    # when they are fit to a subsample of it (birth_fit_rows smaller than the target)
    from sklearn.datasets import make_blobs

    from sparseclust.mixture import _dp_moves, _dp_workspace

    seen = []
    fresh = _dp_workspace._fresh_clusters

    def spy(model, X, J, rng, n_iter, screen=True):
        seen.append((X.shape[0], screen))
        return fresh(model, X, J, rng, n_iter, screen=screen)

    monkeypatch.setattr(_dp_workspace, "_fresh_clusters", spy)
    X, _ = make_blobs(n_samples=1800, centers=3, n_features=2, cluster_std=0.5,
                      random_state=0)
    init = _dp_moves.MixtureMoves.init_moves
    for fit_rows in (20000, 300):
        def opts(self, moves, fit_rows=fit_rows):
            init(self, moves)
            self.move_opts["birth_fit_rows"] = fit_rows

        monkeypatch.setattr(_dp_moves.MixtureMoves, "init_moves", opts)
        seen.clear()
        est = SparseGaussianMixture(1, weight_concentration_prior_type=DP, random_state=0,
                                    n_threads=1).fit(X)
        assert seen
        assert all(screen == (n < fit_rows) for n, screen in seen)
        assert est.n_components_ == 3


def test_birth_fresh_clusters_keep_the_better_of_two_starts():
    # a birth's fresh clusters come from two starts, k-means++ on the rows and on their
    # directions from the rows' mean, and keep the one whose plain-mixture ELBO (clusters
    # ordered by size) is higher;
    # groups that share a centre and differ in covariance (a cross) are separated by the
    # second, which the first misses
    from sklearn.cluster import kmeans_plusplus

    from sparseclust.mixture._dp_rows import _fresh_clusters

    rng = np.random.RandomState(0)
    n = 600
    X = np.vstack([rng.randn(n, 2) * [6.0, 0.3], rng.randn(n, 2) * [0.3, 6.0]])
    truth = np.repeat([0, 1], n)
    est = SparseGaussianMixture(2, weight_concentration_prior_type=DP)
    prior = est._build_prior(X)
    model = _DPMixtureModel(prior, 2, 2, X.dtype, moves=("birth",))
    plain = model.plain_model(2)

    def value(st):
        return _sorted_value(st, prior)

    def euclidean_only(n_iter, seed):
        centers, _ = kmeans_plusplus(X, 2, random_state=np.random.RandomState(seed))
        labels = ((X[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
        st = plain.stats_from_responsibilities(np.ones((X.shape[0], 1)),
                                               labels[:, None].astype(np.int32), X)
        for _ in range(n_iter):
            st = plain.local_step(X, plain.global_step(st))
        return st

    for n_iter in (0, 2):
        got = _fresh_clusters(model, X, 2, np.random.RandomState(1), n_iter)
        ref = euclidean_only(n_iter, 1)  # the first start draws first from the same stream
        assert value(got) >= value(ref)
        # the kept start separates the two arms of the cross
        params = plain.global_step(got)
        vals, idx = posteriors.responsibilities(plain.weights(X, params), 1)
        purity = max(np.mean(idx[:, 0] == truth), np.mean(idx[:, 0] != truth))
        assert purity > 0.9
    # with the start on the rows alone, the arms stay mixed when no iteration follows
    params = plain.global_step(euclidean_only(0, 1))
    _, idx = posteriors.responsibilities(plain.weights(X, params), 1)
    assert max(np.mean(idx[:, 0] == truth), np.mean(idx[:, 0] != truth)) < 0.8
