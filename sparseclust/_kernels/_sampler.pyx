# SPDX-License-Identifier: BSD-3-Clause
"""Token topic sampler shared by stochastic EM and collapsed Gibbs local steps for LDA.

Both draw one topic per token from

    p(z_dn = k)  propto  (alpha_k + n_dk) * w_{v k},        v = word of token n of document d,

with a word-weight table ``w`` (stored word-major, shape (V, K)) that is fixed during a sweep:

- stochastic EM (Zaheer & Kottur, Sec. 3.3, Eq. 10): w_vk = (W_vk + beta) / (T_k + V beta) from
  the word-topic counts of the previous sweep (the read buffer), and n_dk the document's counts
  of the previous sweep as well (``mode=FROZEN``): every token's distribution is fixed for the
  sweep, the documents are independent and the draws are exact;
- collapsed Gibbs within a document (Mimno, Hoffman & Blei 2012): w = exp(E[log phi]) fixed for a
  minibatch and n_dk = n_dk^{-dn}, the document's counts without the token, updated token by
  token (``mode=LIVE``), sequentially within the document.

Decomposition (sparse path). p(k) propto alpha_k w_vk + n_dk w_vk.  The first term does not depend
on the document: for every word a Walker/Vose alias table over alpha_k w_vk (total mass Q_v) is
built once per sweep, so one draw costs O(1).  The second term is non-zero only on the topics
present in the document and is computed exactly over them (mass S_dv = sum_{k: n_dk > 0} n_dk
w_vk).  A uniform u in [0, S_dv + Q_v) selects the document part (a scan over the document's
topics) when u < S_dv and the alias table otherwise; no Metropolis-Hastings correction is needed
because both parts are exact.  Cost per token: O(number of topics in the document), not O(K).
Dense path (small K): the K products (alpha_k + n_dk) w_vk, their cumulative sum, a binary search.

Counts path (``sample_sweep_counts``, stochastic EM only): with w_vk = (W_vk + beta) / (T_k + V
beta) given by the frozen counts, (n_dk + alpha_k) w_vk splits exactly into n_dk W_vk / (T_k +
V beta) (topics in both the document and the word's non-zero list, scanned over the shorter
list), n_dk beta / (T_k + V beta) (the document's topics, once per document), alpha_k W_vk /
(T_k + V beta) (an alias table over word v's non-zero counts) and alpha_k beta / (T_k + V beta)
(one alias table over K shared by all words); ``build_word_tables`` builds them per sweep from
the read buffer, so no (V, K) weight or alias table exists.

In FROZEN mode all tokens of one (document, word) entry share their distribution: its masses are
computed once per entry and the entry's tokens drawn from them.

Counts path in LIVE mode (stochastic EM with the document's counts live, the default of
``StochasticEMLDA``): W and T stay frozen, n_dk = n_dk^{-dn} is updated token by token, and with
``exclude_own`` the token's previous topic z' is taken out of W and T too,
p(k) propto (n_dk^{-dn} + alpha_k)(W_vk - [k = z'] + beta) / (T_k - [k = z'] + V beta).  The
four-part decomposition is evaluated per token with the current n_d (the word and smoothing
tables do not depend on n_d); the correction for z' is a rejection step: a draw of z' from the
frozen weights is kept with probability (W_vz' - 1 + beta)(T_z' + V beta) / ((W_vz' + beta)(T_z'
- 1 + V beta)) < 1, else the token is redrawn.  FROZEN with ``exclude_own`` keeps n_d of the
previous sweep and takes the token out of n_d, W and T the same way.

Random stream: each document has its own SplitMix64 stream keyed by (seed, sweep, key[d])
(``sc_sampler.h``), where key[d] is the document index for training and a hash of the
document's content for fold-in; so the draws -- and with them the assignments and counts -- are
bit-identical for any number of threads and any scheduling.

Split word tables (LIVE, general weights w_vk = s_v e_k + x_vk with x_vk > 0 on few topics, the
sampled local step's lazily scaled statistics): the word part is the shared alias table over
alpha_k e_k (scaled by s_v) plus word v's table over its listed topics, and the document part
reads w_vk as s_v e_k plus the excess x_vk found by the rank of k in the word's bit set
(``split_word_tables``): no (V, K) table exists and a token costs O(topics of the document).

Output counts: the word-topic counts of the new assignments are incremented into ``Wout``
(V, K) int32 with integer (atomic) additions: their sum does not depend on the order of the
increments.  Or the assignments of every saved sweep are copied to ``zsave`` and counted word
by word (``count_word_topics``), with no (V, K) array.  Document outputs (``acc`` rows,
``ll_doc``) are written by the thread that owns the document.
"""

from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset
from libc.math cimport INFINITY, exp, log
from libc.math cimport floor as libc_floor
from scipy.special.cython_special cimport gammaln
from scipy.special.cython_special cimport psi as sc_psi

from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc

from collections import namedtuple

import numpy as np
import scipy.special as _sps

cdef extern from "sc_sampler.h" nogil:
    uint64_t sc_splitmix64(uint64_t* state)
    uint64_t sc_stream_key(uint64_t seed, uint64_t sweep, uint64_t key)
    double sc_uniform(uint64_t* state)
    void sc_atomic_add_i32(int32_t* p, int32_t v)
    void sc_prefetch(const void* p, long n)
    int sc_popcount64(uint64_t x)
    int sc_ctz64(uint64_t x)
    double sc_digamma(double x)

ctypedef fused zint_t:
    uint8_t
    uint16_t
    uint32_t

ctypedef fused tab_t:
    uint16_t
    int32_t

#: sampling modes
FROZEN = 0
LIVE = 1


def _fail_thread_allocations(int thread):
    """Make the per-thread buffer allocations of OpenMP thread ``thread`` fail (-1: none,
    -2: every thread).

    For tests of the out-of-memory path only.
    """
    sc_set_alloc_fail_thread(thread)


#: entries of the log-gamma lookup tables of the log joint: lgamma(c + a) - lgamma(a) for the
#: integer counts c < _LG_TAB (computed with the same gammaln, so the values are identical)
cdef enum:
    _LG_TAB = 4096
    # the live counts path prefetches the next entry's whole row of W up to this many topics
    _PREFETCH_K = 256
    # count_words prefetches the counts of the entry this many entries ahead
    _COUNT_AHEAD = 8


cdef void _lg_table(double a, double* tab) noexcept nogil:
    cdef double lga = gammaln(a)
    cdef int c
    tab[0] = 0.0
    for c in range(1, _LG_TAB):
        tab[c] = gammaln(c + a) - lga


cdef struct _Args:
    const int64_t* indptr
    const int32_t* indices
    const int32_t* cnt
    const int64_t* tokptr
    const float* w
    const float* prob
    const int32_t* alias
    const double* Q
    const double* sv               # split word tables (LIVE, general weights): per-word scale
                                   # s_v of the shared smoothing table, or NULL (then w is read)
    const double* e0               # split: (K,) the prior's share e_k of every topic
    const float* wx                # split: the excess x_vk of word v's listed topics (at wptr[v])
    const uint64_t* bits           # split: (V_all, nw) bit sets of the listed topics, global rows
    const int64_t* gcol            # split: the global row of bits of each word
    const int32_t* wpre            # split: (V, nw) listed topics before each 64-topic word
    int nw                         # split: 64-bit words per row of bits
    int32_t* zsave                 # (n_saved, n_tokens) the topics of every saved sweep, or NULL
    int64_t n_tok
    const double* alpha
    const double* lg_alpha
    const double* lga_tab          # lgamma(c + alpha) - lgamma(alpha), c < _LG_TAB (equal alphas)
    double sum_alpha
    int K
    int mode
    int dense
    int n_inner
    int n_burn
    int seq_init
    uint64_t seed
    uint64_t sweep
    double* acc
    int32_t* Wout
    double* ll_doc
    int atomic
    # counts path (stochastic EM from the read buffer, see sample_sweep_counts)
    int counts
    const int32_t* W
    const double* inv_tot
    const double* tot              # 1 / inv_tot: T_k + V beta
    double beta
    const int64_t* wptr
    const int32_t* wlen
    const void* wtop               # uint16 (K <= 65535) or int32 topics, see ``wide``
    const float* wprob
    const void* walias
    int wide                       # wtop / walias are int32 (else uint16)
    const double* Qw
    const float* sprob
    const int32_t* salias
    double Qs
    int exclude_own                # counts path, LIVE: the token's own previous topic is taken
                                   # out of W_vk and T_k (a rejection step, see _doc_live_counts)
    int live_entry                 # counts path, LIVE with exclude_own: W_vk and T_k also follow
                                   # the entry's (d, v) other tokens, see _draw_live_entry


cdef inline int _search(const double* cum, int n, double u) noexcept nogil:
    """First i with cum[i] > u (cum non-decreasing), clamped to n - 1."""
    cdef int lo = 0, hi = n - 1, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] > u:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline int _scan(const double* cum, int n, double u) noexcept nogil:
    """Linear version of _search, for the short document-topic lists."""
    cdef int i
    for i in range(n - 1):
        if cum[i] > u:
            return i
    return n - 1


cdef inline int _alias_draw(const _Args* a, int v, double x) noexcept nogil:
    """Draw from word v's alias table with x uniform in [0, 1)."""
    cdef int K = a.K, i
    cdef double y = x * K, frac
    if y < 0.0:
        y = 0.0
    i = <int> y
    if i >= K:
        i = K - 1
    frac = y - i
    if frac < a.prob[<int64_t> v * K + i]:
        return i
    return a.alias[<int64_t> v * K + i]


cdef inline int _wt(const _Args* a, int64_t i) noexcept nogil:
    """Topic i of the words' sparse tables."""
    if a.wide:
        return (<const int32_t*> a.wtop)[i]
    return (<const uint16_t*> a.wtop)[i]


cdef inline int _word_draw(const _Args* a, int v, double x) noexcept nogil:
    """Draw from word v's sparse alias table (its topics with W_vk > 0), x uniform in [0, 1)."""
    cdef int64_t off = a.wptr[v]
    cdef int n = a.wlen[v], i
    cdef double y = x * n, frac
    if y < 0.0:
        y = 0.0
    i = <int> y
    if i >= n:
        i = n - 1
    frac = y - i
    if frac < a.wprob[off + i]:
        return _wt(a, off + i)
    if a.wide:
        return (<const int32_t*> a.walias)[off + i]
    return (<const uint16_t*> a.walias)[off + i]


cdef inline int _smooth_draw(const _Args* a, double x) noexcept nogil:
    """Draw from the shared alias table over alpha_k beta / (T_k + V beta)."""
    cdef int K = a.K, i
    cdef double y = x * K, frac
    if y < 0.0:
        y = 0.0
    i = <int> y
    if i >= K:
        i = K - 1
    frac = y - i
    if frac < a.sprob[i]:
        return i
    return a.salias[i]


cdef inline void _nd_add(int32_t* nd, int32_t* act, int32_t* pos, int* na, int k) noexcept nogil:
    if nd[k] == 0:
        pos[k] = na[0]
        act[na[0]] = k
        na[0] += 1
    nd[k] += 1


cdef inline void _nd_remove(int32_t* nd, int32_t* act, int32_t* pos, int* na, int k) noexcept nogil:
    cdef int p, last
    nd[k] -= 1
    if nd[k] == 0:
        p = pos[k]
        last = act[na[0] - 1]
        act[p] = last
        pos[last] = p
        na[0] -= 1


cdef inline void _dl_add(int32_t* dl, int32_t* mark, int32_t* dset, int* nds, int k,
                         int delta) noexcept nogil:
    """dl[k] += delta, k recorded in dset once (mark[k]) so the changes can be reset."""
    if not mark[k]:
        mark[k] = 1
        dset[nds[0]] = k
        nds[0] += 1
    dl[k] += delta


cdef inline double _word_mass(const _Args* a, int v) noexcept nogil:
    """sum_k alpha_k w_vk, the word part of a general-weights draw (sparse path)."""
    if a.sv != NULL:
        return a.sv[v] * a.Qs + a.Qw[v]
    return a.Q[v]


cdef inline int _word_part_draw(const _Args* a, int v, double u) noexcept nogil:
    """A draw from the word part alpha_k w_vk, u uniform in [0, _word_mass(a, v)). Split
    tables: w_vk = s_v e_k + x_vk with x_vk > 0 only on the word's listed topics, so the part is
    s_v alpha_k e_k (the shared table, mass s_v Qs) plus alpha_k x_vk (the word's table, mass
    Qw[v]); otherwise the word's alias table over all K topics."""
    cdef double qs
    if a.sv != NULL:
        qs = a.sv[v] * a.Qs
        if u < qs or a.Qw[v] <= 0.0:
            return _smooth_draw(a, u / qs)
        return _word_draw(a, v, (u - qs) / a.Qw[v])
    return _alias_draw(a, v, u / a.Q[v])


cdef inline double _split_weight(const _Args* a, int k, double sv, const uint64_t* brow,
                                 const int32_t* pre, const float* wxv) noexcept nogil:
    """w_vk = s_v e_k + x_vk of the split tables, without a branch: the rank of topic k among
    the word's listed topics (its bit set ``brow``, the counts ``pre`` before each 64-bit
    word) indexes the excesses ``wxv``, and the bit of k (0 or 1) multiplies the one read, so
    an unlisted topic adds 0 (its rank points at the next listed entry, or at the padding
    after the last word's)."""
    cdef uint64_t b = brow[k >> 6]
    cdef int sh = k & 63
    cdef int r = pre[k >> 6] + sc_popcount64(b & (((<uint64_t> 1) << sh) - 1))
    return sv * a.e0[k] + wxv[r] * <double> ((b >> sh) & 1)


cdef inline int _draw_one(const _Args* a, const int32_t* nd, const int32_t* act, int na,
                          double* cum, int v, uint64_t* state) noexcept nogil:
    """One draw from (alpha_k + nd_k) w_vk with the current nd (LIVE mode)."""
    cdef int K = a.K, k, i
    cdef const float* wv = a.w + <int64_t> v * K
    cdef double tot = 0.0, sd = 0.0, u, sv
    cdef const uint64_t* brow
    cdef const int32_t* pre
    cdef const float* wxv
    if a.dense:
        for k in range(K):
            tot += (nd[k] + a.alpha[k]) * wv[k]
            cum[k] = tot
        return _search(cum, K, sc_uniform(state) * tot)
    if a.sv != NULL:
        # split tables: no (V, K) weight table, O(1) per topic of the document
        sv = a.sv[v]
        brow = a.bits + a.gcol[v] * a.nw
        pre = a.wpre + <int64_t> v * a.nw
        wxv = a.wx + a.wptr[v]
        for i in range(na):
            k = act[i]
            sd += nd[k] * _split_weight(a, k, sv, brow, pre, wxv)
            cum[i] = sd
    else:
        for i in range(na):
            k = act[i]
            sd += nd[k] * wv[k]
            cum[i] = sd
    tot = sd + _word_mass(a, v)
    u = sc_uniform(state) * tot
    if u < sd:
        return act[_scan(cum, na, u)]
    return _word_part_draw(a, v, u - sd)


cdef inline int _doc_beta_draw(const _Args* a, const int32_t* nd, const int32_t* act, int na,
                               double x) noexcept nogil:
    """Draw from the document part sum_k n_dk / (T_k + V beta) (x uniform in [0, mass))."""
    cdef int i, k
    cdef double s = 0.0
    for i in range(na - 1):
        k = act[i]
        s += nd[k] * a.inv_tot[k]
        if s > x:
            return k
    return act[na - 1]


cdef inline int _doc_word_part(const _Args* a, const int32_t* nd, const int32_t* act, int na,
                               const int32_t* Wv, int v, double* cum, int32_t* itop,
                               double* sd) noexcept nogil:
    """The counts path's document-word part, sum over k of n_dk W_vk / (T_k + V beta) for the
    topics both the document (n_dk > 0) and word v (W_vk > 0) hold, scanned over the shorter
    of the two lists: its cumulative sums go to ``cum`` and its topics to ``itop`` (the
    number of them is returned), its total is added to ``*sd``."""
    cdef int i, k, ni = 0, wn = a.wlen[v]
    cdef int64_t wo = a.wptr[v]
    cdef double acc = sd[0]
    # Branch-free: every topic of the scanned list is added (a zero term leaves the sum
    # unchanged, exactly) and written at slot ni, which advances only when the term is
    # non-zero, so the list is the same as with a test but without mispredicted branches.
    if wn < na:
        if a.wide:
            for i in range(wn):
                k = (<const int32_t*> a.wtop)[wo + i]
                acc += nd[k] * (<double> Wv[k] * a.inv_tot[k])
                cum[ni] = acc
                itop[ni] = k
                ni += nd[k] > 0
        else:
            for i in range(wn):
                k = (<const uint16_t*> a.wtop)[wo + i]
                acc += nd[k] * (<double> Wv[k] * a.inv_tot[k])
                cum[ni] = acc
                itop[ni] = k
                ni += nd[k] > 0
    else:
        for i in range(na):
            k = act[i]
            acc += nd[k] * (<double> Wv[k] * a.inv_tot[k])
            cum[ni] = acc
            itop[ni] = k
            ni += Wv[k] > 0
    sd[0] = acc
    return ni


cdef inline int _live_part_draw(const _Args* a, const int32_t* nd, const int32_t* act, int na,
                                const double* cum, const int32_t* itop, int ni, double sd,
                                double sb, double qw, int v, double u) noexcept nogil:
    """The topic at u in [0, sd + sb + qw + Qs) of the four parts of the live counts path:
    the document-word part (cumulative sums ``cum`` over topics ``itop``, mass sd), the
    document's beta part (mass sb), word v's alias table (mass qw), the smoothing table."""
    if u < sd:
        return itop[_scan(cum, ni, u)]
    u -= sd
    if u < sb:
        return _doc_beta_draw(a, nd, act, na, u / a.beta)
    u -= sb
    if u < qw:
        return _word_draw(a, v, u / qw)
    return _smooth_draw(a, (u - qw) / a.Qs)


cdef inline double _own_ratio(const _Args* a, const int32_t* Wv, int o) noexcept nogil:
    """[(W_vo - 1 + beta) / (T_o - 1 + V beta)] / [(W_vo + beta) / (T_o + V beta)]: the weight
    of topic o with one of its tokens taken out, relative to the read buffer's (< 1)."""
    return ((Wv[o] - 1 + a.beta) / (a.tot[o] - 1.0)) \
        / ((Wv[o] + a.beta) * a.inv_tot[o])


cdef inline int _draw_live_counts(const _Args* a, const int32_t* nd, const int32_t* act,
                                  int na, double sdb, double* cum, int32_t* itop, int v,
                                  int old, uint64_t* state) noexcept nogil:
    """One draw of a token of word v in LIVE counts mode (stochastic EM with the document's
    counts live): p(k) propto (n_dk + alpha_k) (W_vk - e_k + beta) / (T_k - e_k + V beta), nd
    the document's counts without the token, W and T the read buffer, e_k = [k == old] when
    ``exclude_own`` (the token's own previous topic, which the read buffer counts) else 0.

    Sparse path: the four parts of the frozen counts path with the current nd (``sdb`` =
    sum_k n_dk / (T_k + V beta)); with ``exclude_own`` the draw is from the frozen-W weights
    and a draw of k = old is accepted with probability
    [(W_vo - 1 + beta) / (T_o - 1 + V beta)] / [(W_vo + beta) / (T_o + V beta)] < 1, else
    redrawn (rejection sampling: exact)."""
    cdef int K = a.K, k, ni = 0
    cdef const int32_t* Wv = a.W + <int64_t> v * K
    cdef double tot = 0.0, sd = 0.0, u, qw, sb, ratio = 1.0, wk
    if a.dense:
        if a.exclude_own and Wv[old] > 0:
            ratio = _own_ratio(a, Wv, old)
        for k in range(K):
            wk = (Wv[k] + a.beta) * a.inv_tot[k]
            if k == old and ratio < 1.0:
                wk *= ratio
            tot += (nd[k] + a.alpha[k]) * wk
            cum[k] = tot
        return _search(cum, K, sc_uniform(state) * tot)
    ni = _doc_word_part(a, nd, act, na, Wv, v, cum, itop, &sd)
    sb = a.beta * sdb
    qw = a.Qw[v]
    tot = sd + sb + qw + a.Qs
    while True:
        u = sc_uniform(state) * tot
        k = _live_part_draw(a, nd, act, na, cum, itop, ni, sd, sb, qw, v, u)
        # the acceptance ratio (< 1) only when the own topic is drawn
        if k != old or not a.exclude_own or Wv[old] <= 0 \
                or sc_uniform(state) < _own_ratio(a, Wv, old):
            return k


cdef inline int _draw_live_entry(const _Args* a, const int32_t* nd, const int32_t* act,
                                 int na, double sdb, double* cum, int32_t* itop, int v,
                                 const int32_t* dl, const int32_t* dset, int nds,
                                 int32_t* etop, uint64_t* state) noexcept nogil:
    """One draw of a token of word v in LIVE counts mode with the entry's own changes (the
    default of ``StochasticEMLDA``): p(k) propto (n_dk + alpha_k) (W_vk + e_k + beta) /
    (T_k + e_k + V beta), where e_k = dl[k] is the change the entry (d, v) has made so far in
    this sweep, its earlier tokens' new topics counted and their previous topics and the
    token's own previous topic taken out (the read buffer W counts the previous topics of
    all the entry's tokens), so the token sees its entry's other tokens as a collapsed Gibbs
    sampler does; the topics with e_k != 0 are dset[0:nds].

    Exact rejection sampling with the proposal g(k) = f(k) max(1, r_k), where f is the frozen
    conditional (the four parts of the counts path) and r_k = [(W_vk + e_k + beta) / (T_k + e_k
    + V beta)] / [(W_vk + beta) / (T_k + V beta)], which is > 1 exactly when e_k > 0: g is f
    plus a short extra part over the topics with e_k > 0, and a draw of k is kept with
    probability min(1, r_k).  With one token in the entry this is the own-topic rejection of
    ``_draw_live_counts``, with the same random draws."""
    cdef int K = a.K, k, i, ni = 0, ne = 0
    cdef const int32_t* Wv = a.W + <int64_t> v * K
    cdef double tot = 0.0, sd = 0.0, u, qw, sb, wk, ext = 0.0, tk
    cdef double* ec = cum + (K + 1)
    if a.dense:
        for k in range(K):
            if dl[k] != 0:
                wk = (Wv[k] + dl[k] + a.beta) / (a.tot[k] + dl[k])
            else:
                wk = (Wv[k] + a.beta) * a.inv_tot[k]
            tot += (nd[k] + a.alpha[k]) * wk
            cum[k] = tot
        return _search(cum, K, sc_uniform(state) * tot)
    for i in range(nds):
        k = dset[i]
        if dl[k] > 0:
            tk = a.tot[k]
            ext += (nd[k] + a.alpha[k]) * ((Wv[k] + dl[k] + a.beta) / (tk + dl[k])
                                           - (Wv[k] + a.beta) * a.inv_tot[k])
            ec[ne] = ext
            etop[ne] = k
            ne += 1
    ni = _doc_word_part(a, nd, act, na, Wv, v, cum, itop, &sd)
    sb = a.beta * sdb
    qw = a.Qw[v]
    tot = sd + sb + qw + a.Qs
    while True:
        u = sc_uniform(state) * (tot + ext)
        if u >= tot:
            return etop[_scan(ec, ne, u - tot)]
        k = _live_part_draw(a, nd, act, na, cum, itop, ni, sd, sb, qw, v, u)
        if dl[k] >= 0:
            return k
        if sc_uniform(state) < ((Wv[k] + dl[k] + a.beta) / (a.tot[k] + dl[k])) \
                / ((Wv[k] + a.beta) * a.inv_tot[k]):
            return k


cdef inline double _own_accept(const _Args* a, const int32_t* nd, const int32_t* Wv,
                               int o) noexcept nogil:
    """FROZEN counts with ``exclude_own``: the probability of keeping a draw of the token's own
    previous topic o, the ratio of the conditional without the token,
    (n_do - 1 + alpha_o)(W_vo - 1 + beta)/(T_o - 1 + V beta), to the frozen one,
    (n_do + alpha_o)(W_vo + beta)/(T_o + V beta); both count the token (n_do, W_vo >= 1)."""
    cdef double r = 1.0
    if nd[o] > 0:
        r = (nd[o] - 1 + a.alpha[o]) / (nd[o] + a.alpha[o])
    if Wv[o] > 0:
        r *= _own_ratio(a, Wv, o)
    return r


cdef inline bint _frozen_keep(const _Args* a, const int32_t* nd, const int32_t* Wv, int k,
                              int old, uint64_t* state) noexcept nogil:
    """FROZEN counts: keep the draw k of a token whose previous topic is ``old`` (with
    ``exclude_own`` a draw of k = old is kept with probability ``_own_accept``; a uniform is
    consumed only then)."""
    return not a.exclude_own or k != old or sc_uniform(state) < _own_accept(a, nd, Wv, k)


cdef int64_t _doc(const _Args* a, zint_t* z, Py_ssize_t d, uint64_t key, int32_t* nd,
                  int32_t* act, int32_t* pos, double* cum, int32_t* itop) noexcept nogil:
    """Process document d (n_inner sweeps over its tokens); returns the number of tokens whose
    topic changed in the last inner sweep (with ``seq_init`` the first sweep reads no previous
    topic: every token counts as changed there).  nd must be all zero on entry and is on
    exit."""
    cdef int64_t t0 = a.tokptr[d], t1 = a.tokptr[d + 1], t, j, changed = 0
    cdef int64_t j0 = a.indptr[d], j1 = a.indptr[d + 1]
    cdef int K = a.K, na = 0, it, k, i, v, c, r, old
    cdef const float* wv
    cdef const int32_t* Wv
    cdef double* cb
    cdef double tot, sd, u, ll, qw, sb, sdb = 0.0
    cdef int ni, nds = 0, vn
    cdef uint64_t state
    # scratch of the entry's own changes (live_entry): itop holds 5 K int32, see _run_docs
    cdef int32_t* dl = itop + K
    cdef int32_t* dmark = itop + 2 * K
    cdef int32_t* dset = itop + 3 * K
    cdef int32_t* etop = itop + 4 * K
    if t1 == t0:
        if a.ll_doc != NULL:
            a.ll_doc[d] = 0.0
        return 0
    if not a.seq_init:
        for t in range(t0, t1):
            _nd_add(nd, act, pos, &na, z[t])
    state = sc_stream_key(a.seed, a.sweep, key)
    cb = cum + (K + 1)
    for it in range(a.n_inner):
        t = t0
        sb = -1.0  # the document's beta part, computed at its first entry
        if a.counts and a.mode == 1:
            # sum_k n_dk / (T_k + V beta), updated token by token (recomputed every inner sweep)
            sdb = 0.0
            for i in range(na):
                sdb += nd[act[i]] * a.inv_tot[act[i]]
        for j in range(j0, j1):
            c = a.cnt[j]
            if c <= 0:
                continue
            v = a.indices[j]
            if a.mode == 1 and a.counts:
                if j + 1 < j1:
                    # the next entry's row of the read buffer, whose cache lines the scan of
                    # the document's topics reads in no particular order: all of it for small
                    # K, else the document's topics' counts
                    Wv = a.W + <int64_t> a.indices[j + 1] * K
                    if K <= _PREFETCH_K:
                        sc_prefetch(Wv, K * sizeof(int32_t))
                    elif not a.dense and a.wlen[a.indices[j + 1]] < na:
                        # (the scan of the next word's topics, when shorter)
                        vn = a.indices[j + 1]
                        if a.wide:
                            sc_prefetch(<const int32_t*> a.wtop + a.wptr[vn],
                                        a.wlen[vn] * sizeof(int32_t))
                        else:
                            sc_prefetch(<const uint16_t*> a.wtop + a.wptr[vn],
                                        a.wlen[vn] * sizeof(uint16_t))
                    else:
                        for i in range(na):
                            sc_prefetch(Wv + act[i], 1)
                # LIVE counts: n_dk without the token, updated token by token; W, T frozen
                # (with ``live_entry`` up to the entry's own changes dl, topics dset)
                for r in range(c):
                    old = z[t]
                    _nd_remove(nd, act, pos, &na, old)
                    sdb -= a.inv_tot[old]
                    if na == 0:
                        sdb = 0.0
                    if a.live_entry and c > 1:
                        # (one token: the own-topic rejection below, the same draws)
                        _dl_add(dl, dmark, dset, &nds, old, -1)
                        k = _draw_live_entry(a, nd, act, na, sdb, cum, itop, v, dl, dset,
                                             nds, etop, &state)
                        _dl_add(dl, dmark, dset, &nds, k, 1)
                    else:
                        k = _draw_live_counts(a, nd, act, na, sdb, cum, itop, v, old, &state)
                    _nd_add(nd, act, pos, &na, k)
                    sdb += a.inv_tot[k]
                    if k != old and it == a.n_inner - 1:
                        changed += 1
                    z[t] = <zint_t> k
                    t += 1
                for i in range(nds):
                    dl[dset[i]] = 0
                    dmark[dset[i]] = 0
                nds = 0
                continue
            if a.mode == 1:  # LIVE: n_dk without the token, updated token by token
                for r in range(c):
                    if it > 0 or not a.seq_init:
                        old = z[t]
                        _nd_remove(nd, act, pos, &na, old)
                    else:
                        # sequential initialisation: the token has no topic yet (z[t] is not
                        # read, it may hold anything), is not counted, and counts as changed
                        old = -1
                    k = _draw_one(a, nd, act, na, cum, v, &state)
                    _nd_add(nd, act, pos, &na, k)
                    if k != old and it == a.n_inner - 1:
                        changed += 1
                    z[t] = <zint_t> k
                    t += 1
                continue
            # FROZEN: one distribution per entry
            if a.counts and a.dense:
                # every topic: (n_dk + alpha_k)(W_vk + beta) / (T_k + V beta)
                Wv = a.W + <int64_t> v * K
                tot = 0.0
                for k in range(K):
                    tot += (nd[k] + a.alpha[k]) * ((Wv[k] + a.beta) * a.inv_tot[k])
                    cum[k] = tot
                for r in range(c):
                    while True:
                        k = _search(cum, K, sc_uniform(&state) * tot)
                        if _frozen_keep(a, nd, Wv, k, z[t], &state):
                            break
                    if k != z[t] and it == a.n_inner - 1:
                        changed += 1
                    z[t] = <zint_t> k
                    t += 1
                continue
            if a.counts:
                # (n_dk + alpha_k)(W_vk + beta) / (T_k + V beta) in four parts:
                #   n_dk W_vk / (T_k + V beta) over topics in both the document and the word
                #     (a scan over the shorter of the two lists),
                #   n_dk beta / (T_k + V beta) over the document's topics (once per document),
                #   alpha_k W_vk / (T_k + V beta) from word v's alias table,
                #   alpha_k beta / (T_k + V beta) from the shared smoothing table.
                if sb < 0.0:
                    sb = 0.0
                    for i in range(na):
                        k = act[i]
                        sb += nd[k] * a.inv_tot[k]
                        cb[i] = sb
                    sb *= a.beta
                Wv = a.W + <int64_t> v * K
                sd = 0.0
                ni = _doc_word_part(a, nd, act, na, Wv, v, cum, itop, &sd)
                qw = a.Qw[v]
                tot = sd + sb + qw + a.Qs
                for r in range(c):
                    while True:
                        u = sc_uniform(&state) * tot
                        if u < sd:
                            k = itop[_scan(cum, ni, u)]
                        else:
                            u -= sd
                            if u < sb:
                                k = act[_scan(cb, na, u / a.beta)]
                            else:
                                u -= sb
                                if u < qw:
                                    k = _word_draw(a, v, u / qw)
                                else:
                                    k = _smooth_draw(a, (u - qw) / a.Qs)
                        if _frozen_keep(a, nd, Wv, k, z[t], &state):
                            break
                    if k != z[t] and it == a.n_inner - 1:
                        changed += 1
                    z[t] = <zint_t> k
                    t += 1
                continue
            wv = a.w + <int64_t> v * K
            if a.dense:
                tot = 0.0
                for k in range(K):
                    tot += (nd[k] + a.alpha[k]) * wv[k]
                    cum[k] = tot
                for r in range(c):
                    k = _search(cum, K, sc_uniform(&state) * tot)
                    if k != z[t] and it == a.n_inner - 1:
                        changed += 1
                    z[t] = <zint_t> k
                    t += 1
            else:
                sd = 0.0
                for i in range(na):
                    k = act[i]
                    sd += nd[k] * wv[k]
                    cum[i] = sd
                tot = sd + _word_mass(a, v)
                for r in range(c):
                    u = sc_uniform(&state) * tot
                    if u < sd:
                        k = act[_scan(cum, na, u)]
                    else:
                        k = _word_part_draw(a, v, u - sd)
                    if k != z[t] and it == a.n_inner - 1:
                        changed += 1
                    z[t] = <zint_t> k
                    t += 1
        if a.mode == 0:
            # the new document counts are the read buffer of the next inner sweep
            for i in range(na):
                nd[act[i]] = 0
            na = 0
            for t in range(t0, t1):
                _nd_add(nd, act, pos, &na, z[t])
        if it >= a.n_burn:
            if a.zsave != NULL:
                j = (it - a.n_burn) * a.n_tok
                for t in range(t0, t1):
                    a.zsave[j + t] = z[t]
            if a.acc != NULL:
                for i in range(na):
                    k = act[i]
                    a.acc[d * K + k] += nd[k]
            if a.Wout != NULL:
                t = t0
                for j in range(j0, j1):
                    v = a.indices[j]
                    for r in range(a.cnt[j]):
                        if a.atomic:
                            sc_atomic_add_i32(&a.Wout[<int64_t> v * K + z[t]], 1)
                        else:
                            a.Wout[<int64_t> v * K + z[t]] += 1
                        t += 1
    if a.ll_doc != NULL:
        # log p(z_d | alpha) = log Gamma(sum alpha) - log Gamma(N_d + sum alpha)
        #                      + sum_k [log Gamma(n_dk + alpha_k) - log Gamma(alpha_k)]
        ll = gammaln(a.sum_alpha) - gammaln((t1 - t0) + a.sum_alpha)
        for i in range(na):
            k = act[i]
            if a.lga_tab != NULL and nd[k] < _LG_TAB:
                ll += a.lga_tab[nd[k]]
            else:
                ll += gammaln(nd[k] + a.alpha[k]) - a.lg_alpha[k]
        a.ll_doc[d] = ll
    for i in range(na):
        nd[act[i]] = 0
    return changed


cdef int _check_word_ids(const int32_t[::1] indices, int64_t V) except -1:
    """ValueError unless every word id of ``indices`` is in [0, V), a row of the (V, K) weight
    or count table: every entry's, also of entries with no tokens (the sweep reads ahead at
    the next entry's row)."""
    cdef Py_ssize_t j
    cdef int bad = 0
    with nogil:
        for j in range(indices.shape[0]):
            bad = bad | (indices[j] < 0) | (indices[j] >= V)
    if bad:
        raise ValueError("word id out of range")
    return 0


cdef int _check_topics(const zint_t[::1] z, int K) except -1:
    """ValueError unless every topic of ``z`` is < K (z read as topics: the counts n_dk, the
    rows' columns of count_words and rb_doc_part)."""
    cdef Py_ssize_t t
    cdef int bad = 0
    with nogil:
        for t in range(z.shape[0]):
            bad = bad | (<int64_t> z[t] >= K)
    if bad:
        raise ValueError("topic out of range")
    return 0


cdef int _check_layout(const int64_t[::1] indptr, const int32_t[::1] cnt,
                       const int64_t[::1] tokptr, Py_ssize_t n_tok) except -1:
    """ValueError unless (indptr, cnt, tokptr) is a token layout as :func:`token_counts` builds
    it for ``n_tok`` tokens, the invariant every kernel walking the tokens through tokptr
    relies on: indptr non-decreasing within [0, nnz] ("indptr must be non-decreasing within
    [0, nnz]"), the documents' entries' counts >= 0 ("token counts must be >= 0"), and
    tokptr[0] == 0, tokptr[d + 1] - tokptr[d] the sum of document d's counts, tokptr[D] ==
    n_tok ("inconsistent token layout").  One O(D + nnz) scan."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t nnz = cnt.shape[0], j, tot
    cdef int bad = 0
    if D < 0 or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent token layout")
    with nogil:
        if indptr[0] < 0 or indptr[D] > nnz:
            bad = 1
        for d in range(D):
            if indptr[d + 1] < indptr[d]:
                bad = 1
                break
        if not bad:
            if tokptr[0] != 0 or tokptr[D] != n_tok:
                bad = 3
            for d in range(D):
                tot = 0
                for j in range(indptr[d], indptr[d + 1]):
                    if cnt[j] < 0:
                        bad = 2
                    tot += cnt[j]
                if bad == 2:
                    break
                if tokptr[d + 1] - tokptr[d] != tot:
                    bad = 3
    if bad == 1:
        raise ValueError("indptr must be non-decreasing within [0, nnz]")
    if bad == 2:
        raise ValueError("token counts must be >= 0")
    if bad == 3:
        raise ValueError("inconsistent token layout")
    return 0


cdef object _run_docs(_Args* a, zint_t[::1] z, const uint64_t[::1] keys, int n_threads):
    """The sweep over the documents, parallel over documents; returns the number of changed
    tokens."""
    cdef Py_ssize_t D = keys.shape[0], d
    cdef int K = a.K
    cdef int32_t* nd
    cdef int32_t* act
    cdef int32_t* pos
    cdef double* cum
    cdef int32_t* itop
    cdef int64_t changed = 0
    cdef int fails = 0
    if D == 0 or z.shape[0] == 0:
        if a.ll_doc != NULL:
            memset(a.ll_doc, 0, D * sizeof(double))
        return 0
    with nogil, parallel(num_threads=n_threads):
        nd = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        act = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        pos = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        cum = <double*> sc_thread_malloc(2 * (K + 1) * sizeof(double))
        # itop: the document-word topics, then the entry scratch of live_entry (dl, marks,
        # topics, extra-part topics; dl and the marks all zero between entries)
        itop = <int32_t*> sc_thread_malloc(5 * K * sizeof(int32_t))
        if nd != NULL:
            memset(nd, 0, K * sizeof(int32_t))
        if itop != NULL:
            memset(itop, 0, 5 * K * sizeof(int32_t))
        for d in prange(D, schedule="dynamic", chunksize=16):
            if nd == NULL or act == NULL or pos == NULL or cum == NULL or itop == NULL:
                fails += 1
                continue
            changed += _doc(a, &z[0], d, keys[d], nd, act, pos, cum, itop)
        free(nd)
        free(act)
        free(pos)
        free(cum)
        free(itop)
    if fails:
        raise MemoryError("could not allocate the sampler scratch space")
    return int(changed)


def sample_sweep(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const int32_t[::1] indices,    # IN (nnz,) word ids
    const int32_t[::1] cnt,        # IN (nnz,) tokens per entry (>= 0)
    const int64_t[::1] tokptr,     # IN (D + 1,) token offsets of the documents
    zint_t[::1] z,                 # INOUT (n_tokens,) topic of every token, entry order
    const uint64_t[::1] keys,      # IN (D,) random-stream key of every document
    const float[:, ::1] w,         # IN (V, K) word weights ((0, K) with ``split``)
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const float[:, ::1] prob,      # IN (V, K) alias probabilities (sparse path) or (0, 0)
    const int32_t[:, ::1] alias,   # IN (V, K) alias topics (sparse path) or (0, 0)
    const double[::1] Q,           # IN (V,) sum_k alpha_k w_vk (sparse path) or (0,)
    int mode,                      # FROZEN (0) or LIVE (1)
    bint dense,                    # dense path (every topic) instead of alias + document part
    int n_inner,                   # sweeps over each document's tokens
    int n_burn,                    # inner sweeps before the counts are saved
    uint64_t seed,
    uint64_t sweep,
    double[:, ::1] acc,            # INOUT (D, K) += n_dk after every saved inner sweep, or (0, 0)
    int32_t[:, ::1] Wout,          # INOUT (V, K) += word-topic counts of saved sweeps, or (0, 0)
    double[::1] ll_doc,            # OUT (D,) log p(z_d | alpha) after the last sweep, or (0,)
    int n_threads,
    bint seq_init=False,           # LIVE only: the first inner sweep initialises z (see below)
    split=None,                    # LIVE sparse path: SplitTables instead of w, prob, alias, Q
    zsave=None,                    # OUT int32 (n_inner - n_burn, n_tokens) or None
):
    """One sampling sweep over all documents (see the module docstring).

    With ``seq_init`` (LIVE mode), z is not read on entry: the first inner sweep draws every
    token given the topics of the tokens before it in the document, p(z_dn = k) propto
    (alpha_k + sum_{m < n} [z_dm = k]) w_vk (the initialisation of Mimno, Hoffman & Blei 2012,
    Sec. 4), and counts as the first of the ``n_inner`` sweeps (so ``n_burn >= 1`` discards it).
    z's contents on entry (which need not be topics) then change nothing, the returned count
    included: a token has no previous topic in that sweep, so with ``n_inner == 1`` every
    token counts as changed.

    Checked before the sweep (ValueError): the token layout is that of :func:`token_counts`
    (``_check_layout``: indptr non-decreasing within [0, nnz], counts >= 0, tokptr[0] == 0 and
    tokptr[d + 1] - tokptr[d] the sum of document d's counts); every entry's word id is a row
    of the weights (``w``, or the words of ``split``), also for entries with no tokens; without
    ``seq_init`` (z is read on entry, FROZEN or LIVE) every z is a topic < K.

    ``split`` (LIVE sparse path), the :class:`SplitTables` of :func:`split_word_tables`: the
    weights are w_vk = s_v e_k + x_vk with x_vk > 0 only on word v's listed topics, the
    document part reads them from the lists (no (V, K) table), and the word part alpha_k w_vk
    is drawn from the shared table over alpha_k e_k (mass Qs, scaled by s_v) or word v's
    table over alpha_k x_vk (mass Qw[v]). ``w``, ``prob``, ``alias`` and ``Q`` are then not
    read.

    ``zsave`` receives the assignments of every saved inner sweep (row s: sweep n_burn + s),
    in the token order of z: the word-topic counts without a (V, K) table
    (:func:`count_word_topics`).

    Returns the number of tokens whose topic changed in the last inner sweep.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1
    cdef int K = <int> alpha.shape[0], V = <int> w.shape[0]
    cdef _Args a
    if keys.shape[0] != D or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent shapes")
    if indices.shape[0] != cnt.shape[0] or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent token layout")
    cdef const int64_t[::1] s_wptr
    cdef const int32_t[::1] s_wlen
    cdef const int32_t[::1] s_wtop
    cdef const float[::1] s_wx
    cdef const float[::1] s_wprob
    cdef const int32_t[::1] s_walias
    cdef const double[::1] s_Qw
    cdef const double[::1] s_sv
    cdef const int32_t[:, ::1] s_wpre
    cdef const int64_t[::1] s_gcol
    cdef const uint64_t[:, ::1] s_bits
    cdef const double[::1] s_e0
    cdef const float[::1] s_sprob
    cdef const int32_t[::1] s_salias
    cdef int32_t[:, ::1] zs
    cdef int64_t n_words_all
    if split is not None:
        if dense or mode != 1:
            raise ValueError("split word tables are for the LIVE sparse path")
        s_wptr, s_wlen, s_wtop, s_wx = split.wptr, split.wlen, split.wtop, split.wx
        s_wprob, s_walias, s_Qw, s_sv = split.wprob, split.walias, split.Qw, split.sv
        s_wpre, s_gcol, s_bits, s_e0 = split.wpre, split.gcol, split.bits, split.e0
        s_sprob, s_salias, Qs = split.sprob, split.salias, float(split.Qs)
        V = <int> s_wlen.shape[0]
        n_words_all = s_bits.shape[0]
        if (s_wptr.shape[0] != V + 1 or s_Qw.shape[0] != V or s_sv.shape[0] != V
                or s_gcol.shape[0] != V or s_wpre.shape[0] != V
                or s_wpre.shape[1] != s_bits.shape[1] or s_bits.shape[1] * 64 < K
                or s_e0.shape[0] != K or s_sprob.shape[0] != K or s_salias.shape[0] != K
                or s_wtop.shape[0] != s_wprob.shape[0] or s_wtop.shape[0] != s_walias.shape[0]
                or s_wx.shape[0] != s_wtop.shape[0] + 1 or s_wptr[V] > s_wtop.shape[0]
                or not Qs > 0.0):
            raise ValueError("inconsistent split word tables")
        _check_word_types(s_gcol, n_words_all)
    else:
        if w.shape[1] != K:
            raise ValueError("inconsistent shapes")
        if not dense and (prob.shape[0] != V or prob.shape[1] != K or alias.shape[0] != V
                          or alias.shape[1] != K or Q.shape[0] != V):
            raise ValueError("the sparse path needs the alias tables of w")
    if mode not in (0, 1) or n_inner < 1 or n_burn < 0:
        raise ValueError("bad mode, n_inner or n_burn")
    if seq_init and mode != 1:
        raise ValueError("seq_init needs LIVE mode")
    if acc.shape[0] > 0 and (acc.shape[0] != D or acc.shape[1] != K):
        raise ValueError("acc must have shape (D, K)")
    if Wout.shape[0] > 0 and (Wout.shape[0] != V or Wout.shape[1] != K):
        raise ValueError("Wout must have shape (V, K)")
    if ll_doc.shape[0] > 0 and ll_doc.shape[0] != D:
        raise ValueError("ll_doc must have shape (D,)")
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_word_ids(indices, V)
    if not seq_init:
        _check_topics(z, K)  # z is read on entry
    a.zsave = NULL
    a.n_tok = z.shape[0]
    if zsave is not None:
        zs = zsave
        if zs.shape[0] != max(n_inner - n_burn, 0) or zs.shape[1] != z.shape[0]:
            raise ValueError("zsave must have shape (n_inner - n_burn, n_tokens)")
        if zs.shape[0] > 0 and zs.shape[1] > 0:
            a.zsave = &zs[0, 0]
    lg = np.ascontiguousarray(_sps.gammaln(np.asarray(alpha, dtype=np.float64)))
    cdef const double[::1] lg_alpha = lg
    lgt = np.empty(_LG_TAB)
    cdef double[::1] lgtv = lgt
    a.indptr = &indptr[0]
    a.indices = &indices[0] if indices.shape[0] > 0 else NULL
    a.cnt = &cnt[0] if cnt.shape[0] > 0 else NULL
    a.tokptr = &tokptr[0]
    a.w = &w[0, 0] if (split is None and V > 0) else NULL
    a.sv = NULL
    if split is not None:
        a.prob = NULL
        a.alias = NULL
        a.Q = NULL
        a.wptr = &s_wptr[0]
        a.wlen = &s_wlen[0] if V > 0 else NULL
        a.wtop = <const void*> &s_wtop[0] if s_wtop.shape[0] > 0 else NULL
        a.wprob = &s_wprob[0] if s_wprob.shape[0] > 0 else NULL
        a.walias = <const void*> &s_walias[0] if s_walias.shape[0] > 0 else NULL
        a.wide = 1
        a.Qw = &s_Qw[0] if V > 0 else NULL
        a.sprob = &s_sprob[0]
        a.salias = &s_salias[0]
        a.Qs = Qs
        a.sv = &s_sv[0] if V > 0 else NULL
        a.wx = &s_wx[0]
        a.e0 = &s_e0[0]
        a.bits = &s_bits[0, 0] if n_words_all > 0 else NULL
        a.gcol = &s_gcol[0] if V > 0 else NULL
        a.wpre = &s_wpre[0, 0] if V > 0 else NULL
        a.nw = <int> s_bits.shape[1]
        if V == 0:
            a.sv = NULL
    else:
        a.prob = &prob[0, 0] if (not dense and V > 0) else NULL
        a.alias = &alias[0, 0] if (not dense and V > 0) else NULL
        a.Q = &Q[0] if (not dense and V > 0) else NULL
    a.alpha = &alpha[0]
    a.lg_alpha = &lg_alpha[0]
    a.lga_tab = NULL
    if mode == 0 and np.all(np.asarray(alpha) == alpha[0]):
        # FROZEN with equal alphas: the per-topic terms of log p(z_d | alpha) from a table
        _lg_table(alpha[0], &lgtv[0])
        a.lga_tab = &lgtv[0]
    a.sum_alpha = float(np.sum(alpha))
    a.K = K
    a.mode = mode
    a.dense = dense
    a.n_inner = n_inner
    a.n_burn = n_burn
    a.seed = seed
    a.sweep = sweep
    a.acc = &acc[0, 0] if acc.shape[0] > 0 else NULL
    a.Wout = &Wout[0, 0] if Wout.shape[0] > 0 else NULL
    a.ll_doc = &ll_doc[0] if ll_doc.shape[0] > 0 else NULL
    a.atomic = n_threads != 1
    a.counts = 0
    a.seq_init = seq_init
    a.exclude_own = 0
    a.live_entry = 0
    a.tot = NULL
    return _run_docs(&a, z, keys, n_threads)


cdef inline int _alias_row(const double* p, int K, float* prob, int32_t* alias, double* s,
                           int32_t* small, int32_t* large) noexcept nogil:
    """Vose's alias table of the non-negative weights p[0:K] (not all zero)."""
    cdef double tot = 0.0
    cdef int k, ns = 0, nl = 0, l, g
    for k in range(K):
        tot += p[k]
    for k in range(K):
        s[k] = p[k] * K / tot
        if s[k] < 1.0:
            small[ns] = k
            ns += 1
        else:
            large[nl] = k
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        l = small[ns]
        nl -= 1
        g = large[nl]
        prob[l] = <float> s[l]
        alias[l] = g
        s[g] = (s[g] + s[l]) - 1.0
        if s[g] < 1.0:
            small[ns] = g
            ns += 1
        else:
            large[nl] = g
            nl += 1
    while nl > 0:
        nl -= 1
        prob[large[nl]] = 1.0
        alias[large[nl]] = large[nl]
    while ns > 0:  # left over by rounding: probability 1 up to rounding
        ns -= 1
        prob[small[ns]] = 1.0
        alias[small[ns]] = small[ns]
    return 0


def build_alias(
    const float[:, ::1] w,         # IN (V, K) word weights > 0
    const double[::1] alpha,       # IN (K,)
    float[:, ::1] prob,            # OUT (V, K)
    int32_t[:, ::1] alias,         # OUT (V, K)
    double[::1] Q,                 # OUT (V,) sum_k alpha_k w_vk
    int n_threads,
):
    """Alias tables of every word over alpha_k w_vk (parallel over words)."""
    cdef Py_ssize_t V = w.shape[0], v
    cdef int K = <int> w.shape[1], k, fails = 0
    cdef double* p
    cdef double* s
    cdef int32_t* small
    cdef int32_t* large
    cdef double q
    if alpha.shape[0] != K or prob.shape[0] != V or prob.shape[1] != K or alias.shape[0] != V \
            or alias.shape[1] != K or Q.shape[0] != V:
        raise ValueError("inconsistent shapes")
    if V == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        p = <double*> sc_thread_malloc(K * sizeof(double))
        s = <double*> sc_thread_malloc(K * sizeof(double))
        small = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        large = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        for v in prange(V, schedule="static"):
            if p == NULL or s == NULL or small == NULL or large == NULL:
                fails += 1
                continue
            q = 0.0
            for k in range(K):
                p[k] = alpha[k] * w[v, k]
                q = q + p[k]
            Q[v] = q
            _alias_row(p, K, &prob[v, 0], &alias[v, 0], s, small, large)
        free(p)
        free(s)
        free(small)
        free(large)
    if fails:
        raise MemoryError("could not allocate the alias-table scratch space")


cdef int _check_word_types(const int64_t[::1] cols, int64_t V) except -1:
    """ValueError unless every word type of ``cols`` is in [0, V)."""
    cdef Py_ssize_t i
    for i in range(cols.shape[0]):
        if cols[i] < 0 or cols[i] >= V:
            raise ValueError("word type out of range")
    return 0


def variational_word_weights(
    const double[:, ::1] UT,       # IN (V, K) lazily scaled statistics, word-major
    const int64_t[::1] cols,       # IN (n,) word types
    double pi,                     # IN the statistics' scale: S = pi UT^T
    double tau,                    # IN topic-word prior
    const double[::1] norm,        # IN (K,) psi(V tau + T_k)
    float[:, ::1] w,               # OUT (n, K)
    int n_threads,
):
    """Word weights of the sampled local step from lazily scaled statistics, one pass per
    word row: w[i, k] = exp(E[log phi_kv] - m_i), v = cols[i], with E[log phi_kv] =
    psi(tau + pi UT[v, k]) - norm_k and m_i its maximum over k (a per-word constant does not
    change the conditional of that word's tokens). psi is evaluated only where UT[v, k] > 0;
    elsewhere E[log phi_kv] = psi(tau) - norm_k and w = e0_k exp(c - m_i), a product, with
    c = max_k (psi(tau) - norm_k) and e0_k = exp(psi(tau) - norm_k - c): both factors are at
    most 1 (m_i >= c), so neither overflows nor underflows while their product is
    representable, however small tau is (psi(tau) is about -1 / tau)."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int K = <int> UT.shape[1], k, fails = 0
    cdef int64_t v, V = UT.shape[0]
    cdef double psi_tau = sc_psi(tau), m, l, u, em, c
    cdef double* buf
    if norm.shape[0] != K or w.shape[0] != n or w.shape[1] != K:
        raise ValueError("inconsistent shapes")
    _check_word_types(cols, V)
    if n == 0 or K == 0:
        return
    c = psi_tau - float(np.min(norm))
    e0_ = np.exp(psi_tau - np.asarray(norm) - c)
    cdef const double[::1] e0 = e0_
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> sc_thread_malloc(K * sizeof(double))
        for i in prange(n, schedule="static"):
            if buf == NULL:
                fails += 1
                continue
            v = cols[i]
            m = -INFINITY
            for k in range(K):
                u = UT[v, k]
                if u > 0.0:
                    l = sc_digamma(tau + pi * u) - norm[k]
                    buf[k] = l
                else:
                    l = psi_tau - norm[k]
                    buf[k] = INFINITY  # a zero entry: w = e0_k exp(c - m)
                if l > m:
                    m = l
            em = exp(c - m)
            for k in range(K):
                if buf[k] == INFINITY:
                    w[i, k] = <float> (e0[k] * em)
                else:
                    w[i, k] = <float> exp(buf[k] - m)
        free(buf)
    if fails:
        raise MemoryError("could not allocate the word-weight scratch space")


SplitTables = namedtuple(
    "SplitTables",
    "wptr wlen wtop wx wprob walias Qw sv wpre gcol bits e0 sprob salias Qs")
SplitTables.__doc__ = """The split word tables of :func:`split_word_tables` for
:func:`sample_sweep`, over the n word types ``gcol`` of a minibatch: w_vk = sv_v e0_k + x_vk.

wptr (n + 1,) int64, wlen (n,) int32: word i's listed topics are wtop[wptr[i]:wptr[i + 1]]
(ascending), with excesses wx (same positions; one padding entry at the end) and the alias
table wprob / walias over alpha_k x_vk, of mass Qw[i]; sv (n,): the words' scales; wpre (n,
nw) int32: listed topics before each 64-bit word of the word's row of ``bits`` (the global
(V_all, nw) bit sets); e0 (K,); sprob / salias: the shared alias table over alpha_k e0_k, of
mass Qs."""


def digamma(const double[::1] x):  # IN (n,) > 0
    """psi(x) of the kernel's weight builders (``sc_digamma``), for tests against scipy."""
    out = np.empty(x.shape[0])
    cdef double[::1] o = out
    cdef Py_ssize_t i
    for i in range(x.shape[0]):
        o[i] = sc_digamma(x[i])
    return out


def positive_bits(
    const double[:, ::1] UT,       # IN (V, K)
    uint64_t[:, ::1] bits,         # OUT (V, ceil(K / 64)) bit k & 63 of word k >> 6: UT > 0
    int n_threads,
):
    """The bit sets of the positive entries of every row of UT."""
    cdef Py_ssize_t V = UT.shape[0], v
    cdef int K = <int> UT.shape[1], k, nw = <int> bits.shape[1], j
    cdef uint64_t b
    if bits.shape[0] != V or nw != (K + 63) // 64:
        raise ValueError("inconsistent shapes")
    if V == 0:
        return
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            for j in range(nw):
                b = 0
                for k in range(j * 64, min(K, j * 64 + 64)):
                    if UT[v, k] > 0.0:
                        b = b | ((<uint64_t> 1) << (k - j * 64))
                bits[v, j] = b


def set_bits(
    uint64_t[:, ::1] bits,         # INOUT (V, nw)
    const int32_t[::1] topics,     # IN (m,) k
    const int32_t[::1] words,      # IN (m,) v
):
    """Set bit (v, k) for every pair (topics[i], words[i])."""
    cdef Py_ssize_t m = topics.shape[0], i
    cdef int k, v, V = <int> bits.shape[0], nw = <int> bits.shape[1]
    if words.shape[0] != m:
        raise ValueError("inconsistent shapes")
    for i in range(m):
        k = topics[i]
        v = words[i]
        if v < 0 or v >= V or k < 0 or k >= 64 * nw:
            raise ValueError("bit out of range")
        bits[v, k >> 6] |= (<uint64_t> 1) << (k & 63)


def bit_counts(
    const uint64_t[:, ::1] bits,   # IN (V_all, nw)
    const int64_t[::1] cols,       # IN (n,) rows
    int32_t[::1] out,              # OUT (n,) set bits of each row
):
    """The number of set bits of the rows ``cols``."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int j, nw = <int> bits.shape[1], c
    if out.shape[0] != n:
        raise ValueError("inconsistent shapes")
    _check_word_types(cols, bits.shape[0])
    with nogil:
        for i in range(n):
            c = 0
            for j in range(nw):
                c = c + sc_popcount64(bits[cols[i], j])
            out[i] = c


def split_word_tables(
    const double[:, ::1] UT,       # IN (V_all, K) lazily scaled statistics, word-major
    const uint64_t[:, ::1] bits,   # IN (V_all, nw) a superset of the bit sets of UT > 0
    const int64_t[::1] cols,       # IN (n,) word types
    double pi,                     # IN the statistics' scale: S = pi UT^T
    double tau,                    # IN topic-word prior
    const double[::1] norm,        # IN (K,) psi(V tau + T_k)
    const double[::1] alpha,       # IN (K,)
    const int32_t[::1] nnz,        # IN (n,) set bits of the rows (bit_counts)
    int n_threads,
    bint mean=False,               # IN log posterior mean instead of E[log phi]
    const int64_t[::1] ex_ptr=None,  # IN (n + 1,) word i's excluded statistics are
    const int32_t[::1] ex_top=None,  # IN   ex_val[ex_ptr[i]:ex_ptr[i + 1]] of the topics
    const double[::1] ex_val=None,   # IN   ex_top[...] (S units, >= 0), or None
):
    """The split word tables (:class:`SplitTables`) of the sampled local step from lazily
    scaled statistics, in O(K / 64 + listed topics) per word (no O(K) pass).

    With E[log phi_kv] = psi(tau + pi UT[v, k]) - norm_k, e0_k = exp(psi(tau) - norm_k) (the
    value where UT[v, k] = 0) and m_v the maximum of log e0 and of E[log phi_kv] over the
    listed topics (any per-word constant leaves the conditional of the word's tokens
    unchanged; m_v bounds every exponent of the row), the weights exp(E[log phi_kv] - m_v)
    are s_v e0_k + x_vk with s_v = exp(c - m_v) and x_vk = exp(E[log phi_kv] - m_v) - s_v e0_k,
    > 0 only on the listed topics (those of the word's bit set). psi is evaluated there
    only. The prior's shares are stored scaled by c = max_k log e0_k, e0_k = exp(psi(tau) -
    norm_k - c) <= 1 (and s_v <= 1), so a small tau (psi(tau) is about -1 / tau) neither
    underflows the shared table nor overflows s_v; s_v is 0 only where the prior's share is
    negligible against the word's listed topics.

    With ``mean``, log E[phi_kv] = log(tau + S_kv) - norm_k (norm_k = log(V tau + T_k)) takes
    the place of E[log phi_kv] (and log tau that of psi(tau)): the posterior mean, which is
    exactly e0_k + x_vk with x_vk = S_kv / (V tau + T_k). With the excluded statistics
    (``ex_ptr``, ``ex_top``, ``ex_val``), S_kv = max(pi UT[v, k] - ex_kv, 0) (the caller
    gives ``norm`` of the totals with the same exclusion); an excluded entry lies in the
    word's bit set or is ignored (its statistics are then 0 already)."""
    cdef Py_ssize_t n = cols.shape[0], i
    cdef int K = <int> UT.shape[1], nw = <int> bits.shape[1], k, j, ln, fails = 0
    cdef int64_t v, off, e
    cdef uint64_t b
    cdef double psi_tau = log(tau) if mean else sc_psi(tau), lmax0 = -INFINITY, l, m, q, x
    cdef double sv_i, u
    cdef bint has_ex = ex_ptr is not None
    cdef double* p
    cdef double* sc
    cdef double* exd
    cdef int32_t* small
    cdef int32_t* large
    cdef int32_t* al
    if (norm.shape[0] != K or alpha.shape[0] != K or bits.shape[0] != UT.shape[0]
            or nw != (K + 63) // 64 or nnz.shape[0] != n):
        raise ValueError("inconsistent shapes")
    _check_word_types(cols, UT.shape[0])
    if has_ex:
        if ex_top is None or ex_val is None or ex_ptr.shape[0] != n + 1:
            raise ValueError("inconsistent shapes")
        if (ex_ptr[0] != 0 or ex_top.shape[0] != ex_ptr[n] or ex_val.shape[0] != ex_ptr[n]
                or np.any(np.diff(ex_ptr) < 0)):
            raise ValueError("inconsistent exclusion lists")
        if ex_top.shape[0] and (np.min(ex_top) < 0 or np.max(ex_top) >= K):
            raise ValueError("excluded topic out of range")
    for k in range(K):
        if psi_tau - norm[k] > lmax0:
            lmax0 = psi_tau - norm[k]
    e0_ = np.exp(psi_tau - np.asarray(norm) - lmax0)
    cdef const double[::1] e0 = e0_
    wptr_ = np.zeros(n + 1, np.int64)
    np.cumsum(nnz, out=wptr_[1:])
    cdef const int64_t[::1] wptr = wptr_
    cdef int64_t tot = wptr_[n]
    wlen_ = np.empty(n, np.int32)
    wtop_ = np.empty(tot, np.int32)
    wx_ = np.zeros(tot + 1, np.float32)  # (one padding entry, see _split_weight)
    wprob_ = np.empty(tot, np.float32)
    walias_ = np.empty(tot, np.int32)
    Qw_ = np.empty(n)
    sv_ = np.empty(n)
    wpre_ = np.empty((n, nw), np.int32)
    cdef int32_t[::1] wlen = wlen_
    cdef int32_t[::1] wtop = wtop_
    cdef float[::1] wx = wx_
    cdef float[::1] wprob = wprob_
    cdef int32_t[::1] walias = walias_
    cdef double[::1] Qw = Qw_
    cdef double[::1] sv = sv_
    cdef int32_t[:, ::1] wpre = wpre_
    if n > 0 and K > 0:
        with nogil, parallel(num_threads=n_threads):
            p = <double*> sc_thread_malloc(K * sizeof(double))
            sc = <double*> sc_thread_malloc(K * sizeof(double))
            small = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            large = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            al = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            exd = <double*> sc_thread_malloc(K * sizeof(double)) if has_ex else NULL
            if exd != NULL:
                memset(exd, 0, K * sizeof(double))
            for i in prange(n, schedule="static"):
                if (p == NULL or sc == NULL or small == NULL or large == NULL or al == NULL
                        or (has_ex and exd == NULL)):
                    fails += 1
                    continue
                if has_ex:
                    for e in range(ex_ptr[i], ex_ptr[i + 1]):
                        exd[ex_top[e]] = exd[ex_top[e]] + ex_val[e]
                v = cols[i]
                off = wptr[i]
                ln = 0
                m = lmax0
                # the listed topics first, their statistics fetched ahead (scattered over
                # the row: one cache miss each, overlapped instead of one per psi)
                for j in range(nw):
                    wpre[i, j] = ln
                    b = bits[v, j]
                    while b != 0 and ln < nnz[i]:
                        k = j * 64 + sc_ctz64(b)
                        b = b & (b - 1)
                        sc_prefetch(&UT[v, k], 1)
                        wtop[off + ln] = k
                        ln = ln + 1
                for j in range(ln):
                    k = wtop[off + j]
                    u = pi * max(UT[v, k], 0.0)
                    if has_ex:
                        u = max(u - exd[k], 0.0)
                    if mean:
                        l = log(tau + u) - norm[k]
                    else:
                        l = sc_digamma(tau + u) - norm[k]
                    p[j] = l
                    if l > m:
                        m = l
                sv_i = exp(lmax0 - m)
                sv[i] = sv_i
                q = 0.0
                for j in range(ln):
                    k = wtop[off + j]
                    x = exp(p[j] - m) - sv_i * e0[k]
                    if x < 0.0:
                        x = 0.0
                    wx[off + j] = <float> x
                    p[j] = alpha[k] * x
                    q = q + p[j]
                wlen[i] = ln
                Qw[i] = q
                if ln > 0 and q > 0.0:
                    _alias_row(p, ln, &wprob[off], al, sc, small, large)
                    for j in range(ln):
                        walias[off + j] = wtop[off + al[j]]
                else:
                    for j in range(ln):
                        wprob[off + j] = 1.0
                        walias[off + j] = wtop[off + j]
                if has_ex:
                    for e in range(ex_ptr[i], ex_ptr[i + 1]):
                        exd[ex_top[e]] = 0.0
            free(p)
            free(sc)
            free(small)
            free(large)
            free(al)
            free(exd)
    if fails:
        raise MemoryError("could not allocate the split-table scratch space")
    if np.any(wlen_ != np.asarray(nnz)):
        raise ValueError("nnz does not count the bits of the rows")
    sprob_ = np.empty((1, K), np.float32)
    salias_ = np.empty((1, K), np.int32)
    Qs_ = np.empty(1)
    build_alias(e0_.astype(np.float32)[None, :], alpha, sprob_, salias_, Qs_, 1)
    return SplitTables(wptr_, wlen_, wtop_, wx_, wprob_, walias_, Qw_, sv_, wpre_,
                       np.ascontiguousarray(cols, dtype=np.int64), np.asarray(bits), e0_,
                       sprob_[0], salias_[0], float(Qs_[0]))


def count_word_topics(
    const int32_t[::1] indices,    # IN (nnz,) word of every entry, in [0, n_words)
    const int32_t[::1] cnt,        # IN (nnz,) tokens per entry (>= 0)
    const int32_t[:, ::1] zsave,   # IN (S, n_tokens) topics of every saved sweep, entry order
    int n_words,
    int K,
):
    """The word-topic counts of the saved sweeps of :func:`sample_sweep` (``zsave``), word by
    word: returns ``(jptr, topics, counts)`` with word j's topics (distinct, in order of first
    draw) and their counts at jptr[j]:jptr[j + 1]. O(tokens x sweeps + words), with no (V, K)
    table: the tokens are grouped by word (a counting sort) and counted in one (K,) array
    that is reset after each word."""
    cdef Py_ssize_t m = indices.shape[0], j
    cdef int64_t n_tok = zsave.shape[1], t, qq, o = 0
    cdef int S = <int> zsave.shape[0], s, nl, c, r, k, v
    if cnt.shape[0] != m:
        raise ValueError("inconsistent shapes")
    start_ = np.zeros(n_words + 1, np.int64)
    cdef int64_t[::1] start = start_
    t = 0
    for j in range(m):
        v = indices[j]
        c = cnt[j]
        if c > 0:
            if v < 0 or v >= n_words:
                raise ValueError("word id out of range")
            start[v + 1] += c
            t += c
    if t != n_tok:
        raise ValueError("zsave does not hold the tokens of cnt")
    np.cumsum(start_, out=start_)
    fill_ = start_[:n_words].copy()
    perm_ = np.empty(n_tok, np.int64)
    mark_ = np.zeros(K, np.int32)
    lst_ = np.empty(K, np.int32)
    jptr_ = np.zeros(n_words + 1, np.int64)
    top_ = np.empty(n_tok * S, np.int32)
    val_ = np.empty(n_tok * S, np.int32)
    cdef int64_t[::1] fill = fill_
    cdef int64_t[::1] perm = perm_
    cdef int32_t[::1] mark = mark_
    cdef int32_t[::1] lst = lst_
    cdef int64_t[::1] jptr = jptr_
    cdef int32_t[::1] top = top_
    cdef int32_t[::1] val = val_
    cdef int bad = 0
    with nogil:
        t = 0
        for j in range(m):
            v = indices[j]
            for r in range(cnt[j]):
                perm[fill[v]] = t
                fill[v] += 1
                t += 1
        for v in range(n_words):
            nl = 0
            for qq in range(start[v], start[v + 1]):
                t = perm[qq]
                for s in range(S):
                    k = zsave[s, t]
                    if k < 0 or k >= K:
                        bad = 1
                        continue
                    if mark[k] == 0:
                        lst[nl] = k
                        nl = nl + 1
                    mark[k] += 1
            for r in range(nl):
                k = lst[r]
                top[o] = k
                val[o] = mark[k]
                mark[k] = 0
                o += 1
            jptr[v + 1] = o
    if bad:
        raise ValueError("topic out of range")
    return jptr_, top_[:o], val_[:o]


def sample_sweep_counts(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const int32_t[::1] indices,    # IN (nnz,) word ids
    const int32_t[::1] cnt,        # IN (nnz,) tokens per entry (>= 0)
    const int64_t[::1] tokptr,     # IN (D + 1,) token offsets of the documents
    zint_t[::1] z,                 # INOUT (n_tokens,) topic of every token, entry order
    const uint64_t[::1] keys,      # IN (D,) random-stream key of every document
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts (read buffer), >= 0
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta)
    double beta,
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const int64_t[::1] wptr,       # IN (V + 1,) slots of the words' sparse tables
    const int32_t[::1] wlen,       # IN (V,) non-zero counts of every word (build_word_tables)
    const tab_t[::1] wtop,         # IN topics of the non-zero counts
    const float[::1] wprob,        # IN alias probabilities of the word tables
    const tab_t[::1] walias,       # IN alias topics of the word tables
    const double[::1] Qw,          # IN (V,) word-part masses
    const float[::1] sprob,        # IN (K,) alias probabilities of the smoothing table
    const int32_t[::1] salias,     # IN (K,) alias topics of the smoothing table
    double Qs,                     # smoothing-part mass beta sum_k alpha_k / (T_k + V beta)
    int n_inner,
    int n_burn,
    uint64_t seed,
    uint64_t sweep,
    double[:, ::1] acc,            # INOUT (D, K) or (0, 0), as in sample_sweep
    int32_t[:, ::1] Wout,          # INOUT (V, K) or (0, 0)
    double[::1] ll_doc,            # OUT (D,) or (0,)
    int n_threads,
    bint dense=False,              # every topic (the tables may then be empty)
    int mode=0,                    # FROZEN (0): n_dk of the previous sweep; LIVE (1): live
    bint exclude_own=False,        # LIVE only: the token's previous topic out of W_vk and T_k
    bint live_entry=False,         # LIVE with exclude_own: W_vk, T_k follow the entry's tokens
):
    """One sweep with the word weights w_vk = (W_vk + beta) / (T_k + V beta) given by
    the counts (stochastic EM), from the three-part decomposition

        (n_dk + alpha_k) w_vk = n_dk w_vk                         (document part)
                              + alpha_k W_vk / (T_k + V beta)     (word part)
                              + alpha_k beta / (T_k + V beta)     (smoothing part).

    The document part is evaluated exactly over the document's topics, the word part is drawn
    from word v's alias table over its topics with W_vk > 0 and the smoothing part from one alias
    table over the K topics shared by all words (tables of :func:`build_word_tables`).  A
    uniform u in [0, S_dv + Q_v + Q_s) selects the part.  All three parts are exact for the
    frozen read buffer, so the draws follow the exact conditional; the per-token cost is
    O(topics in the document), and the tables cost O(nnz(W) + K) per sweep.

    ``mode=LIVE`` keeps the document's counts live: every token is drawn with n_dk =
    n_dk^{-dn}, the counts of the document's other tokens (the new topics of the tokens
    before it, the previous ones of the tokens after it), while W and T stay those of the
    read buffer; with ``exclude_own`` the token's own previous topic z_old is taken out of the
    read buffer as well, p(k) propto (n_dk^{-dn} + alpha_k) (W_vk - [k = z_old] + beta) /
    (T_k - [k = z_old] + V beta) (see ``_draw_live_counts``).  A document is processed by one
    thread, so the draws stay bit-identical for any number of threads.  ``dense`` evaluates
    all K topics per token (FROZEN: per entry) from W directly.

    Checked before the sweep (ValueError): the token layout is that of :func:`token_counts`
    (as in :func:`sample_sweep`), every entry's word id is a row of W (also for entries with
    no tokens) and every z is a topic < K (z is read on entry in both modes).

    Returns the number of tokens whose topic changed in the last inner sweep.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1
    cdef int K = <int> W.shape[1], V = <int> W.shape[0]
    cdef _Args a
    if mode not in (0, 1):
        raise ValueError("bad mode")
    if live_entry and not (exclude_own and mode == 1):
        raise ValueError("live_entry needs mode=LIVE and exclude_own")
    if exclude_own and n_inner != 1:
        raise ValueError("exclude_own needs one inner sweep (the read buffer counts the "
                         "assignments on entry)")
    if alpha.shape[0] != K or inv_tot.shape[0] != K or keys.shape[0] != D \
            or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent shapes")
    if indices.shape[0] != cnt.shape[0] or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent token layout")
    if not dense and (
            wptr.shape[0] != V + 1 or wlen.shape[0] != V or Qw.shape[0] != V
            or sprob.shape[0] != K or salias.shape[0] != K
            or wtop.shape[0] < wptr[V] or wprob.shape[0] < wptr[V]
            or walias.shape[0] < wptr[V]):
        raise ValueError("the counts path needs the tables of build_word_tables")
    if n_inner < 1 or n_burn < 0:
        raise ValueError("bad n_inner or n_burn")
    if acc.shape[0] > 0 and (acc.shape[0] != D or acc.shape[1] != K):
        raise ValueError("acc must have shape (D, K)")
    if Wout.shape[0] > 0 and (Wout.shape[0] != V or Wout.shape[1] != K):
        raise ValueError("Wout must have shape (V, K)")
    if ll_doc.shape[0] > 0 and ll_doc.shape[0] != D:
        raise ValueError("ll_doc must have shape (D,)")
    if K == 0 or not (dense or Qs > 0):
        raise ValueError("the smoothing mass must be positive")
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_word_ids(indices, V)
    _check_topics(z, K)  # z is read on entry
    lg = np.ascontiguousarray(_sps.gammaln(np.asarray(alpha, dtype=np.float64)))
    cdef const double[::1] lg_alpha = lg
    lgt = np.empty(_LG_TAB)
    cdef double[::1] lgtv = lgt
    a.indptr = &indptr[0]
    a.indices = &indices[0] if indices.shape[0] > 0 else NULL
    a.cnt = &cnt[0] if cnt.shape[0] > 0 else NULL
    a.tokptr = &tokptr[0]
    a.w = NULL
    a.prob = NULL
    a.alias = NULL
    a.Q = NULL
    a.sv = NULL
    a.zsave = NULL
    a.alpha = &alpha[0]
    a.lg_alpha = &lg_alpha[0]
    a.lga_tab = NULL
    if np.all(np.asarray(alpha) == alpha[0]):
        # equal alphas (stochastic EM): the per-topic terms of log p(z_d | alpha) from a table
        _lg_table(alpha[0], &lgtv[0])
        a.lga_tab = &lgtv[0]
    a.sum_alpha = float(np.sum(alpha))
    a.K = K
    a.mode = mode
    a.dense = dense
    a.n_inner = n_inner
    a.n_burn = n_burn
    a.seed = seed
    a.sweep = sweep
    a.acc = &acc[0, 0] if acc.shape[0] > 0 else NULL
    a.Wout = &Wout[0, 0] if Wout.shape[0] > 0 else NULL
    a.ll_doc = &ll_doc[0] if ll_doc.shape[0] > 0 else NULL
    a.atomic = n_threads != 1
    a.counts = 1
    a.seq_init = 0
    a.exclude_own = exclude_own
    a.live_entry = live_entry
    a.W = &W[0, 0] if V > 0 else NULL
    a.inv_tot = &inv_tot[0]
    tot_ = np.ascontiguousarray(1.0 / np.asarray(inv_tot))
    cdef const double[::1] totv = tot_
    a.tot = &totv[0]
    a.beta = beta
    a.wptr = &wptr[0] if not dense else NULL
    a.wlen = &wlen[0] if (V > 0 and not dense) else NULL
    a.wtop = <const void*> &wtop[0] if (wtop.shape[0] > 0 and not dense) else NULL
    a.wide = tab_t is int32_t
    a.wprob = &wprob[0] if (wprob.shape[0] > 0 and not dense) else NULL
    a.walias = <const void*> &walias[0] if (walias.shape[0] > 0 and not dense) else NULL
    a.Qw = &Qw[0] if (V > 0 and not dense) else NULL
    a.sprob = &sprob[0] if not dense else NULL
    a.salias = &salias[0] if not dense else NULL
    a.Qs = Qs
    return _run_docs(&a, z, keys, n_threads)


def build_word_tables(
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts (read buffer), >= 0
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta)
    double beta,
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const int64_t[::1] wptr,       # IN (V + 1,) slots per word: >= its number of non-zero counts
    int32_t[::1] wlen,             # OUT (V,) number of non-zero counts of every word
    tab_t[::1] wtop,               # OUT (wptr[V],) their topics (uint16 if K <= 65535)
    float[::1] wprob,              # OUT (wptr[V],) alias probabilities
    tab_t[::1] walias,             # OUT (wptr[V],) alias topics
    double[::1] Qw,                # OUT (V,) sum_k alpha_k W_vk / (T_k + V beta)
    float[::1] sprob,              # OUT (K,) smoothing alias probabilities
    int32_t[::1] salias,           # OUT (K,) smoothing alias topics
    double[::1] word_ll,           # OUT (V,) sum_k [lgamma(W_vk + beta) - lgamma(beta)]
    int n_threads,
):
    """The tables of :func:`sample_sweep_counts` from the read buffer W: for every word (in
    parallel) its topics with W_vk > 0 and Vose's alias table over alpha_k W_vk / (T_k + V beta)
    on them, and the alias table over alpha_k beta / (T_k + V beta) shared by all words.

    W is read once (one pass over each word's row); the tables and the per-word work beyond the
    scan are O(nnz(W)).  Returns Q_s = beta sum_k alpha_k / (T_k + V beta).
    """
    cdef Py_ssize_t V = W.shape[0], v
    cdef int K = <int> W.shape[1], k, n, i, fails = 0, over = 0
    cdef int64_t off
    cdef double* p
    cdef double* s
    cdef int32_t* small
    cdef int32_t* large
    cdef int32_t* al
    cdef double q, ll, lgb = gammaln(beta)
    cdef int32_t c
    lbt = np.empty(_LG_TAB)
    cdef double[::1] lbtv = lbt
    _lg_table(beta, &lbtv[0])
    if alpha.shape[0] != K or inv_tot.shape[0] != K or wptr.shape[0] != V + 1 \
            or wlen.shape[0] != V or Qw.shape[0] != V or word_ll.shape[0] != V \
            or sprob.shape[0] != K or salias.shape[0] != K or wtop.shape[0] < wptr[V] \
            or wprob.shape[0] < wptr[V] or walias.shape[0] < wptr[V]:
        raise ValueError("inconsistent shapes")
    if K == 0:
        raise ValueError("K must be positive")
    if tab_t is uint16_t and K > 65536:
        raise ValueError("uint16 tables need K <= 65536")
    ps = np.empty(K)
    for k in range(K):
        ps[k] = alpha[k] * beta * inv_tot[k]
    Qs = float(ps.sum())
    scratch = np.empty(K)
    sm = np.empty(K, np.int32)
    lg_ = np.empty(K, np.int32)
    cdef double[::1] psv = ps, scv = scratch
    cdef int32_t[::1] smv = sm, lgv = lg_
    _alias_row(&psv[0], K, &sprob[0], &salias[0], &scv[0], &smv[0], &lgv[0])
    if V == 0:
        return Qs
    with nogil, parallel(num_threads=n_threads):
        p = <double*> sc_thread_malloc(K * sizeof(double))
        s = <double*> sc_thread_malloc(K * sizeof(double))
        small = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        large = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        al = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
        for v in prange(V, schedule="dynamic", chunksize=64):
            if p == NULL or s == NULL or small == NULL or large == NULL or al == NULL:
                fails += 1
                continue
            off = wptr[v]
            n = 0
            q = 0.0
            ll = 0.0
            for k in range(K):
                c = W[v, k]
                if c > 0:
                    if off + n >= wptr[v + 1]:
                        over += 1
                        break
                    wtop[off + n] = k
                    p[n] = alpha[k] * c * inv_tot[k]
                    q = q + p[n]
                    if c < _LG_TAB:
                        ll = ll + lbtv[c]
                    else:
                        ll = ll + (gammaln(c + beta) - lgb)
                    n = n + 1
            wlen[v] = n
            Qw[v] = q
            word_ll[v] = ll
            if n > 0:
                _alias_row(p, n, &wprob[off], al, s, small, large)
                for i in range(n):  # alias slots -> topics
                    walias[off + i] = wtop[off + al[i]]
        free(p)
        free(s)
        free(small)
        free(large)
        free(al)
    if fails:
        raise MemoryError("could not allocate the alias-table scratch space")
    if over:
        raise ValueError("a word has more non-zero counts than its slots in wptr")
    return Qs


def sem_word_weights(
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts (read buffer)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta)
    double beta,
    float[:, ::1] w,               # OUT (V, K) (W_vk + beta) / (T_k + V beta)
    double[::1] word_ll,           # OUT (V,) sum_k [lgamma(W_vk + beta) - lgamma(beta)]
    int n_threads,
):
    """Stochastic-EM word weights from the counts, and the words' terms of log p(x | z, beta)."""
    cdef Py_ssize_t V = W.shape[0], v
    cdef int K = <int> W.shape[1], k
    cdef double lgb = gammaln(beta), ll
    if inv_tot.shape[0] != K or w.shape[0] != V or w.shape[1] != K or word_ll.shape[0] != V:
        raise ValueError("inconsistent shapes")
    lbt = np.empty(_LG_TAB)
    cdef double[::1] lbtv = lbt
    _lg_table(beta, &lbtv[0])
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            ll = 0.0
            for k in range(K):
                w[v, k] = <float> ((W[v, k] + beta) * inv_tot[k])
                if W[v, k] > 0:
                    if W[v, k] < _LG_TAB:
                        ll = ll + lbtv[W[v, k]]
                    else:
                        ll = ll + gammaln(W[v, k] + beta) - lgb
            word_ll[v] = ll


def word_loglik(
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts
    double beta,
    double[::1] word_ll,           # OUT (V,) sum_k [lgamma(W_vk + beta) - lgamma(beta)]
    int n_threads,
):
    """The words' terms of log p(x | z, beta) from the counts (the dense counts path, which
    needs no tables)."""
    cdef Py_ssize_t V = W.shape[0], v
    cdef int K = <int> W.shape[1], k
    cdef double lgb = gammaln(beta), ll
    if word_ll.shape[0] != V:
        raise ValueError("inconsistent shapes")
    lbt = np.empty(_LG_TAB)
    cdef double[::1] lbtv = lbt
    _lg_table(beta, &lbtv[0])
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            ll = 0.0
            for k in range(K):
                if W[v, k] > 0:
                    if W[v, k] < _LG_TAB:
                        ll = ll + lbtv[W[v, k]]
                    else:
                        ll = ll + gammaln(W[v, k] + beta) - lgb
            word_ll[v] = ll


ctypedef fused real_t:
    float
    double


def token_counts(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const real_t[::1] data,        # IN (nnz,) counts
    int32_t[::1] cnt,              # OUT (nnz,) floor(data + 0.5)
    int64_t[::1] tokptr,           # OUT (D + 1,) token offsets of the documents
):
    """Tokens per entry (the counts rounded half up) and their offsets per document, without
    temporaries of the size of the corpus.  Returns False if a count exceeds 2**31 - 1."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t j, tot = 0
    cdef double c
    cdef bint ok = True
    if data.shape[0] != cnt.shape[0] or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent shapes")
    with nogil:
        tokptr[0] = 0
        for d in range(D):
            for j in range(indptr[d], indptr[d + 1]):
                c = libc_floor(<double> data[j] + 0.5)
                if c > 2147483647.0:
                    ok = False
                    c = 0.0
                cnt[j] = <int32_t> c
                tot += <int32_t> c
            tokptr[d + 1] = tot
    return ok


def random_assign(
    const int64_t[::1] tokptr,     # IN (D + 1,)
    zint_t[::1] z,                 # OUT (n_tokens,)
    const uint64_t[::1] keys,      # IN (D,)
    uint64_t seed,
    int K,
    int n_threads,
):
    """z uniform over the K topics, from the stream (seed, 0, key[d]) of each document.
    ValueError unless tokptr is non-decreasing from tokptr[0] == 0 ("inconsistent token
    layout"), the offsets of :func:`token_counts`."""
    cdef Py_ssize_t D = tokptr.shape[0] - 1, d
    cdef int64_t t
    cdef uint64_t state
    cdef int bad = 0
    if D < 0 or keys.shape[0] != D or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent shapes")
    with nogil:
        bad = tokptr[0] != 0
        for d in range(D):
            bad = bad | (tokptr[d + 1] < tokptr[d])
    if bad:
        raise ValueError("inconsistent token layout")
    if z.shape[0] == 0:
        return
    with nogil:
        for d in prange(D, schedule="static", num_threads=n_threads):
            state = sc_stream_key(seed, 0, keys[d])
            for t in range(tokptr[d], tokptr[d + 1]):
                z[t] = <zint_t> (<int> (sc_uniform(&state) * K) % K)


cdef inline int64_t _first_at_least(const int32_t[::1] indices, int64_t lo, int64_t hi,
                                    int v) noexcept nogil:
    """First j in [lo, hi) with indices[j] >= v (indices increasing there), else hi."""
    cdef int64_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef inline void _count_entry(int32_t* Wrow, const zint_t* zt, int c,
                              int64_t* tb) noexcept nogil:
    """Count the c topics zt[0:c] of one entry into its word's row (and the totals tb)."""
    cdef int r, k
    for r in range(c):
        k = zt[r]
        Wrow[k] += 1
        if tb != NULL:
            tb[k] += 1


def rows_sorted(const int64_t[::1] indptr, const int32_t[::1] indices):
    """True if the word ids strictly increase within every document (one pass, no
    temporaries)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t j
    cdef bint ok = True
    with nogil:
        for d in range(D):
            for j in range(indptr[d] + 1, indptr[d + 1]):
                if indices[j] <= indices[j - 1]:
                    ok = False
                    break
            if not ok:
                break
    return ok


def count_words(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] cnt,
    const int64_t[::1] tokptr,
    const zint_t[::1] z,
    int32_t[:, ::1] Wout,          # INOUT (V, K) += word-topic counts of z
    int n_threads,
    int64_t[::1] T_out=None,       # INOUT (K,) += topic totals of z, or None
    bint zero=False,               # Wout = (not +=) the counts: each thread zeroes its rows
    bint sorted_words=False,       # the word ids increase within every document (rows_sorted)
):
    """Word-topic counts of the assignments z (and, with ``T_out``, their topic totals, so
    that the caller need not sum the (V, K) counts).  With ``zero`` the counts replace Wout's
    contents; each thread zeroes its own block of rows first, so clearing the (V, K) array
    is not a serial step before the count.  With ``sorted_words`` (word ids increasing within
    every document, :func:`rows_sorted`) a thread finds its block's entries of a document by
    binary search instead of testing every entry.

    With several threads each thread owns a block of words and scans all entries for its
    words' tokens: no two threads write the same row, so no atomic increments are needed
    (the rows of frequent words are contended: with atomics the 2-thread speed-up of a
    sweep on IMDB at K = 100 was 1.63x, without them 1.86x, benchmarks/README.md).  Integer
    sums: the same for any number of threads.

    Checked first (ValueError, nothing written): the token layout is that of
    :func:`token_counts` (see :func:`sample_sweep`), every z is a topic < K, every word id is
    a row of Wout, and with ``sorted_words`` the word ids do increase within every document
    (an unsorted row would send a thread outside its block of rows)."""
    cdef Py_ssize_t D = indptr.shape[0] - 1
    cdef int K = <int> Wout.shape[1], V = <int> Wout.shape[0], r, b, nb, lo, hi, v, k, fails = 0
    cdef int64_t j, t, j0, j1, jlo, jhi, tq
    cdef Py_ssize_t d
    cdef int64_t* tb
    cdef int64_t* T = NULL
    if D < 0 or tokptr.shape[0] != D + 1 or indices.shape[0] != cnt.shape[0] \
            or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent shapes")
    if T_out is not None:
        if T_out.shape[0] != K:
            raise ValueError("T_out must have shape (K,)")
        if K > 0:
            T = &T_out[0]
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_topics(z, K)  # the columns of Wout's rows
    _check_word_ids(indices, V)  # the rows of Wout
    if sorted_words and not rows_sorted(indptr, indices):
        raise ValueError("sorted_words needs word ids increasing within every document")
    if V == 0 or K == 0:
        return
    if z.shape[0] == 0:
        if zero:
            memset(&Wout[0, 0], 0, (<size_t> V) * K * sizeof(int32_t))
        return
    nb = max(1, min(n_threads, V))
    with nogil:
        for b in prange(nb, schedule="static", chunksize=1, num_threads=nb):
            lo = <int> ((<int64_t> V * b) // nb)
            hi = <int> ((<int64_t> V * (b + 1)) // nb)
            tb = NULL
            if T != NULL:
                tb = <int64_t*> sc_thread_malloc(K * sizeof(int64_t))
                if tb == NULL:
                    # no scratch for the block's totals: its rows are neither cleared nor
                    # counted (MemoryError after the loop), not counted without their totals
                    fails += 1
                    continue
                memset(tb, 0, K * sizeof(int64_t))
            if zero and hi > lo:
                memset(&Wout[lo, 0], 0, (<size_t> (hi - lo)) * K * sizeof(int32_t))
            if sorted_words:
                for d in range(D):
                    j0 = indptr[d]
                    j1 = indptr[d + 1]
                    jlo = _first_at_least(indices, j0, j1, lo)
                    jhi = _first_at_least(indices, jlo, j1, hi)
                    if jlo == jhi:
                        continue
                    # the block's first token, counted from the nearer end of the document
                    if jlo - j0 <= j1 - jhi:
                        t = tokptr[d]
                        for j in range(j0, jlo):
                            t = t + cnt[j]
                    else:
                        t = tokptr[d + 1]
                        for j in range(jlo, j1):
                            t = t - cnt[j]
                    # tq: the first token of entry j + _COUNT_AHEAD, whose counts are
                    # prefetched (the increments land in rows far apart)
                    tq = t
                    for j in range(jlo, min(jlo + _COUNT_AHEAD, jhi)):
                        tq = tq + cnt[j]
                    for j in range(jlo, jhi):
                        if j + _COUNT_AHEAD < jhi:
                            for r in range(cnt[j + _COUNT_AHEAD]):
                                sc_prefetch(&Wout[indices[j + _COUNT_AHEAD], z[tq + r]], 1)
                            tq = tq + cnt[j + _COUNT_AHEAD]
                        _count_entry(&Wout[indices[j], 0], &z[0] + t, cnt[j], tb)
                        t = t + cnt[j]
            else:
                t = tokptr[0]
                for j in range(indptr[0], indptr[D]):
                    v = indices[j]
                    if v >= lo and v < hi:
                        _count_entry(&Wout[v, 0], &z[0] + t, cnt[j], tb)
                    t = t + cnt[j]
            if tb != NULL:
                with gil:
                    for k in range(K):
                        T[k] += tb[k]
                free(tb)
    if fails:
        raise MemoryError("could not allocate the counting scratch space")


cdef struct _RB:
    const int32_t* W      # (V, K) counts (counts mode) or NULL
    const float* w        # (V, K) fixed weights (weights mode) or NULL
    const double* inv     # (K,) 1 / (T_k + V beta) (counts mode)
    double beta
    int K


cdef inline double _rb_q(const _RB* r, int v, int k) noexcept nogil:
    """q_vk: (W_vk + beta) / (T_k + V beta), or the fixed weight w_vk."""
    if r.W != NULL:
        return (r.W[<int64_t> v * r.K + k] + r.beta) * r.inv[k]
    return r.w[<int64_t> v * r.K + k]


cdef inline double _rb_q_own(const _RB* r, int v, int k) noexcept nogil:
    """q_vk with one token of topic k taken out of W_vk and T_k (weights: unchanged)."""
    if r.W != NULL:
        return (r.W[<int64_t> v * r.K + k] - 1 + r.beta) / (1.0 / r.inv[k] - 1)
    return r.w[<int64_t> v * r.K + k]


cdef Py_ssize_t _rb_setup(_RB* r, const int32_t[:, ::1] W, const float[:, ::1] w,
                          const double[::1] inv_tot, double beta, Py_ssize_t K) except -1:
    """Fill r from exactly one of W (counts, with inv_tot) and w (fixed weights); returns V."""
    if (W.shape[0] > 0) == (w.shape[0] > 0):
        raise ValueError("give exactly one of W (counts) and w (weights)")
    r.beta = beta
    r.K = <int> K
    r.W = NULL
    r.w = NULL
    r.inv = NULL
    if W.shape[0] > 0:
        if W.shape[1] != K or inv_tot.shape[0] != K:
            raise ValueError("inconsistent shapes")
        r.W = &W[0, 0]
        r.inv = &inv_tot[0]
        return W.shape[0]
    if w.shape[1] != K:
        raise ValueError("inconsistent shapes")
    r.w = &w[0, 0]
    return w.shape[0]


def rb_word_mass(
    const int32_t[:, ::1] W,       # IN (V, K) counts, or (0, 0)
    const float[:, ::1] w,         # IN (V, K) fixed weights, or (0, 0)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta) of W (counts mode), or (0,)
    double beta,
    const double[::1] alpha,       # IN (K,)
    double[::1] A,                 # OUT (V,) sum_k alpha_k q_vk
    int n_threads,
):
    """A_v = sum_k alpha_k q_vk, the prior part of the normalizer of every token of word v
    (see :func:`rb_doc_part`)."""
    cdef _RB r
    cdef Py_ssize_t V = _rb_setup(&r, W, w, inv_tot, beta, alpha.shape[0]), v
    cdef int k
    cdef double acc
    if A.shape[0] != V:
        raise ValueError("inconsistent shapes")
    with nogil:
        for v in prange(V, schedule="static", num_threads=n_threads):
            acc = 0.0
            for k in range(r.K):
                acc = acc + alpha[k] * _rb_q(&r, <int> v, k)
            A[v] = acc


def rb_doc_part(
    const int64_t[::1] indptr,     # IN (D + 1,) CSR row pointers
    const int32_t[::1] indices,    # IN (nnz,) word ids
    const int32_t[::1] cnt,        # IN (nnz,) tokens per entry (>= 0)
    const int64_t[::1] tokptr,     # IN (D + 1,) token offsets of the documents
    const zint_t[::1] z,           # IN (n_tokens,) topic of every token, entry order
    const int32_t[:, ::1] W,       # IN (V, K) word-topic counts of z (counts mode), or (0, 0)
    const float[:, ::1] w,         # IN (V, K) fixed word weights (weights mode), or (0, 0)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta) of W (counts mode), or (0,)
    double beta,
    const double[::1] alpha,       # IN (K,) alpha_k > 0
    const double[::1] A,           # IN (V,) rb_word_mass
    double[:, ::1] out,            # INOUT (n, K) += the document part of words v0..v0+n-1
    double[::1] s,                 # INOUT (n,) += sum over the word's tokens of 1 / Z
    int v0,
    int n_threads,
):
    """The document part of the Rao-Blackwellized word-topic counts of the words v0 ..
    v0 + n - 1 (n = out.shape[0]; only their rows of W or w are read).

    The Rao-Blackwellized counts replace every token's sampled topic by its collapsed
    conditional given the other tokens' topics,

        R_vk = sum_{tokens i of word v} p(z_i = k | z_{-i}),
        p(z_i = k | z_{-i})  propto  (n_dk^{-i} + alpha_k) q_vk^{-i},

    with n_d the document's counts of z and, in counts mode, q_vk = (W_vk + beta) / (T_k + V
    beta) from the counts W of z, the token's own topic o taken out of n_d, W and T (q^{-i}
    differs from q at o only: q'_vo = (W_vo - 1 + beta) / (T_o - 1 + V beta)); in weights mode
    q = w is fixed and only n_d loses the token.  (R + beta) / (sum_v R_v + V beta) is the
    estimator of the topics of Papanikolaou et al. (2017): one sample's topics with the
    sampling noise of every token's assignment integrated out.

    With A_v = sum_k alpha_k q_vk, the normalizer of a token of entry (d, v) with own topic o
    is Z = A_v + sum_{k: n_dk > 0} n_dk q_vk - (n_do + alpha_o) q_vo + (n_do - 1 + alpha_o)
    q'_vo, its sum over the document's topics computed once per entry.  The token adds
    n_dk q_vk / Z to the document's topics k != o, (n_do - 1 + alpha_o) q'_vo / Z - alpha_o
    q_vo / Z to o (here, into ``out``), and alpha_k q_vk / Z to every topic k, which
    :func:`rb_smooth_part` adds once per word from s_v = sum of 1 / Z over the word's tokens.
    Cost O(topics in the document + tokens) per entry, plus one scan of z.

    Parallel over blocks of words: every word's sums are accumulated by one thread in
    document order, so the result is bit-identical for any number of threads (each thread
    scans all documents for the entries of its words).  The sums are float64 (a float32 sum
    over a frequent word's documents drifts and stops growing at 2**24).  In counts mode W
    must hold the counts of z (in the rows of v0 .. v0 + n - 1) and inv_tot their totals'.

    Checked first (ValueError, nothing written): the token layout is that of
    :func:`token_counts` (see :func:`sample_sweep`) and every z is a topic < K.
    """
    cdef _RB r
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef Py_ssize_t V = _rb_setup(&r, W, w, inv_tot, beta, alpha.shape[0])
    cdef int K = r.K, n = <int> out.shape[0], nb, b, lo, hi, k, i, na, v, o, c, fails = 0
    cdef int64_t j, t
    cdef int32_t* nd
    cdef int32_t* act
    cdef double* e
    cdef double z0, zz, ssum, qo, qo1, ao
    if out.shape[1] != K or A.shape[0] != V or s.shape[0] != n or v0 < 0 or v0 + n > V:
        raise ValueError("inconsistent shapes")
    if indices.shape[0] != cnt.shape[0] or D < 0 or tokptr.shape[0] != D + 1 \
            or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent token layout")
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_topics(z, K)  # n_dk, alpha_k and the columns of W, w and out
    if n == 0 or K == 0 or z.shape[0] == 0:
        return
    nb = max(1, min(n_threads, n))
    with nogil:
        for b in prange(nb, schedule="static", chunksize=1, num_threads=nb):
            lo = v0 + <int> ((<int64_t> n * b) // nb)
            hi = v0 + <int> ((<int64_t> n * (b + 1)) // nb)
            nd = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            act = <int32_t*> sc_thread_malloc(K * sizeof(int32_t))
            e = <double*> sc_thread_malloc(K * sizeof(double))
            if nd == NULL or act == NULL or e == NULL:
                fails += 1
            else:
                memset(nd, 0, K * sizeof(int32_t))
                for d in range(D):
                    na = 0
                    for t in range(tokptr[d], tokptr[d + 1]):
                        k = z[t]
                        if nd[k] == 0:
                            act[na] = k
                            e[k] = 0.0
                            na = na + 1
                        nd[k] += 1
                    t = tokptr[d]
                    for j in range(indptr[d], indptr[d + 1]):
                        v = indices[j]
                        if v < lo or v >= hi or cnt[j] <= 0:
                            t = t + cnt[j]
                            continue
                        z0 = A[v]
                        for i in range(na):
                            z0 = z0 + nd[act[i]] * _rb_q(&r, v, act[i])
                        ssum = 0.0
                        for c in range(cnt[j]):
                            o = z[t]
                            ao = alpha[o]
                            qo = _rb_q(&r, v, o)
                            qo1 = _rb_q_own(&r, v, o)
                            zz = 1.0 / (z0 - (nd[o] + ao) * qo + (nd[o] - 1 + ao) * qo1)
                            ssum = ssum + zz
                            e[o] = e[o] + zz * ((nd[o] - 1 + ao) * qo1 - (nd[o] + ao) * qo)
                            t = t + 1
                        s[v - v0] = s[v - v0] + ssum
                        for i in range(na):
                            k = act[i]
                            out[v - v0, k] = out[v - v0, k] + (
                                e[k] + nd[k] * _rb_q(&r, v, k) * ssum)
                            e[k] = 0.0
                    for i in range(na):
                        nd[act[i]] = 0
            free(nd)
            free(act)
            free(e)
    if fails:
        raise MemoryError("could not allocate the Rao-Blackwellization scratch space")


def rb_smooth_part(
    const int32_t[:, ::1] W,       # IN (V, K) counts, or (0, 0)
    const float[:, ::1] w,         # IN (V, K) fixed weights, or (0, 0)
    const double[::1] inv_tot,     # IN (K,) 1 / (T_k + V beta) of W (counts mode), or (0,)
    double beta,
    const double[::1] alpha,       # IN (K,)
    const double[::1] s,           # IN (n,) from rb_doc_part
    double[:, ::1] out,            # INOUT (n, K) += alpha_k q_vk s_v, v = v0 + row
    int v0,
    int n_threads,
):
    """The prior part of the Rao-Blackwellized counts of the words v0 .. v0 + n - 1,
    alpha_k q_vk s_v (see :func:`rb_doc_part`)."""
    cdef _RB r
    cdef Py_ssize_t V = _rb_setup(&r, W, w, inv_tot, beta, alpha.shape[0]), i
    cdef Py_ssize_t n = out.shape[0]
    cdef int k
    if s.shape[0] != n or out.shape[1] != r.K or v0 < 0 or v0 + n > V:
        raise ValueError("inconsistent shapes")
    with nogil:
        for i in prange(n, schedule="static", num_threads=n_threads):
            for k in range(r.K):
                out[i, k] = out[i, k] + (
                    alpha[k] * _rb_q(&r, <int> (v0 + i), k) * s[i])


def content_keys(
    const int64_t[::1] indptr,
    const int32_t[::1] indices,
    const int32_t[::1] cnt,
):
    """A 64-bit hash of every document's (word, count) entries: the stream key of fold-in, so
    a document's draws do not depend on its position in the matrix."""
    cdef Py_ssize_t D = indptr.shape[0] - 1, d
    cdef int64_t j
    cdef uint64_t h, s
    out = np.empty(D, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    with nogil:
        for d in range(D):
            h = 0x243F6A8885A308D3ULL
            for j in range(indptr[d], indptr[d + 1]):
                if cnt[j] <= 0:
                    continue
                s = h ^ <uint64_t> indices[j]
                h = sc_splitmix64(&s)
                s = h ^ <uint64_t> cnt[j]
                h = sc_splitmix64(&s)
            o[d] = h
    return out


def uniform_stream(uint64_t seed, uint64_t sweep, uint64_t key, Py_ssize_t n):
    """The first n uniforms of the stream keyed by (seed, sweep, key) (for reference code)."""
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    cdef uint64_t state = sc_stream_key(seed, sweep, key)
    cdef Py_ssize_t i
    for i in range(n):
        o[i] = sc_uniform(&state)
    return out
