# SPDX-License-Identifier: BSD-3-Clause
"""Compiled responsibilities and summary statistics against the numpy references."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from sparseclust import _reference as ref
from sparseclust import posteriors as P

pytestmark = pytest.mark.kernels

METHODS = ["select", "scan", "auto"]
RTOL = {np.float32: 1e-5, np.float64: 1e-12}
# absolute floor: exp of very negative weights underflows to subnormals in either code
ATOL = {np.float32: 1e-30, np.float64: 1e-290}

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def weights(draw, max_n=12, max_k=24, dtype=None):
    """Weight matrices with ties, -inf entries and extreme magnitudes (every row valid)."""
    dtype = dtype or draw(st.sampled_from([np.float32, np.float64]))
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(1, max_k))
    kind = draw(st.sampled_from(["ties", "gauss", "extreme"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "ties":  # integer weights: many duplicates
        W = rng.integers(-3, 3, size=(n, k)).astype(dtype)
    elif kind == "gauss":
        W = (rng.standard_normal((n, k)) * draw(st.sampled_from([0.1, 3.0, 50.0]))).astype(dtype)
    else:
        big = 1e300 if dtype == np.float64 else 1e38
        W = rng.choice(np.array([-big, big, 0.0, 1.0, -1.0], dtype=dtype), size=(n, k))
    if draw(st.booleans()):  # -inf entries, keeping one finite entry per row
        W[rng.random((n, k)) < 0.4] = -np.inf
        keep = rng.integers(0, k, size=n)
        W[np.arange(n), keep] = rng.standard_normal(n).astype(dtype)
    return W


def _layout(W, how):
    """Same values in another memory layout (non-contiguous, Fortran, read-only)."""
    if how == "C":
        return W
    if how == "F":
        return np.asfortranarray(W)
    if how == "strided":
        big = np.zeros((W.shape[0], 2 * W.shape[1]), dtype=W.dtype)
        big[:, ::2] = W
        return big[:, ::2]
    if how == "readonly":
        W = W.copy()
        W.setflags(write=False)
        return W
    raise AssertionError(how)


LAYOUTS = st.sampled_from(["C", "F", "strided", "readonly"])


# ----------------------------------------------------------------------------- top-L indices
@SETTINGS
@given(W=weights(), L=st.integers(1, 30), method=st.sampled_from(METHODS), layout=LAYOUTS)
def test_top_l_indices_matches_stable_argsort(W, L, method, layout):
    Wl = _layout(W, layout)
    before = Wl.copy()
    got = P.top_l_indices(Wl, L, method=method)
    expected = ref.top_l_indices(W, L)
    assert got.dtype == np.int32
    assert got.shape == (W.shape[0], min(L, W.shape[1]))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(Wl, before)


def test_top_l_ties_go_to_smaller_index():
    W = np.array([[1.0, 2.0, 2.0, 2.0, 0.0, 2.0]])
    for method in METHODS:
        np.testing.assert_array_equal(P.top_l_indices(W, 2, method=method), [[1, 2]])
        np.testing.assert_array_equal(P.top_l_indices(W, 4, method=method), [[1, 2, 3, 5]])
        np.testing.assert_array_equal(P.top_l_indices(W, 5, method=method), [[0, 1, 2, 3, 5]])


@pytest.mark.parametrize("method", ["select", "scan"])
@pytest.mark.parametrize("K,L", [(1, 1), (1, 5), (7, 1), (7, 7), (7, 9), (300, 4), (300, 40)])
def test_top_l_large_and_edge_shapes(method, K, L):
    rng = np.random.default_rng(K * 31 + L)
    W = np.round(rng.standard_normal((50, K)), 1)  # rounding creates ties
    np.testing.assert_array_equal(P.top_l_indices(W, L, method=method), ref.top_l_indices(W, L))
    # adversarial order for the scan: every weight beats the threshold
    Ws = np.sort(W, axis=1)
    np.testing.assert_array_equal(
        P.top_l_indices(Ws, L, method=method), ref.top_l_indices(Ws, L)
    )


# -------------------------------------------------------------------------- responsibilities
@SETTINGS
@given(W=weights(), L=st.one_of(st.none(), st.integers(1, 30)), layout=LAYOUTS)
def test_responsibilities_match_reference(W, L, layout):
    Wl = _layout(W, layout)
    before = Wl.copy()
    v, idx = P.responsibilities(Wl, L)
    K = W.shape[1]
    Lp = K if L is None else min(L, K)
    rv, ri = ref.sparse_responsibilities(W, Lp)
    assert v.dtype == W.dtype and idx.dtype == np.int32 and v.shape == (W.shape[0], Lp)
    np.testing.assert_array_equal(idx, ri)
    dt = W.dtype.type
    np.testing.assert_allclose(v, rv, rtol=RTOL[dt], atol=ATOL[dt])
    assert not np.isnan(v).any()
    assert (v >= 0).all()
    np.testing.assert_allclose(v.sum(axis=1), 1.0, rtol=10 * RTOL[dt])
    # -inf weights get exactly zero responsibility
    assert (v[np.take_along_axis(W, idx, 1) == -np.inf] == 0).all()
    np.testing.assert_array_equal(Wl, before)


@SETTINGS
@given(
    W=weights(),
    L=st.integers(1, 30),
    method=st.sampled_from(["select", "scan", "insert", "buffer"]),
)
def test_both_selection_paths_give_identical_responsibilities(W, L, method):
    from sparseclust._kernels import _topl

    L = min(L, W.shape[1])
    code = {"select": _topl.SELECT, "scan": _topl.SCAN, "insert": _topl.INSERT,
            "buffer": _topl.BUFFER}[method]
    v, idx, n_bad = _topl.top_l(np.ascontiguousarray(W), L, code, True, 1)
    rv, ri = ref.sparse_responsibilities(W, L)
    assert n_bad == 0
    np.testing.assert_array_equal(idx, ri)
    dt = W.dtype.type
    np.testing.assert_allclose(v, rv, rtol=RTOL[dt], atol=ATOL[dt])


@SETTINGS
@given(W=weights(), layout=LAYOUTS)
def test_dense_responsibilities_match_softmax(W, layout):
    Wl = _layout(W, layout)
    R = P.dense_responsibilities(Wl)
    dt = W.dtype.type
    assert R.dtype == W.dtype and R.shape == W.shape
    np.testing.assert_allclose(R, ref.dense_responsibilities(W), rtol=RTOL[dt], atol=ATOL[dt])
    assert not np.isnan(R).any()


@SETTINGS
@given(W=weights(), L=st.integers(1, 30))
def test_sparse_responsibilities_csr(W, L):
    S = P.sparse_responsibilities(W, L)
    assert isinstance(S, sp.csr_array) and S.shape == W.shape
    assert S.has_canonical_format
    assert (np.diff(S.indptr) <= L).all()
    dt = W.dtype.type
    np.testing.assert_allclose(S.sum(axis=1), 1.0, rtol=10 * RTOL[dt])
    Rd = np.zeros(W.shape)
    rv, ri = ref.sparse_responsibilities(W, L)
    np.put_along_axis(Rd, ri.astype(np.intp), rv, axis=1)
    np.testing.assert_allclose(S.toarray(), Rd, rtol=RTOL[dt], atol=ATOL[dt])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # in the reference
def test_extreme_rows():
    W = np.array(
        [
            [1e300, -1e300, 0.0, 1e300],
            [-np.inf, -np.inf, 5.0, -np.inf],  # single finite entry
            [-1e300, -1e300, -1e300, -1e300],
            [np.finfo(float).max, -np.finfo(float).max, -np.inf, 0.0],
        ]
    )
    for L in (1, 2, 4):
        v, idx = P.responsibilities(W, L)
        rv, ri = ref.sparse_responsibilities(W, L)
        np.testing.assert_array_equal(idx, ri)
        np.testing.assert_allclose(v, rv, rtol=1e-12, atol=0)
        assert not np.isnan(v).any()
    np.testing.assert_array_equal(P.responsibilities(W, 2)[0][1], [0.0, 1.0])


@pytest.mark.parametrize("code_name", ["INSERT", "BUFFER", "BUFFER_PORTABLE", "SCAN"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("K,L", [(9, 2), (64, 4), (200, 1), (203, 4), (400, 16), (1500, 32)])
def test_single_pass_variants_long_rows(code_name, dtype, K, L):
    """Both single-pass variants (and the L, K dispatch) on rows long enough for the block
    test, the seeded threshold and several compactions: sorted rows put every weight above
    the running threshold, rounded rows have many ties, -inf-heavy rows have fewer finite
    entries than L. BUFFER_PORTABLE is the buffer scan with the portable block test (the
    code a compiler without vector extensions gets; BUFFER is that code too in such a
    build)."""
    from sparseclust._kernels import _topl

    code = getattr(_topl, code_name)
    rng = np.random.default_rng(K + 7 * L)
    G = rng.standard_normal((30, K))
    rows = [G, np.round(G, 1), np.sort(G, axis=1), np.sort(np.round(G), axis=1)[:, ::-1]]
    Winf = np.round(G, 1)
    Winf[rng.random(Winf.shape) < 0.97] = -np.inf
    Winf[np.arange(30), rng.integers(0, K, 30)] = 0.5
    rows.append(Winf)
    W = np.ascontiguousarray(np.vstack(rows).astype(dtype))
    v, idx, n_bad = _topl.top_l(W, L, code, False, 1)
    assert n_bad == 0
    np.testing.assert_array_equal(idx, ref.top_l_indices(W, L))
    np.testing.assert_array_equal(v, np.take_along_axis(W, idx, 1))


@pytest.mark.parametrize("code_name", ["INSERT", "BUFFER", "BUFFER_PORTABLE", "SCAN"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_single_pass_variants_flag_bad_entries_anywhere(code_name, bad):
    from sparseclust._kernels import _topl

    code = getattr(_topl, code_name)
    K = 203  # 25 full blocks of 8 and a tail of 3
    rng = np.random.default_rng(1)
    base = rng.standard_normal(K)
    for L in (1, 4, 16):
        positions = [0, L - 1, L, 7, 8, 100, 199, 200, K - 1]
        W = np.tile(base, (len(positions) + 1, 1))
        W[np.arange(len(positions)), positions] = bad
        for sorted_rows in (False, True):
            Wt = np.sort(W, axis=1) if sorted_rows else W
            if sorted_rows:  # np.sort moves NaN last; put one NaN/inf first too
                Wt = np.vstack([Wt, np.concatenate([[bad], np.sort(base)[1:]])])
            _, _, n_bad = _topl.top_l(np.ascontiguousarray(Wt), L, code, True, 1)
            assert n_bad == Wt.shape[0] - 1


@pytest.mark.parametrize("bad", [np.nan, np.inf, "all-inf"])
@pytest.mark.parametrize("L", [1, 2, 3, 5, None])
@pytest.mark.parametrize("method", ["select", "scan"])
def test_bad_rows_raise(bad, L, method):
    rng = np.random.default_rng(0)
    W = rng.standard_normal((6, 5))
    for pos in (0, 4):  # the bad entry early (initial buffer) and late (scan) in the row
        Wb = W.copy()
        if bad == "all-inf":
            Wb[3] = -np.inf
        else:
            Wb[3, pos] = bad
        with pytest.raises(ValueError, match="row 3"):
            P.top_l_indices(Wb, 2 if L is None else L, method=method)
        with pytest.raises(ValueError, match="no finite weight or contain NaN"):
            P.responsibilities(Wb, L)
        with pytest.raises(ValueError):
            P.sparse_responsibilities(Wb, 2)
        with pytest.raises(ValueError):
            P.dense_responsibilities(Wb)


def test_bad_arguments():
    W = np.zeros((3, 4))
    for L in (0, -1, 1.5):
        with pytest.raises(ValueError, match="L must be"):
            P.responsibilities(W, L)
    with pytest.raises(ValueError, match="method"):
        P.top_l_indices(W, 2, method="heap")
    with pytest.raises(ValueError, match="2-D"):
        P.responsibilities(np.zeros(4), 2)
    with pytest.raises(ValueError, match="2-D"):
        P.dense_responsibilities(np.zeros((3, 0)))


def test_integer_input_is_promoted():
    W = np.array([[1, 3, 2], [5, 5, 0]])
    v, idx = P.responsibilities(W, 2)
    assert v.dtype == np.float64
    np.testing.assert_array_equal(idx, [[1, 2], [0, 1]])
    np.testing.assert_allclose(v[1], [0.5, 0.5])


@pytest.mark.parametrize("L", [1, 4, 16, 64, None])
def test_threads_bit_identical(L):
    rng = np.random.default_rng(1)
    W = rng.standard_normal((2001, 300))
    v1, i1 = P.responsibilities(W, L, n_threads=1)
    v2, i2 = P.responsibilities(W, L, n_threads=2)
    np.testing.assert_array_equal(i1, i2)
    assert np.array_equal(v1, v2)
    for method in ("select", "scan"):
        np.testing.assert_array_equal(
            P.top_l_indices(W, 7, method=method, n_threads=1),
            P.top_l_indices(W, 7, method=method, n_threads=2),
        )


# ---------------------------------------------------------------------- summary statistics
@st.composite
def sparse_problem(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    W = draw(weights(max_n=30, max_k=12, dtype=dtype))
    L = draw(st.integers(1, 14))
    D = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**32 - 1))
    X = (np.random.default_rng(seed).standard_normal((W.shape[0], D)) * 3).astype(dtype)
    return W, L, X


def _assert_stats_close(got, exp, X, rtol):
    scale = np.abs(X).max() ** 2 * max(1.0, X.shape[0]) + 1.0
    np.testing.assert_allclose(got["N"], exp["N"], rtol=rtol, atol=rtol * X.shape[0])
    np.testing.assert_allclose(got["Sx"], exp["Sx"], rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(got["entropy"], exp["entropy"], rtol=rtol, atol=rtol * X.shape[0])
    if "Sxx" in got:
        np.testing.assert_allclose(got["Sxx"], exp["Sxx"], rtol=rtol, atol=rtol * scale)
        np.testing.assert_array_equal(got["Sxx"], np.swapaxes(got["Sxx"], 1, 2))
    if "Sxx_diag" in got:
        np.testing.assert_allclose(got["Sxx_diag"], exp["Sxx_diag"], rtol=rtol, atol=rtol * scale)


@SETTINGS
@given(prob=sparse_problem(), moments=st.sampled_from(["full", "diag", "none"]), layout=LAYOUTS)
def test_summary_statistics_match_einsum(prob, moments, layout):
    W, L, X = prob
    K = W.shape[1]
    v, idx = P.responsibilities(W, L)
    exp = ref.summary_statistics(
        v.astype(np.float64), idx, X.astype(np.float64), K
    )
    vl, Xl = _layout(v, layout), _layout(X, layout)
    before = (vl.copy(), Xl.copy())
    got = P.summary_statistics(vl, idx, Xl, K, moments=moments)
    expected_keys = {"full": "Sxx", "diag": "Sxx_diag", "none": None}[moments]
    keys = {"N", "Sx", "entropy"} | ({expected_keys} if expected_keys else set())
    assert set(got) == keys
    assert all(a.dtype == np.float64 for a in got.values())
    # float32 inputs are exact in float64, so the tolerance reflects the accumulation only
    _assert_stats_close(got, exp, X.astype(np.float64), 1e-12)
    assert not any(np.isnan(a).any() for a in got.values())
    np.testing.assert_array_equal(vl, before[0])
    np.testing.assert_array_equal(Xl, before[1])


def test_summary_statistics_dense_equals_einsum():
    rng = np.random.default_rng(3)
    N, K, D = 500, 9, 7
    W = rng.standard_normal((N, K)) * 2
    X = rng.standard_normal((N, D))
    R = ref.dense_responsibilities(W)
    idx = np.broadcast_to(np.arange(K, dtype=np.int32), (N, K))
    got = P.summary_statistics(R, idx, X, K)
    np.testing.assert_allclose(got["Sxx"], np.einsum("nk,nd,ne->kde", R, X, X), rtol=1e-12)
    np.testing.assert_allclose(got["Sx"], R.T @ X, rtol=1e-12)
    np.testing.assert_allclose(got["N"], R.sum(0), rtol=1e-12)
    np.testing.assert_allclose(got["entropy"], -(R * np.log(R)).sum(0), rtol=1e-12)


@pytest.mark.parametrize("moments", ["full", "diag", "none"])
def test_summary_statistics_threads_bit_identical(moments):
    rng = np.random.default_rng(2)
    N, K, D = 3000, 40, 20  # > 256 rows per cluster: several BLAS blocks per cluster
    W = rng.standard_normal((N, K))
    X = rng.standard_normal((N, D))
    v, idx = P.responsibilities(W, 4)
    a = P.summary_statistics(v, idx, X, K, moments=moments, n_threads=1)
    b = P.summary_statistics(v, idx, X, K, moments=moments, n_threads=2)
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    exp = ref.summary_statistics(v, idx, X, K)
    _assert_stats_close(a, exp, X, 1e-12)


def test_summary_statistics_bad_input():
    v = np.full((3, 2), 0.5)
    idx = np.array([[0, 1], [1, 2], [0, 2]], dtype=np.int32)
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="outside"):
        P.summary_statistics(v, idx, X, 2)  # index 2 with K = 2 (int32: kernel check)
    with pytest.raises(ValueError, match="lie in"):
        P.summary_statistics(v, idx.astype(np.int64), X, 2)
    with pytest.raises(ValueError, match="distinct"):
        P.summary_statistics(v, np.array([[0, 0], [1, 2], [0, 2]]), X, 3)
    for bad in (-0.1, np.nan, np.inf):
        vb = v.copy()
        vb[1, 1] = bad
        with pytest.raises(ValueError, match="negative or not finite"):
            P.summary_statistics(vb, idx, X, 3)
    with pytest.raises(ValueError, match="moments"):
        P.summary_statistics(v, idx, X, 3, moments="upper")
    with pytest.raises(ValueError, match="rows"):
        P.summary_statistics(v, idx, np.ones((4, 2)), 3)
    with pytest.raises(ValueError, match="same shape"):
        P.summary_statistics(v, idx[:, :1], X, 3)
    with pytest.raises(ValueError, match="n_components"):
        P.summary_statistics(v, idx, X, 0)


def test_clear_errors_for_unsupported_or_invalid_arguments():
    import scipy.sparse as sps

    W = np.random.RandomState(0).randn(6, 5)
    with pytest.raises(ValueError, match="scipy.sparse"):
        P.responsibilities(sps.csr_array(W), 2)
    with pytest.raises(ValueError, match="L must be an integer"):
        P.responsibilities(W, np.nan)
    with pytest.raises(ValueError, match="L must be an integer"):
        P.responsibilities(W, True)
    with pytest.raises(ValueError, match="n_threads"):
        P.responsibilities(W, 2, n_threads=1.5)
    v, i = P.responsibilities(W, 2)
    with pytest.raises(ValueError, match="NaN or infinity"):
        P.summary_statistics(v, i, np.full((6, 3), np.nan), 5)
    with pytest.raises(ValueError, match="scipy.sparse"):
        P.summary_statistics(v, i, sps.csr_array(np.ones((6, 3))), 5)
