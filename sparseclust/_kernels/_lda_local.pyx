# SPDX-License-Identifier: BSD-3-Clause
"""The LDA document local step, dense and L-sparse (Hughes & Sudderth 2016, Sec. 5, Alg. 2, App. C-D).

For every document d with unique word types v_du and counts c_du the kernel alternates

    P_dk   = E[log pi_dk] = psi(N_dk + alpha_k) - psi(sum_l N_dl + alpha_l)      (Eq. 10)
    W_duk  = P_dk + C_{v_du k},     C_vk = E[log phi_kv]
    r_du   = exp-normalize of W_du over all K topics (dense, L >= K), or over the
             top-L entries of W_du among the document's active topics (L-sparse, Alg. 1)
    N_dk   = sum_u c_du r_duk,      theta_dk = N_dk + alpha_k

from a cold start with uniform document weights (P_dk = -log K), until
max_k |Delta N_dk| < tol or max_iter iterations, then tries restart proposals (App. D.4).

One routine handles both regimes.  In the *dense* regime (the wrapper asks for it when L >= K)
the weights are never formed in log space: ``ET[v, k] = exp(C_vk - max_k C_vk)`` is precomputed
and r_du = expP * ET[v] / <expP, ET[v]> with expP_k = exp(P_dk - max_k P_dk), so each word type
costs one dot product and one axpy of length K.  In the *sparse* regime the active set
A_d = {k : N_dk > eps} is tracked (eps = 1e-8 * N_d, a topic that falls below it is dropped for
good, App. D.3), top-L selection runs over A_d only at the first ``n_select_first`` iterations
and every ``select_every``-th after, and in between each word type only reweights its kept
topics (their indices are stored per word type).  The sparse routine with L >= |A_d| is the
dense algorithm computed in log space, restricted to the active set.

Cost of the sparse regime (all exact; see ``lda_local_docs``): the cold start reads a batch-wide
table of each word type's top-L topics and responsibilities under uniform P (O(L) per word
type instead of O(K)); later selections scan the active topics by decreasing P_dk and stop at
the bound max_k C_vk + P_dk; after the cold start the weights of the kept topics are
exp(C_vk - cm_v) (stored at the word type's selection, cm_v = max of its kept C_vk) times
exp(P_dk - max_k P_dk) (|A_d| exponentials per document and iteration), normalized; the
log-space formula is used when that product underflows for every kept topic of a word type.

Document ELBO (App. C, Eq. 47-49, with theta at its optimum N + alpha):

    L_d = c_Dir(alpha) - c_Dir(theta_d) + sum_u c_du sum_k r_duk (C_{v_du k} - log r_duk)

Because r_du is the exp-normalization of W_du with the P that produced it,
sum_k r_duk (C - log r_duk) = log Z_du - sum_k r_duk P_dk, so L_d = c_Dir(alpha) - c_Dir(theta_d)
+ sum_u c_du log Z_du - sum_k N_dk P_dk.  The kernel reports, per document, this value minus the
data term sum_u c_du sum_k r_duk C_{v_du k} (the "local" ELBO terms, independent of the topics)
and the data term separately; the global model recomputes the data term from the statistics.

Restart proposals: after convergence, the used topics (N_dk > restart_min) are sorted by
increasing mass; for each of the ``restarts`` smallest (never the last used topic) the proposal
sets N_dk = 0, forbids topic k, runs up to ``restart_max_iter`` iterations, and is accepted iff
L_d increases (Hughes, Kim & Sudderth 2015; Hughes & Sudderth 2016, App. D.4).

Determinism: each document is processed by one thread with private scratch and writes only its
own output slots; the summary step then accumulates every word type's row of the statistics
(owned by one thread) in a fixed (document) order.  Results are therefore bit-identical for any
thread count.
"""

from cython cimport floating
from cython.parallel cimport parallel, prange
from libc.math cimport exp, fabs, log, INFINITY
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from scipy.special.cython_special cimport gammaln

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc

import numpy as np


def _fail_thread_allocations(int thread):
    """Make the per-thread buffer allocations of OpenMP thread ``thread`` fail (-1: none,
    -2: every thread).

    For tests of the out-of-memory path only.
    """
    sc_set_alloc_fail_thread(thread)

cdef extern from * nogil:
    """
    #include <algorithm>
    // Reorder idx[0:n] so that idx[0:L] hold the L topics of largest w[k]; ties go to the
    // smaller topic index (a strict total order, so the selected set is unique).
    static inline void sc_lda_select_top(const double* w, int* idx, int n, int L) {
        std::nth_element(idx, idx + (L - 1), idx + n, [w](int a, int b) {
            return w[a] > w[b] || (w[a] == w[b] && a < b);
        });
    }
    // Sort idx[0:n] by decreasing val[k] (ties: smaller index first).
    static inline void sc_lda_sort_desc(const double* val, int* idx, int n) {
        std::sort(idx, idx + n, [val](int a, int b) {
            return val[a] > val[b] || (val[a] == val[b] && a < b);
        });
    }
    // Sort idx[0:n] by increasing val[k] (ties: smaller index first), first m entries only.
    static inline void sc_lda_sort_smallest(const double* val, int* idx, int n, int m) {
        std::partial_sort(idx, idx + m, idx + n, [val](int a, int b) {
            return val[a] < val[b] || (val[a] == val[b] && a < b);
        });
    }
    """
    void sc_lda_select_top(const double* w, int* idx, int n, int L)
    void sc_lda_sort_smallest(const double* val, int* idx, int n, int m)
    void sc_lda_sort_desc(const double* val, int* idx, int n)


# ---------------------------------------------------------------------------------------------
# digamma


cdef inline double _digamma(double x) noexcept nogil:
    """psi(x) for x > 0: recurrence psi(x) = psi(x + 1) - 1/x up to x >= 8, then the
    asymptotic series log x - 1/(2x) - sum_n B_2n / (2n x^2n) through x^-12 (abs. error
    below 2e-14 at x = 8)."""
    cdef double acc = 0.0, f
    while x < 8.0:
        acc -= 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    return acc + log(x) - 0.5 / x - f * (
        1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
            1.0 / 240.0 - f * (1.0 / 132.0 - f * (691.0 / 32760.0))))))


def digamma(const double[::1] x):  # IN (n,)
    """Digamma of positive values with the kernel's own series (tested against scipy).

    Equivalent to ``scipy.special.psi(x)`` for ``x > 0``.
    """
    cdef Py_ssize_t i, n = x.shape[0]
    out = np.empty(n)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = _digamma(x[i])
    return out


# ---------------------------------------------------------------------------------------------
# per-document state


cdef struct Ctx:
    int K
    int Lk            # kept entries per word type (sparse), 0 in the dense regime
    int dense
    int max_iter
    int n_select_first
    int select_every
    int restarts
    int restart_max_iter
    double tol
    double eps_rel
    double restart_min
    double log_K
    double sum_alpha      # sum_k alpha_k + alpha_rem
    double lg_sum_alpha
    # cold-start document weights P0 (K,) (NULL: uniform, P0_k = -log K) and max_k P0_k
    const double* P0
    double P0max
    const double* CT      # (V, K) E[log phi]^T
    const double* ET      # (V, K) exp(CT - rowmax) (dense only)
    const double* rowmax  # (V,) (dense only)
    const double* alpha   # (K,)
    const double* lg_alpha  # (K,) gammaln(alpha)
    # sparse regime, cold-start table (NULL when not used): word type v of the batch has row
    # cold_row[v] of the (V_batch, Lk) selection and responsibilities of the first iteration
    const int32_t* cold_row
    const int* cold_idx
    const double* cold_r
    const double* cold_zm
    const double* cold_zs
    # sparse regime, bounded selection (NULL when not used): cmax[v] = max_k C_vk
    const double* cmax


cdef struct DocState:
    double* N       # (K,)  topic counts of the current responsibilities
    double* P       # (K,)  E[log pi] that produced them
    double* expP    # (K,)  exp(P - pshift), 0 for forbidden topics (dense)
    double* r       # (Umax * Lk,) kept responsibilities (sparse)
    int* idx        # (Umax * Lk,) kept topic indices (sparse)
    int* nk         # (Umax,) number kept per word type (sparse)
    double* zm      # (Umax,) max kept weight (sparse)
    double* zs      # (Umax,) normalizer: sum exp(W - zm) (sparse) / <expP, ET[v]> (dense)
    double* ce      # (Umax * Lk,) exp(C_vk - cm) of the kept topics (sparse)
    double* cm      # (Umax,) reference value of ce (sparse)
    int* active     # (K,) topics that may carry mass (sparse: active set; dense: allowed)
    char* act       # (K,) membership flags of `active`
    int n_active
    double pshift


cdef struct Work:
    double* Nnew    # (K,)
    double* w       # (K,)
    int* cand       # (K,)
    int* rcand      # (K,) restart candidates
    int* order      # (K,) active topics by decreasing P (bounded selection)


cdef inline void _bind(DocState* s, double* dbuf, int* ibuf, char* cbuf, int K, int Umax,
                       int Lk) noexcept nogil:
    # offsets in Py_ssize_t: 3 K + 3 Umax can exceed the int range
    cdef Py_ssize_t k = K, u = Umax
    s.N = dbuf
    s.P = dbuf + k
    s.expP = dbuf + 2 * k
    s.zm = dbuf + 3 * k
    s.zs = dbuf + 3 * k + u
    s.cm = dbuf + 3 * k + 2 * u
    s.r = dbuf + 3 * k + 3 * u
    s.ce = s.r + u * Lk
    s.active = ibuf
    s.nk = ibuf + k
    s.idx = ibuf + k + u
    s.act = cbuf


cdef inline Py_ssize_t _state_doubles(int K, int Umax, int Lk) noexcept nogil:
    return 3 * <Py_ssize_t> K + 3 * <Py_ssize_t> Umax + 2 * <Py_ssize_t> Umax * Lk


cdef inline Py_ssize_t _state_ints(int K, int Umax, int Lk) noexcept nogil:
    return <Py_ssize_t> K + <Py_ssize_t> Umax + <Py_ssize_t> Umax * Lk


cdef void _copy_state(const Ctx* c, DocState* dst, const DocState* src) noexcept nogil:
    """Copy what a proposal starts from: counts and the active set."""
    memcpy(dst.N, src.N, c.K * sizeof(double))
    memcpy(dst.act, src.act, c.K * sizeof(char))
    memcpy(dst.active, src.active, src.n_active * sizeof(int))
    dst.n_active = src.n_active


cdef void _swap_states(DocState* a, DocState* b) noexcept nogil:
    cdef DocState t = a[0]
    a[0] = b[0]
    b[0] = t


# ---------------------------------------------------------------------------------------------
# top-L selection by a single scan


# largest L for which the scan (a sorted buffer of L entries) is used instead of introselect
cdef enum:
    _SCAN_MAX_L = 32


cdef inline void _scan_top(const double* C, const double* P, const int* active, int n, int L,
                           double* val, int* idx) noexcept nogil:
    """idx[0:L] <- the L active topics of largest C[k] + P[k], n > L.

    One pass with a descending buffer of the best L so far; a candidate costs one add and one
    compare unless it beats the current L-th best. ``active`` is in increasing topic order, so
    keeping the earlier of two equal weights breaks ties toward the smaller index, as
    ``sc_lda_select_top`` does.
    """
    cdef int j, k, pos
    cdef double x
    for j in range(L):
        k = active[j]
        x = C[k] + P[k]
        pos = j
        while pos > 0 and val[pos - 1] < x:
            val[pos] = val[pos - 1]
            idx[pos] = idx[pos - 1]
            pos -= 1
        val[pos] = x
        idx[pos] = k
    for j in range(L, n):
        k = active[j]
        x = C[k] + P[k]
        if x > val[L - 1]:
            pos = L - 1
            while pos > 0 and val[pos - 1] < x:
                val[pos] = val[pos - 1]
                idx[pos] = idx[pos - 1]
                pos -= 1
            val[pos] = x
            idx[pos] = k


cdef inline void _scan_top_bounded(const double* C, const double* P, const int* order, int n,
                                   int L, double cmax, double* val, int* idx) noexcept nogil:
    """idx[0:L] <- the L active topics of largest C[k] + P[k] (ties: smaller k first), n > L.

    ``order`` lists the active topics by decreasing P (ties: smaller k first) and ``cmax`` is
    max_k C[k]. Rounding is monotone, so fl(C[k] + P[k]) <= fl(cmax + P[k]); once
    fl(cmax + P[k]) falls below the current L-th best weight, neither topic k nor any later one
    (smaller P) can enter, and the scan stops. The comparison is the strict total order
    (weight descending, index ascending), so the result (set and order) equals ``_scan_top``'s.
    """
    cdef int j, k, pos
    cdef double x
    for j in range(L):
        k = order[j]
        x = C[k] + P[k]
        pos = j
        while pos > 0 and (val[pos - 1] < x or (val[pos - 1] == x and idx[pos - 1] > k)):
            val[pos] = val[pos - 1]
            idx[pos] = idx[pos - 1]
            pos -= 1
        val[pos] = x
        idx[pos] = k
    for j in range(L, n):
        k = order[j]
        if P[k] + cmax < val[L - 1]:
            break
        x = C[k] + P[k]
        if x > val[L - 1] or (x == val[L - 1] and k < idx[L - 1]):
            pos = L - 1
            while pos > 0 and (val[pos - 1] < x or (val[pos - 1] == x and idx[pos - 1] > k)):
                val[pos] = val[pos - 1]
                idx[pos] = idx[pos - 1]
                pos -= 1
            val[pos] = x
            idx[pos] = k


cdef inline void _kept_exp(const double* C, const int* idx, int nk, double* ce,
                           double* cm) noexcept nogil:
    """ce[j] = exp(C[idx[j]] - cm) with cm = max_j C[idx[j]], for the reweighting iterations."""
    cdef int j
    cdef double m = -INFINITY
    for j in range(nk):
        if C[idx[j]] > m:
            m = C[idx[j]]
    for j in range(nk):
        ce[j] = exp(C[idx[j]] - m)
    cm[0] = m


# ---------------------------------------------------------------------------------------------
# one iteration


cdef inline double _exp_shifted(const double* C, const double* P, const int* idx, int n,
                                double* r, double* m_out) noexcept nogil:
    """r[j] = exp(C[k] + P[k] - m) for k = idx[j], m their maximum (written to m_out);
    returns sum_j r[j]. The log-space exp-normalize of a word type's kept topics."""
    cdef int j, k
    cdef double x, m = -INFINITY, ssum = 0.0
    for j in range(n):
        k = idx[j]
        x = C[k] + P[k]
        r[j] = x
        if x > m:
            m = x
    for j in range(n):
        r[j] = exp(r[j] - m)
        ssum = ssum + r[j]
    m_out[0] = m
    return ssum


cdef double _iter_dense(const Ctx* c, DocState* s, Work* wk, const int32_t* vids,
                        const floating* cnt, int U, bint first, int* underflow) noexcept nogil:
    """One dense iteration over all (allowed) topics; returns max_k |Delta N_k|."""
    cdef int K = c.K, k, j, u
    cdef double stheta, psum, pmax, z, z0, z1, z2, z3, coef, nn, delta = 0.0, d
    cdef const double* e
    cdef double* Nnew = wk.Nnew
    if first:
        if c.P0 == NULL:
            for k in range(K):
                s.P[k] = -c.log_K
                s.expP[k] = 1.0 if s.act[k] else 0.0
            s.pshift = -c.log_K
        else:
            for k in range(K):
                s.P[k] = c.P0[k]
                s.expP[k] = exp(c.P0[k] - c.P0max) if s.act[k] else 0.0
            s.pshift = c.P0max
    else:
        stheta = c.sum_alpha
        for j in range(s.n_active):
            stheta += s.N[s.active[j]]
        psum = _digamma(stheta)
        pmax = -INFINITY
        for j in range(s.n_active):
            k = s.active[j]
            s.P[k] = _digamma(s.N[k] + c.alpha[k]) - psum
            if s.P[k] > pmax:
                pmax = s.P[k]
        memset(s.expP, 0, K * sizeof(double))
        for j in range(s.n_active):
            k = s.active[j]
            s.expP[k] = exp(s.P[k] - pmax)
        s.pshift = pmax
    memset(Nnew, 0, K * sizeof(double))
    for u in range(U):
        e = c.ET + <Py_ssize_t> vids[u] * K
        # four independent partial sums (a fixed order, so still deterministic)
        z0 = z1 = z2 = z3 = 0.0
        k = 0
        while k + 4 <= K:
            z0 = z0 + s.expP[k] * e[k]
            z1 = z1 + s.expP[k + 1] * e[k + 1]
            z2 = z2 + s.expP[k + 2] * e[k + 2]
            z3 = z3 + s.expP[k + 3] * e[k + 3]
            k += 4
        while k < K:
            z0 = z0 + s.expP[k] * e[k]
            k += 1
        z = (z0 + z1) + (z2 + z3)
        if not (z > 1e-300):
            # every allowed topic underflowed for this word type: the wrapper redoes the
            # document in log space
            underflow[0] = 1
            z = 1.0
        s.zs[u] = z
        coef = cnt[u] / z
        for k in range(K):
            Nnew[k] = Nnew[k] + coef * e[k]
    for k in range(K):
        nn = Nnew[k] * s.expP[k]
        d = fabs(nn - s.N[k])
        if d > delta:
            delta = d
        s.N[k] = nn
    return delta


cdef double _iter_sparse(const Ctx* c, DocState* s, Work* wk, const int32_t* vids,
                         const floating* cnt, int U, bint first, bint select,
                         double eps) noexcept nogil:
    """One L-sparse iteration over the active set; returns max_k |Delta N_k|."""
    cdef int K = c.K, Lk = c.Lk, k, j, u, n, nk, t
    cdef bint use_order, fresh
    cdef double stheta, psum, m, ssum, inv, x, cu, delta = 0.0, d, pmax = 0.0
    cdef double* ce
    cdef const double* C
    cdef double* r
    cdef int* idx
    cdef double* Nnew = wk.Nnew
    cdef double* w = wk.w
    cdef int* cand = wk.cand
    if first:
        n = 0
        for k in range(K):
            if s.act[k]:
                s.active[n] = k
                n += 1
            s.P[k] = -c.log_K if c.P0 == NULL else c.P0[k]
        s.n_active = n
        select = True
    else:
        # drop topics whose mass fell below eps: they never come back (App. D.3)
        n = 0
        stheta = c.sum_alpha
        for j in range(s.n_active):
            k = s.active[j]
            if s.N[k] > eps:
                s.active[n] = k
                n += 1
                stheta += s.N[k]
            else:
                s.N[k] = 0.0
                s.act[k] = 0
        s.n_active = n
        psum = _digamma(stheta)
        pmax = -INFINITY
        for j in range(n):
            k = s.active[j]
            s.P[k] = _digamma(s.N[k] + c.alpha[k]) - psum
            if s.P[k] > pmax:
                pmax = s.P[k]
        # after the cold start, exp(C_vk + P_k) = exp(cm_v) exp(C_vk - cm_v) exp(P_k - pmax)
        # exp(pmax), with exp(C_vk - cm_v) stored per word type at its selection
        for j in range(n):
            k = s.active[j]
            s.expP[k] = exp(s.P[k] - pmax)
    for j in range(s.n_active):
        Nnew[s.active[j]] = 0.0
    if first and c.cold_row != NULL:
        # cold start: P is the same for every topic, so each word type's selection and
        # responsibilities are those of the batch-wide table (computed with the same P)
        for u in range(U):
            t = c.cold_row[vids[u]]
            r = s.r + <Py_ssize_t> u * Lk
            idx = s.idx + <Py_ssize_t> u * Lk
            memcpy(idx, c.cold_idx + <Py_ssize_t> t * Lk, Lk * sizeof(int))
            memcpy(r, c.cold_r + <Py_ssize_t> t * Lk, Lk * sizeof(double))
            cu = cnt[u]
            for j in range(Lk):
                Nnew[idx[j]] += cu * r[j]
            s.nk[u] = Lk
            s.zm[u] = c.cold_zm[t]
            s.zs[u] = c.cold_zs[t]
            _kept_exp(c.CT + <Py_ssize_t> vids[u] * K, idx, Lk,
                      s.ce + <Py_ssize_t> u * Lk, s.cm + u)
        U = 0
    use_order = (select and c.cmax != NULL and s.n_active > Lk and Lk <= _SCAN_MAX_L
                 and U > 0)
    if use_order:
        memcpy(wk.order, s.active, s.n_active * sizeof(int))
        sc_lda_sort_desc(s.P, wk.order, s.n_active)
    for u in range(U):
        C = c.CT + <Py_ssize_t> vids[u] * K
        r = s.r + <Py_ssize_t> u * Lk
        idx = s.idx + <Py_ssize_t> u * Lk
        ce = s.ce + <Py_ssize_t> u * Lk
        nk = 0
        if not select:
            # reweight the kept topics that are still active
            for j in range(s.nk[u]):
                k = idx[j]
                if s.act[k]:
                    idx[nk] = k
                    ce[nk] = ce[j]
                    nk += 1
        fresh = nk == 0
        if fresh:
            n = s.n_active
            if n <= Lk:
                memcpy(idx, s.active, n * sizeof(int))
                nk = n
            elif use_order:
                _scan_top_bounded(C, s.P, wk.order, n, Lk, c.cmax[vids[u]], w, idx)
                nk = Lk
            elif Lk <= _SCAN_MAX_L:
                _scan_top(C, s.P, s.active, n, Lk, w, idx)
                nk = Lk
            else:
                for j in range(n):
                    k = s.active[j]
                    w[k] = C[k] + s.P[k]
                    cand[j] = k
                sc_lda_select_top(w, cand, n, Lk)
                memcpy(idx, cand, Lk * sizeof(int))
                nk = Lk
            if not first:
                _kept_exp(C, idx, nk, ce, s.cm + u)
        if not first:
            ssum = 0.0
            for j in range(nk):
                r[j] = ce[j] * s.expP[idx[j]]
                ssum = ssum + r[j]
            if ssum > 1e-280:
                inv = 1.0 / ssum
                cu = cnt[u]
                for j in range(nk):
                    r[j] = r[j] * inv
                    Nnew[idx[j]] += cu * r[j]
                s.nk[u] = nk
                s.zm[u] = s.cm[u] + pmax
                s.zs[u] = ssum
                continue
            # the product underflowed: weight the same topics in log space below
        ssum = _exp_shifted(C, s.P, idx, nk, r, &m)
        inv = 1.0 / ssum
        cu = cnt[u]
        for j in range(nk):
            r[j] = r[j] * inv
            Nnew[idx[j]] += cu * r[j]
        s.nk[u] = nk
        s.zm[u] = m
        s.zs[u] = ssum
        if first:
            _kept_exp(C, idx, nk, ce, s.cm + u)
    for j in range(s.n_active):
        k = s.active[j]
        d = fabs(Nnew[k] - s.N[k])
        if d > delta:
            delta = d
        s.N[k] = Nnew[k]
    return delta


# ---------------------------------------------------------------------------------------------
# document objective


cdef double _doc_elbo(const Ctx* c, const DocState* s, const int32_t* vids,
                      const floating* cnt, int U, double* psi_sum) noexcept nogil:
    """Full document ELBO L_d (including the data term) of the state's (r, N + alpha)."""
    cdef int j, k, u
    cdef double stheta = c.sum_alpha, out = 0.0, nk, logz = 0.0
    for j in range(s.n_active):
        k = s.active[j]
        nk = s.N[k]
        if nk > 0.0:
            stheta += nk
            out += gammaln(nk + c.alpha[k]) - c.lg_alpha[k] - nk * s.P[k]
    out += c.lg_sum_alpha - gammaln(stheta)
    if c.dense:
        for u in range(U):
            logz += cnt[u] * (log(s.zs[u]) + c.rowmax[vids[u]] + s.pshift)
    else:
        for u in range(U):
            logz += cnt[u] * (s.zm[u] + log(s.zs[u]))
    if psi_sum != NULL:
        psi_sum[0] = _digamma(stheta)
    return out + logz


cdef double _data_term(const Ctx* c, const DocState* s, const int32_t* vids,
                       const floating* cnt, int U) noexcept nogil:
    """sum_u c_du sum_k r_duk C_{v_du k} of the state's responsibilities."""
    cdef int K = c.K, Lk = c.Lk, u, k, j
    cdef double out = 0.0, acc, e
    cdef const double* C
    cdef const double* E
    for u in range(U):
        C = c.CT + <Py_ssize_t> vids[u] * K
        acc = 0.0
        if c.dense:
            E = c.ET + <Py_ssize_t> vids[u] * K
            for k in range(K):
                e = s.expP[k] * E[k]
                if e > 0.0:
                    acc += e * C[k]
            out += cnt[u] * acc / s.zs[u]
        else:
            for j in range(s.nk[u]):
                acc += s.r[<Py_ssize_t> u * Lk + j] * C[s.idx[<Py_ssize_t> u * Lk + j]]
            out += cnt[u] * acc
    return out


# ---------------------------------------------------------------------------------------------
# one document


cdef int _converge(const Ctx* c, DocState* s, Work* wk, const int32_t* vids,
                   const floating* cnt, int U, int max_iter, bint cold, double eps,
                   int* underflow) noexcept nogil:
    """Iterate until max |Delta N| < tol or max_iter; returns the number of iterations."""
    cdef int it
    cdef bint select
    cdef double delta
    for it in range(max_iter):
        select = (it == 0 or it < c.n_select_first
                  or (c.select_every > 0 and it % c.select_every == 0))
        if c.dense:
            delta = _iter_dense(c, s, wk, vids, cnt, U, cold and it == 0, underflow)
        else:
            delta = _iter_sparse(c, s, wk, vids, cnt, U, cold and it == 0, select, eps)
        if it > 0 and delta < c.tol:
            return it + 1
    return max_iter


cdef void _process_doc(
    const Ctx* c,
    Py_ssize_t d,
    const int64_t* indptr,
    const int32_t* indices,
    const floating* data,
    double* dbuf,
    int* ibuf,
    char* cbuf,
    int Umax,
    double* Nout,        # (D, K)
    double* expPout,     # (D, K) dense
    double* zsout,       # (nnz,) dense
    double* rout,        # (nnz * Lk,) sparse
    int32_t* iout,       # (nnz * Lk,) sparse
    double* elbo_out,    # (D,)
    double* data_out,    # (D,)
    double* psisum_out,  # (D,)
    int32_t* niter_out,
    int32_t* tried_out,
    int32_t* acc_out,
    int32_t* uflow_out,
) noexcept nogil:
    cdef int K = c.K, Lk = c.Lk, U, k, j, t, t2, n_used, n_cand, it_total = 0, n_tried = 0
    cdef int n_acc = 0, underflow = 0
    cdef Py_ssize_t start = indptr[d], p
    cdef double Nd = 0.0, eps, elbo_cur, elbo_prop, psum = 0.0
    cdef DocState cur, prop
    cdef Work wk
    cdef const int32_t* vids = indices + start
    cdef const floating* cnt = data + start
    cdef Py_ssize_t nd = _state_doubles(K, Umax, Lk), ni = _state_ints(K, Umax, Lk)

    U = <int> (indptr[d + 1] - start)
    _bind(&cur, dbuf, ibuf, cbuf, K, Umax, Lk)
    _bind(&prop, dbuf + nd, ibuf + ni, cbuf + K, K, Umax, Lk)
    wk.Nnew = dbuf + 2 * nd
    wk.w = dbuf + 2 * nd + K
    wk.cand = ibuf + 2 * ni
    wk.rcand = ibuf + 2 * ni + K
    wk.order = ibuf + 2 * ni + 2 * K

    for j in range(U):
        Nd += cnt[j]
    if U == 0 or not (Nd > 0.0):
        # empty document: theta = alpha, L_d = 0
        memset(Nout + d * K, 0, K * sizeof(double))
        if c.dense:
            for k in range(K):
                expPout[d * K + k] = 1.0
        elbo_out[d] = 0.0
        data_out[d] = 0.0
        psisum_out[d] = _digamma(c.sum_alpha)
        niter_out[d] = 0
        tried_out[d] = 0
        acc_out[d] = 0
        uflow_out[d] = 0
        return
    eps = c.eps_rel * Nd

    # cold start: every topic allowed, N = 0, uniform document weights
    memset(cur.N, 0, K * sizeof(double))
    memset(cur.act, 1, K * sizeof(char))
    cur.n_active = K
    for k in range(K):
        cur.active[k] = k
    it_total = _converge(c, &cur, &wk, vids, cnt, U, c.max_iter, True, eps, &underflow)

    # restart proposals (App. D.4)
    if c.restarts > 0 and underflow == 0:
        n_used = 0
        for j in range(cur.n_active):
            k = cur.active[j]
            if cur.N[k] > c.restart_min:
                wk.cand[n_used] = k
                n_used += 1
        n_cand = c.restarts
        if n_cand > n_used - 1:
            n_cand = n_used - 1
        if n_cand > 0:
            sc_lda_sort_smallest(cur.N, wk.cand, n_used, n_cand)
            memcpy(wk.rcand, wk.cand, n_cand * sizeof(int))
            elbo_cur = _doc_elbo(c, &cur, vids, cnt, U, NULL)
        for t in range(n_cand):
            k = wk.rcand[t]
            if not (cur.N[k] > c.restart_min):
                continue
            n_tried += 1
            _copy_state(c, &prop, &cur)
            prop.N[k] = 0.0
            prop.act[k] = 0
            j = 0
            for t2 in range(prop.n_active):
                if prop.active[t2] != k:
                    prop.active[j] = prop.active[t2]
                    j += 1
            prop.n_active = j
            it_total += _converge(c, &prop, &wk, vids, cnt, U, c.restart_max_iter, False,
                                  eps, &underflow)
            elbo_prop = _doc_elbo(c, &prop, vids, cnt, U, NULL)
            if elbo_prop > elbo_cur:
                _swap_states(&cur, &prop)
                elbo_cur = elbo_prop
                n_acc += 1

    # outputs of the final state
    elbo_cur = _doc_elbo(c, &cur, vids, cnt, U, &psum)
    data_out[d] = _data_term(c, &cur, vids, cnt, U)
    elbo_out[d] = elbo_cur - data_out[d]
    psisum_out[d] = psum
    memcpy(Nout + d * K, cur.N, K * sizeof(double))
    if c.dense:
        memcpy(expPout + d * K, cur.expP, K * sizeof(double))
        memcpy(zsout + start, cur.zs, U * sizeof(double))
    else:
        for j in range(U):
            for t in range(Lk):
                p = (start + j) * Lk + t
                if t < cur.nk[j]:
                    rout[p] = cur.r[<Py_ssize_t> j * Lk + t]
                    iout[p] = cur.idx[<Py_ssize_t> j * Lk + t]
                else:
                    rout[p] = 0.0
                    iout[p] = -1
    niter_out[d] = it_total
    tried_out[d] = n_tried
    acc_out[d] = n_acc
    uflow_out[d] = underflow


# ---------------------------------------------------------------------------------------------
# batch-wide tables of the sparse regime


cdef void _cold_row(const Ctx* c, const double* C, const double* P0, const int* allk,
                    double* w, int* cand, int* idx, double* r, double* zm, double* zs,
                    double* cmax) noexcept nogil:
    """One word type: max_k C_k, and the first iteration's top-L selection and responsibilities
    under the uniform weights P0 (every topic allowed), computed exactly as ``_iter_sparse``
    does for a document at the cold start."""
    cdef int K = c.K, Lk = c.Lk, j, k
    cdef double m, x, ssum, inv
    m = C[0]
    for k in range(1, K):
        if C[k] > m:
            m = C[k]
    cmax[0] = m
    if idx == NULL:
        return
    if Lk <= _SCAN_MAX_L:
        _scan_top(C, P0, allk, K, Lk, w, idx)
    else:
        for j in range(K):
            w[j] = C[j] + P0[j]
            cand[j] = j
        sc_lda_select_top(w, cand, K, Lk)
        memcpy(idx, cand, Lk * sizeof(int))
    ssum = _exp_shifted(C, P0, idx, Lk, r, &m)
    inv = 1.0 / ssum
    for j in range(Lk):
        r[j] = r[j] * inv
    zm[0] = m
    zs[0] = ssum


cdef int _build_tables(const Ctx* c, const double* CT, const int32_t* types, Py_ssize_t nrow,
                       int* cold_idx, double* cold_r, double* cold_zm, double* cold_zs,
                       double* cmax, bint want_cold, int n_threads) except -1:
    """Rows t of the cold-start table and cmax[types[t]], in parallel over word types."""
    cdef int K = c.K, Lk = c.Lk, k
    cdef Py_ssize_t t, n_fail = 0
    cdef double* P0 = <double*> malloc(K * sizeof(double))
    cdef int* allk = <int*> malloc(K * sizeof(int))
    cdef double* w
    cdef int* cand
    if P0 == NULL or allk == NULL:
        free(P0)
        free(allk)
        raise MemoryError("could not allocate the local-step scratch space")
    for k in range(K):
        P0[k] = -c.log_K if c.P0 == NULL else c.P0[k]
        allk[k] = k
    with nogil, parallel(num_threads=n_threads):
        w = <double*> sc_thread_malloc(K * sizeof(double))
        cand = <int*> sc_thread_malloc(K * sizeof(int))
        for t in prange(nrow, schedule="static"):
            if w == NULL or cand == NULL:
                n_fail += 1
                continue
            _cold_row(c, CT + <Py_ssize_t> types[t] * K, P0, allk, w, cand,
                      cold_idx + t * Lk if want_cold else NULL,
                      cold_r + t * Lk if want_cold else NULL,
                      cold_zm + t, cold_zs + t, cmax + types[t])
        free(w)
        free(cand)
    free(P0)
    free(allk)
    if n_fail:
        raise MemoryError("could not allocate the local-step scratch space")
    return 0


# ---------------------------------------------------------------------------------------------
# entry points


def lda_local_docs(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const int32_t[::1] indices,    # IN (nnz,) word types, unique within a row
    const floating[::1] data,      # IN (nnz,) positive counts
    const double[:, ::1] CT,       # IN (V, K) E[log phi]^T
    const double[:, ::1] ET,       # IN (V, K) exp(CT - rowmax[:, None]) (dense) or (0, K)
    const double[::1] rowmax,      # IN (V,) CT.max(1) (dense) or (0,)
    const double[::1] alpha,       # IN (K,) > 0
    int Lk,                        # kept topics per word type; 0 = dense regime
    int max_iter,
    double tol,
    int n_select_first,
    int select_every,
    int restarts,
    int restart_max_iter,
    double restart_min,
    double eps_rel,
    int n_threads,
    bint cold_table=True,
    bint bounded_select=True,
    double alpha_rem=0.0,
    const double[::1] P0=None,     # IN (K,) cold-start weights E[log pi] (None: uniform)
):
    """Phase 1 of the local step: every document of the batch, in parallel.

    Each document writes only its own slots. Returns a dict with

    ``N`` (D, K) final N_dk; ``expP`` (D, K) exp(P_d - max P_d) and ``zs`` (nnz,) the
    per-word-type normalizers (dense regime; empty otherwise); ``r``/``idx`` (nnz, Lk) kept
    responsibilities and topics, idx = -1 past the kept ones (sparse regime); ``elbo`` (D,)
    local ELBO terms c_Dir(alpha) - c_Dir(theta_d) - sum_u c_du sum_k r_duk log r_duk;
    ``data`` (D,) sum_u c_du sum_k r_duk C_{v_du k}; ``psi_sum`` (D,) psi(sum_k theta_dk);
    ``n_iter``, ``tried``, ``accepted`` (D,) int32; ``underflow`` (D,) int32, 1 where the
    dense regime underflowed (that document's outputs are invalid and must be recomputed in
    the sparse regime with Lk = K).

    ``alpha_rem`` >= 0 is a Dirichlet entry K + 1 that no token can take (the remainder mass
    alpha E[beta_{K+1}] of a truncated hierarchical Dirichlet process): theta_{d,K+1} =
    alpha_rem in every document, so it only enters sum_k theta_dk (and c_Dir). ``P0`` replaces
    the uniform cold-start weights P_dk = -log K by given values (e.g. log E[beta_k], the
    initialization Hughes, Kim & Sudderth (2015) recommend for the HDP); it must be the same
    for every document, which keeps the batch-wide cold-start table exact.

    Equivalent to running ``DenseStepForDoc`` (Lk = 0) or ``LSparseStepForDoc`` of Hughes & Sudderth 2016
    Alg. 2 on each row, followed by restart proposals (App. D.4).

    Two exact shortcuts of the sparse regime (0 < Lk < K), on by default; switching them off
    gives bit-identical results (they exist for tests and measurements):

    ``cold_table``: at the cold start P_dk = -log K for every k, so the first iteration's
    top-L selection for word type v is the top-L of C_{v,:} and its responsibilities are the
    same in every document. They are computed once per call for the word types of the batch
    (O(V_batch K)) and the first iteration of a document costs O(L) per word type instead of
    O(K).

    ``bounded_select``: a selection sorts the active topics by decreasing P_dk and scans them
    in that order with the bound C_vk + P_dk <= max_k C_vk + P_dk, stopping as soon as the
    bound falls below the current L-th best weight (topics with little document mass are
    never looked at).
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int K = <int> CT.shape[1], Umax = 0, dense = Lk == 0
    cdef Py_ssize_t nnz = indices.shape[0], j
    cdef Ctx c
    cdef double* dbuf
    cdef int* ibuf
    cdef char* cbuf
    cdef Py_ssize_t nd, ni
    cdef Py_ssize_t n_fail = 0
    cdef Py_ssize_t V = CT.shape[0], nrow = 0, t
    cdef int32_t[::1] types_v, rows_v
    cdef int[:, ::1] cidx_v
    cdef double[:, ::1] cr_v
    cdef double[::1] czm_v, czs_v, cmax_v
    cdef bint want_cold = (not dense) and cold_table and 0 < Lk < K
    cdef bint want_cmax = (not dense) and bounded_select and 0 < Lk < K and Lk <= _SCAN_MAX_L

    for d in range(D):
        j = indptr[d + 1] - indptr[d]
        if j > Umax:
            Umax = <int> j
    if dense:
        if ET.shape[0] != CT.shape[0] or rowmax.shape[0] != CT.shape[0]:
            raise ValueError("dense regime needs ET and rowmax")

    Dp, Kp, nnzp, Lkp = int(D), int(K), int(nnz), int(Lk)
    shape_dense = (Dp, Kp) if dense else (0, Kp)
    shape_zs = nnzp if dense else 0
    shape_r = (0, 1) if dense else (nnzp, Lkp)
    N = np.zeros((D, K))
    expP = np.zeros(shape_dense)
    zs = np.zeros(shape_zs)
    r = np.zeros(shape_r)
    idx = np.full(shape_r, -1, dtype=np.int32)
    elbo = np.zeros(D)
    data_t = np.zeros(D)
    psisum = np.zeros(D)
    n_iter = np.zeros(D, dtype=np.int32)
    tried = np.zeros(D, dtype=np.int32)
    acc = np.zeros(D, dtype=np.int32)
    uflow = np.zeros(D, dtype=np.int32)
    lg_alpha = np.array([gammaln(alpha[k]) for k in range(K)], dtype=np.float64)
    cdef double[:, ::1] N_v = N
    cdef double[:, ::1] expP_v = expP
    cdef double[::1] zs_v = zs
    cdef double[:, ::1] r_v = r
    cdef int32_t[:, ::1] idx_v = idx
    cdef double[::1] elbo_v = elbo, data_v = data_t, psisum_v = psisum
    cdef int32_t[::1] nit_v = n_iter, tried_v = tried, acc_v = acc, uflow_v = uflow
    cdef const double[::1] lg_alpha_v = lg_alpha
    if D == 0:
        return dict(N=N, expP=expP, zs=zs, r=r, idx=idx, elbo=elbo, data=data_t,
                    psi_sum=psisum, n_iter=n_iter, tried=tried, accepted=acc, underflow=uflow)

    c.K = K
    c.Lk = 0 if dense else Lk
    c.dense = dense
    c.max_iter = max_iter
    c.n_select_first = n_select_first
    c.select_every = select_every
    c.restarts = restarts
    c.restart_max_iter = restart_max_iter
    c.tol = tol
    c.eps_rel = eps_rel
    c.restart_min = restart_min
    c.log_K = log(<double> K)
    c.sum_alpha = alpha_rem
    for j in range(K):
        c.sum_alpha += alpha[j]
    c.lg_sum_alpha = gammaln(c.sum_alpha)
    c.P0 = NULL
    c.P0max = 0.0
    if P0 is not None:
        if P0.shape[0] != K:
            raise ValueError(f"P0 has {P0.shape[0]} entries, expected {K}")
        c.P0 = &P0[0]
        c.P0max = P0[0]
        for j in range(K):
            if P0[j] > c.P0max:
                c.P0max = P0[j]
    c.CT = &CT[0, 0]
    c.ET = &ET[0, 0] if dense else NULL
    c.rowmax = &rowmax[0] if dense else NULL
    c.alpha = &alpha[0]
    c.lg_alpha = &lg_alpha_v[0]

    # batch-wide tables of the sparse regime: one row per word type occurring in the batch
    c.cold_row = NULL
    c.cold_idx = NULL
    c.cold_r = NULL
    c.cold_zm = NULL
    c.cold_zs = NULL
    c.cmax = NULL
    if want_cold or want_cmax:
        types = np.unique(np.asarray(indices)).astype(np.int32)
        nrow = types.shape[0]
        rows = np.full(V, -1, dtype=np.int32)
        rows[types] = np.arange(nrow, dtype=np.int32)
        cold_idx = np.zeros((nrow, Lk if want_cold else 1), dtype=np.int32)
        cold_r = np.zeros((nrow, Lk if want_cold else 1))
        cold_zm = np.zeros(nrow)
        cold_zs = np.zeros(nrow)
        cmax_a = np.zeros(V)
        types_v = types
        rows_v = rows
        cidx_v = cold_idx
        cr_v = cold_r
        czm_v = cold_zm
        czs_v = cold_zs
        cmax_v = cmax_a
        if nrow > 0:
            _build_tables(&c, &CT[0, 0], &types_v[0], nrow, &cidx_v[0, 0], &cr_v[0, 0],
                          &czm_v[0], &czs_v[0], &cmax_v[0], want_cold, n_threads)
            if want_cold:
                c.cold_row = &rows_v[0]
                c.cold_idx = &cidx_v[0, 0]
                c.cold_r = &cr_v[0, 0]
                c.cold_zm = &czm_v[0]
                c.cold_zs = &czs_v[0]
            if want_cmax:
                c.cmax = &cmax_v[0]

    nd = _state_doubles(K, Umax, c.Lk)
    ni = _state_ints(K, Umax, c.Lk)
    cdef double* expP_p = &expP_v[0, 0] if dense else NULL
    cdef double* zs_p = &zs_v[0] if (dense and nnz > 0) else NULL
    cdef double* r_p = &r_v[0, 0] if (not dense and nnz > 0) else NULL
    cdef int32_t* idx_p = &idx_v[0, 0] if (not dense and nnz > 0) else NULL
    cdef const int32_t* ind_p = &indices[0] if nnz > 0 else NULL
    cdef const floating* dat_p = &data[0] if nnz > 0 else NULL

    with nogil, parallel(num_threads=n_threads):
        dbuf = <double*> sc_thread_malloc((2 * nd + 2 * K) * sizeof(double))
        ibuf = <int*> sc_thread_malloc((2 * ni + 3 * K) * sizeof(int))
        cbuf = <char*> sc_thread_malloc(2 * K * sizeof(char))
        for d in prange(D, schedule="dynamic"):
            if dbuf == NULL or ibuf == NULL or cbuf == NULL:
                n_fail += 1
                continue
            _process_doc(&c, d, &indptr[0], ind_p, dat_p, dbuf, ibuf, cbuf, Umax,
                         &N_v[0, 0], expP_p, zs_p, r_p, idx_p, &elbo_v[0], &data_v[0],
                         &psisum_v[0], &nit_v[0], &tried_v[0], &acc_v[0], &uflow_v[0])
        free(dbuf)
        free(ibuf)
        free(cbuf)
    if n_fail:
        raise MemoryError("could not allocate the local-step scratch space")
    return dict(N=N, expP=expP, zs=zs, r=r, idx=idx, elbo=elbo, data=data_t,
                psi_sum=psisum, n_iter=n_iter, tried=tried, accepted=acc, underflow=uflow)


def lda_summary(
    const int64_t[::1] col_ptr,    # IN (V + 1,) entries of word type v: col_ptr[v]:col_ptr[v+1]
    const int64_t[::1] col_pos,    # IN (nnz,) CSR position of each entry, doc order per v
    const int64_t[::1] col_doc,    # IN (nnz,) its document
    const floating[::1] data,      # IN (nnz,) counts (CSR order)
    const double[:, ::1] N,        # IN (D, K)
    const double[:, ::1] expP,     # IN (D, K) (dense) or (0, K)
    const double[::1] zs,          # IN (nnz,) (dense) or (0,)
    const double[:, ::1] r,        # IN (nnz, Lk) (sparse) or (0, 1)
    const int32_t[:, ::1] idx,     # IN (nnz, Lk) (sparse) or (0, 1)
    const double[:, ::1] ET,       # IN (V, K) (dense) or (0, K)
    const double[::1] alpha,       # IN (K,)
    const double[::1] psi_sum,     # IN (D,)
    const int32_t[::1] skip,       # IN (D,) documents to leave out (1)
    double[:, ::1] ST,             # INOUT (V, K) statistics, transposed: += sum_d,u c r
    double[::1] sum_elogpi,        # INOUT (K,) += sum_d E[log pi_dk]
    int dense,
    int n_threads,
    const int64_t[::1] col_word=None,  # IN (V_c,) word type of column c (None: c itself)
    const int64_t[::1] st_row=None,    # IN (V_c,) row of ST column c adds to (None: c)
):
    """Phase 2 (summary step): reduce the documents' responsibilities to statistics.

    ``ST[v, k] += sum_{d,u: v_du = v} c_du r_duk`` and ``sum_elogpi[k] += sum_d
    psi(N_dk + alpha_k) - psi_sum[d]`` over the documents not skipped.  Each word type's row
    (and each topic's sum) is owned by one thread and accumulated in document order, so the
    result does not depend on the number of threads.

    Equivalent to ``ST += (R * c[:, None]).T-scatter`` of the dense responsibilities, i.e.
    ``ST[v] += sum_p c_p r_p`` over the entries p of word type v.

    With ``col_word`` and ``st_row`` the columns are compressed: ``col_ptr`` then lists only
    the word types that occur, column c is word type ``col_word[c]`` (its row of ``ET``) and
    adds to row ``st_row[c]`` of ``ST``, so ``ST`` need only have a row per word type of the
    batch. The additions are the same, in the same order, as without compression.
    """
    cdef Py_ssize_t V = col_ptr.shape[0] - 1, D = N.shape[0], v, q, p, dd, w, row
    cdef bint mapped = col_word is not None
    cdef int K = <int> N.shape[1], Lk = <int> r.shape[1], k, t
    cdef double coef, acc
    cdef double* tmp
    cdef Py_ssize_t n_fail = 0
    cdef double* psi_alpha
    if mapped and (st_row is None or col_word.shape[0] != V or st_row.shape[0] != V):
        raise ValueError("col_word and st_row must both be given, one entry per column")
    if mapped and V > 0:
        if np.min(st_row) < 0 or np.max(st_row) >= ST.shape[0]:
            raise ValueError("st_row out of the rows of ST")
        if dense and (np.min(col_word) < 0 or np.max(col_word) >= ET.shape[0]):
            raise ValueError("col_word out of the rows of ET")
    psi_alpha = <double*> malloc(K * sizeof(double))
    if psi_alpha == NULL:
        raise MemoryError("could not allocate the summary-step scratch space")
    for k in range(K):
        psi_alpha[k] = _digamma(alpha[k])
    with nogil, parallel(num_threads=n_threads):
        tmp = <double*> sc_thread_malloc(K * sizeof(double))
        for v in prange(V, schedule="dynamic", chunksize=64):
            if col_ptr[v + 1] == col_ptr[v]:
                continue
            if tmp == NULL:
                # never drop a word type's statistics: fail the whole call instead
                n_fail += 1
                continue
            if mapped:
                w = col_word[v]
                row = st_row[v]
            else:
                w = v
                row = v
            if dense:
                memset(tmp, 0, K * sizeof(double))
                for q in range(col_ptr[v], col_ptr[v + 1]):
                    p = col_pos[q]
                    dd = col_doc[q]
                    if skip[dd]:
                        continue
                    coef = data[p] / zs[p]
                    for k in range(K):
                        tmp[k] = tmp[k] + coef * expP[dd, k]
                for k in range(K):
                    ST[row, k] = ST[row, k] + ET[w, k] * tmp[k]
            else:
                for q in range(col_ptr[v], col_ptr[v + 1]):
                    p = col_pos[q]
                    if skip[col_doc[q]]:
                        continue
                    for t in range(Lk):
                        k = idx[p, t]
                        if k < 0:
                            break
                        ST[row, k] = ST[row, k] + data[p] * r[p, t]
        free(tmp)
    if n_fail:
        free(psi_alpha)
        raise MemoryError("could not allocate the summary-step scratch space")
    with nogil, parallel(num_threads=n_threads):
        for k in prange(K, schedule="static"):
            acc = 0.0
            for dd in range(D):
                if skip[dd]:
                    continue
                if N[dd, k] > 0.0:
                    acc = acc + _digamma(N[dd, k] + alpha[k]) - psi_sum[dd]
                else:
                    acc = acc + psi_alpha[k] - psi_sum[dd]
            sum_elogpi[k] += acc
    free(psi_alpha)
