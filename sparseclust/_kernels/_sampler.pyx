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
Dense path (small K, or the documents of many topics, ``dense_min_topics``): the K products (alpha_k +
n_dk) w_vk, their cumulative sum and a binary search; in LIVE counts mode the products are
summed in blocks of 16 topics and the draw picks a block, then a topic within it
(``_dense_fill`` and ``_dense_pick`` of ``_draws.pxd``).

Counts path (``sample_sweep_counts``, stochastic EM only): with w_vk = (W_vk + beta) / (T_k + V
beta) given by the frozen counts, (n_dk + alpha_k) w_vk splits exactly into n_dk W_vk / (T_k +
V beta) (topics in both the document and the word's non-zero list, scanned over the shorter
list), n_dk beta / (T_k + V beta) (the document's topics, once per document), alpha_k W_vk /
(T_k + V beta) (an alias table over word v's non-zero counts) and alpha_k beta / (T_k + V beta)
(one alias table over K shared by all words); ``build_word_tables`` (``_sem_tables.pyx``)
builds them per sweep from the read buffer, so no (V, K) weight or alias table exists.

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

Metropolis-Hastings (LIVE counts, ``mh_steps`` > 0, ``StochasticEMLDA(sampler='metropolis')``):
instead of an exact draw, cycles of a document proposal (the topic of another token of the
document) and a word proposal (word v's table and the smoothing table above), each accepted
by the Metropolis-Hastings ratio of the live conditional (``_draw_mh``): O(1) per token.  An
entry's first proposals are drawn ahead of it (``_Ahead``) so that the memory they read is
prefetched.

Random stream: each document has its own SplitMix64 stream keyed by (seed, sweep, key[d])
(``sc_sampler.h``), where key[d] is the document index for training and a hash of the
document's content for fold-in; so the draws -- and with them the assignments and counts -- are
bit-identical for any number of threads and any scheduling.

Split word tables (LIVE, general weights w_vk = s_v e_k + x_vk with x_vk > 0 on few topics, the
sampled local step's lazily scaled statistics): the word part is the shared alias table over
alpha_k e_k (scaled by s_v) plus word v's table over its listed topics, and the document part
reads w_vk as s_v e_k plus the excess x_vk found by the rank of k in the word's bit set
(``split_word_tables`` of ``_gibbs_tables.pyx``): no (V, K) table exists and a token costs
O(topics of the document).

Output counts: the word-topic counts of the new assignments are incremented into ``Wout``
(V, K) int32 with integer (atomic) additions: their sum does not depend on the order of the
increments.  Or the assignments of every saved sweep are copied to ``zsave`` and counted word
by word (``count_word_topics`` of ``_gibbs_tables.pyx``), with no (V, K) array.  Document
outputs (``acc`` rows, ``ll_doc``) are written by the thread that owns the document.

The helpers shared with the other sampler modules (random streams, alias tables, the checks
of the token layout) are in ``_sampling.pxd``; the draw of one token is in ``_draws.pxd``.
"""

from cython.parallel cimport parallel, prange
from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t
from libc.stdlib cimport free
from libc.string cimport memset
from scipy.special.cython_special cimport gammaln

from sparseclust._kernels._draws cimport (
    _Args, _alias_slot, _dense_fill, _dense_patch, _dense_row, _dense_set, _dl_add,
    _doc_word_part, _draw_live_counts, _draw_live_entry, _draw_one, _frozen_keep, _nd_add,
    _nd_remove, _smooth_draw, _word_draw, _word_part_draw, _word_mass,
)
from sparseclust._kernels._parallel cimport sc_set_alloc_fail_thread, sc_thread_malloc
from sparseclust._kernels._sampling cimport (
    _LG_TAB, _alias_row, _check_layout, _check_topics, _check_word_ids, _check_word_types,
    _lg_table, _scan, _search, sc_atomic_add_i32, sc_prefetch, sc_stream_key, sc_uniform,
    tab_t, zint_t,
)

import numpy as np
import scipy.special as _sps

#: sampling modes
FROZEN = 0
LIVE = 1


def _fail_thread_allocations(int thread):
    """Make the per-thread buffer allocations of OpenMP thread ``thread`` fail (-1: none,
    -2: every thread).

    For tests of the out-of-memory path only.
    """
    sc_set_alloc_fail_thread(thread)

cdef enum:
    # the live counts path prefetches the next entry's whole row of W up to this many topics
    _PREFETCH_K = 256
    # Metropolis-Hastings: proposals of an entry's first cycles drawn ahead (see _Ahead)
    _MH_AHEAD = 4


cdef struct _Ahead:
    # Metropolis-Hastings proposals drawn before their entry, so that the memory they read
    # (word-table slots, counts of W at the proposed topics) is fetched while earlier entries
    # are sampled.  The word proposal does not depend on the chain's state; the document
    # proposal's uniform does not either (the topic it selects is read when it is used).
    double* wu2    # word-proposal uniforms of entry j + 2, in [0, Q_v + Q_s): slots prefetched
    int nwu2
    double* wt     # word-proposal topics of the current entry j
    int nwt
    int iwt
    double* wtn    # of entry j + 1, resolved from its uniforms at entry j: W prefetched
    int nwtn
    double* du     # document-proposal uniforms in [0, 1) of the current entry
    int ndu
    int idu
    double* dun    # of entry j + 1
    int ndun


cdef inline double _mh_weight(const _Args* a, const int32_t* Wv, const int32_t* dl, int k,
                              int old) noexcept nogil:
    """(W_vk + e_k + beta) / (T_k + e_k + V beta): e_k = dl[k], the entry's change, when dl is
    not NULL, else -[k = old] with ``exclude_own`` (when W_vo > 0), else 0."""
    cdef int e = 0
    if dl != NULL:
        e = dl[k]
    elif k == old and a.exclude_own and Wv[k] > 0:
        e = -1
    if e == 0:
        return (Wv[k] + a.beta) * a.inv_tot[k]
    return (Wv[k] + e + a.beta) / (a.tot[k] + e)


cdef inline int _word_proposal(const _Args* a, int v, double u) noexcept nogil:
    """The word proposal at u in [0, Q_v + Q_s): word v's table, then the smoothing table."""
    cdef double qw = a.Qw[v]
    if u < qw:
        return _word_draw(a, v, u / qw)
    return _smooth_draw(a, (u - qw) / a.Qs)


cdef inline int _draw_mh(const _Args* a, const int32_t* nd, const zint_t* z, int64_t t0,
                         int64_t t1, int64_t t, int v, int old, const int32_t* dl,
                         _Ahead* ah, uint64_t* state) noexcept nogil:
    """``a.mh_steps`` Metropolis-Hastings cycles for token t of word v (LIVE counts, equal
    alphas) from its previous topic ``old``, targeting the conditional of _draw_live_counts /
    _draw_live_entry, pi(k) propto (n_dk + alpha) g_k with g_k = (W_vk + e_k + beta) / (T_k +
    e_k + V beta) (see _mh_weight), nd the document's counts without the token.

    A cycle proposes twice (Yuan et al. 2015):
    - from the document, q(k) propto n_dk + alpha: the topic of one of the document's other
      tokens drawn uniformly (their current topics are the counts nd), or with probability
      K alpha / (N_d - 1 + K alpha) a uniform topic; accepted with min(1, g_k / g_s);
    - from the word, q(k) propto (W_vk + beta) / (T_k + V beta) = f_k: word v's alias table
      and the shared smoothing table of the counts path; accepted with
      min(1, (n_dk + alpha) g_k f_s / ((n_ds + alpha) g_s f_k)).
    Each proposal is O(1), and both leave pi invariant (detailed balance), so the chain
    targets the exact conditional; from ``old`` a few cycles are an approximate draw.
    The first proposals of the entry come from ``ah`` (drawn ahead), the rest from the
    stream."""
    cdef int K = a.K, s = old, k, cyc
    cdef const int32_t* Wv = a.W + <int64_t> v * K
    cdef double alpha = a.alpha[0], no = <double> (t1 - t0 - 1)
    cdef double ws, wk, ps, pk, u, num, den
    cdef int64_t i
    ws = _mh_weight(a, Wv, dl, s, old)
    ps = nd[s] + alpha
    for cyc in range(a.mh_steps):
        # document proposal
        if ah.idu < ah.ndu:
            u = ah.du[ah.idu] * (no + a.sum_alpha)
            ah.idu += 1
        else:
            u = sc_uniform(state) * (no + a.sum_alpha)
        if u < no:
            i = t0 + <int64_t> u
            if i >= t:
                i += 1
            if i >= t1:
                i = t1 - 1
            k = z[i]
        else:
            k = <int> ((u - no) / alpha)
            if k >= K:
                k = K - 1
        if k != s:
            wk = _mh_weight(a, Wv, dl, k, old)
            if wk >= ws or sc_uniform(state) * ws < wk:
                s = k
                ws = wk
                ps = nd[k] + alpha
        # word proposal
        if ah.iwt < ah.nwt:
            k = <int> ah.wt[ah.iwt]
            ah.iwt += 1
        else:
            k = _word_proposal(a, v, sc_uniform(state) * (a.Qw[v] + a.Qs))
        if k != s:
            wk = _mh_weight(a, Wv, dl, k, old)
            pk = nd[k] + alpha
            num = pk * wk * ((Wv[s] + a.beta) * a.inv_tot[s])
            den = ps * ws * ((Wv[k] + a.beta) * a.inv_tot[k])
            if num >= den or sc_uniform(state) * den < num:
                s = k
                ws = wk
                ps = pk
    return s


cdef inline void _mh_ahead(const _Args* a, _Ahead* ah, const zint_t* z, int64_t j,
                           int64_t j1, int64_t tn, int64_t t0, int64_t t1,
                           uint64_t* state) noexcept nogil:
    """At entry j (before its tokens; every entry, empty ones too): the proposals drawn for it
    become current; entry j + 1's word proposals are resolved from their uniforms (their
    slots are in the cache by now) and its document uniforms drawn, and the counts of W
    they, and its tokens' previous topics (from ``tn``, its first token), read are
    prefetched; entry j + 2's word uniforms are drawn and their table slots prefetched."""
    cdef double* sw
    cdef int p, n, vn, slot, k, K = a.K
    cdef double u, frac, no = <double> (t1 - t0 - 1)
    cdef int64_t off, i
    cdef const int32_t* Wn
    sw = ah.wt
    ah.wt = ah.wtn
    ah.wtn = sw
    ah.nwt = ah.nwtn
    ah.iwt = 0
    sw = ah.du
    ah.du = ah.dun
    ah.dun = sw
    ah.ndu = ah.ndun
    ah.idu = 0
    ah.nwtn = 0
    ah.ndun = 0
    if j + 1 < j1:
        vn = a.indices[j + 1]
        Wn = a.W + <int64_t> vn * K
        for p in range(ah.nwu2):
            k = _word_proposal(a, vn, ah.wu2[p])
            ah.wtn[p] = k
            if K > _PREFETCH_K:
                sc_prefetch(Wn + k, 1)
        ah.nwtn = ah.nwu2
        n = a.cnt[j + 1]
        if K > _PREFETCH_K:  # (else the whole row is prefetched, see _doc)
            for p in range(n if n < _MH_AHEAD else _MH_AHEAD):
                sc_prefetch(Wn + z[tn + p], 1)
        n = n * a.mh_steps
        if n > _MH_AHEAD:
            n = _MH_AHEAD
        for p in range(n):
            ah.dun[p] = sc_uniform(state)
            if K > _PREFETCH_K:
                u = ah.dun[p] * (no + a.sum_alpha)
                if u < no:
                    i = t0 + <int64_t> u
                    k = z[i if i < t1 else t1 - 1]
                else:
                    k = <int> ((u - no) / a.alpha[0])
                    k = k if k < K else K - 1
                sc_prefetch(Wn + k, 1)
        ah.ndun = n
    ah.nwu2 = 0
    if j + 2 < j1:
        vn = a.indices[j + 2]
        n = a.cnt[j + 2] * a.mh_steps
        if n > _MH_AHEAD:
            n = _MH_AHEAD
        off = a.wptr[vn]
        for p in range(n):
            u = sc_uniform(state) * (a.Qw[vn] + a.Qs)
            ah.wu2[p] = u
            if u < a.Qw[vn]:
                slot = _alias_slot(u / a.Qw[vn], a.wlen[vn], &frac)
                sc_prefetch(a.wprob + off + slot, 1)
                if a.wide:
                    sc_prefetch(<const int32_t*> a.walias + off + slot, 1)
                    sc_prefetch(<const int32_t*> a.wtop + off + slot, 1)
                else:
                    sc_prefetch(<const uint16_t*> a.walias + off + slot, 1)
                    sc_prefetch(<const uint16_t*> a.wtop + off + slot, 1)
        ah.nwu2 = n
        if j + 3 < j1:
            # the word data the next call's draws for entry j + 3 read
            vn = a.indices[j + 3]
            sc_prefetch(a.Qw + vn, 1)
            sc_prefetch(a.wptr + vn, 1)
            sc_prefetch(a.wlen + vn, 1)


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
    # Metropolis-Hastings proposals drawn ahead: five buffers after cum's 2 (K + 1) doubles;
    # after them the entry's word weights of the dense live draws (K doubles, _dense_row),
    # whose products and block totals take cum[0:K + K / 16 + 1]
    cdef double* wrow = cum + 2 * (K + 1) + 5 * _MH_AHEAD
    # the live counts path's dense draws: every document (``dense``), or one that holds many
    # topics at the start of the sweep (set below, once its counts are known)
    cdef bint dense = a.dense
    cdef _Ahead ah
    cdef bint mh_on
    ah.wu2 = cum + 2 * (K + 1)
    ah.wt = ah.wu2 + _MH_AHEAD
    ah.wtn = ah.wt + _MH_AHEAD
    ah.du = ah.wtn + _MH_AHEAD
    ah.dun = ah.du + _MH_AHEAD
    if t1 == t0:
        if a.ll_doc != NULL:
            a.ll_doc[d] = 0.0
        return 0
    if not a.seq_init:
        for t in range(t0, t1):
            _nd_add(nd, act, pos, &na, z[t])
    if a.dense_min_topics > 0 and na >= a.dense_min_topics:
        dense = True
    state = sc_stream_key(a.seed, a.sweep, key)
    cb = cum + (K + 1)
    for it in range(a.n_inner):
        t = t0
        sb = -1.0  # the document's beta part, computed at its first entry
        # Metropolis-Hastings cycles: in LIVE counts mode, for tokens with a previous topic
        mh_on = a.mh_steps > 0 and a.counts and a.mode == 1 and (it > 0 or not a.seq_init)
        ah.nwu2 = ah.nwt = ah.nwtn = ah.ndu = ah.ndun = 0
        if a.counts and a.mode == 1:
            # sum_k n_dk / (T_k + V beta), updated token by token (recomputed every inner sweep)
            sdb = 0.0
            for i in range(na):
                sdb += nd[act[i]] * a.inv_tot[act[i]]
        for j in range(j0, j1):
            c = a.cnt[j]
            if mh_on:
                _mh_ahead(a, &ah, z, j, j1, t + c, t0, t1, &state)
            if c <= 0:
                continue
            v = a.indices[j]
            if a.mode == 1 and a.counts:
                if j + 1 < j1:
                    # the next entry's row of the read buffer, whose cache lines the scan of
                    # the document's topics reads in no particular order: all of it for small
                    # K, else the document's topics' counts
                    Wv = a.W + <int64_t> a.indices[j + 1] * K
                    if K <= _PREFETCH_K or dense:
                        sc_prefetch(Wv, K * sizeof(int32_t))
                    elif a.mh_steps > 0:
                        pass  # (a few counts of the row, at topics known only when drawn)
                    elif not dense and a.wlen[a.indices[j + 1]] < na:
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
                if dense and a.live_entry and c > 1:
                    # the entry's weights and the products of its draws, kept up to date
                    # token by token: a token changes n_d and the weights at two topics only
                    _dense_row(a, v, wrow)
                    _dense_fill(a, nd, wrow, cum)
                for r in range(c):
                    if it > 0 or not a.seq_init:
                        old = z[t]
                        _nd_remove(nd, act, pos, &na, old)
                        sdb -= a.inv_tot[old]
                        if na == 0:
                            sdb = 0.0
                    else:
                        # sequential start: the token has no topic yet and W, T do not count
                        # it (z[t] is not read); it sees the document's earlier tokens (and,
                        # with ``live_entry``, its entry's earlier tokens in W and T)
                        old = -1
                    if a.live_entry and c > 1:
                        # (one token: the own-topic rejection below, the same draws)
                        if old >= 0:
                            _dl_add(dl, dmark, dset, &nds, old, -1)
                            if dense:
                                _dense_patch(a, v, dl, old, wrow)
                                _dense_set(a, nd, wrow, cum, old)
                        if mh_on:
                            k = _draw_mh(a, nd, z, t0, t1, t, v, old, dl, &ah, &state)
                        else:
                            k = _draw_live_entry(a, nd, act, na, sdb, cum, itop, v, dl, dset,
                                                 nds, etop, dense, &state)
                        _dl_add(dl, dmark, dset, &nds, k, 1)
                        if dense:
                            _dense_patch(a, v, dl, k, wrow)
                    elif mh_on:
                        k = _draw_mh(a, nd, z, t0, t1, t, v, old, NULL, &ah, &state)
                    else:
                        k = _draw_live_counts(a, nd, act, na, sdb, cum, itop, v, old, dense,
                                              &state)
                    _nd_add(nd, act, pos, &na, k)
                    if dense and a.live_entry and c > 1:
                        _dense_set(a, nd, wrow, cum, k)
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
                # token t's saved sweeps are the row t of zsave: a document writes one
                # contiguous region of it
                j = it - a.n_burn
                for t in range(t0, t1):
                    a.zsave[t * (a.n_inner - a.n_burn) + j] = z[t]
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
        cum = <double*> sc_thread_malloc((3 * K + 2 + 5 * _MH_AHEAD) * sizeof(double))
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


cdef int _check_outputs(double[:, ::1] acc, int32_t[:, ::1] Wout, double[::1] ll_doc,
                        Py_ssize_t D, Py_ssize_t V, int K) except -1:
    """ValueError unless every output given (a non-empty first axis) has its shape."""
    if acc.shape[0] > 0 and (acc.shape[0] != D or acc.shape[1] != K):
        raise ValueError("acc must have shape (D, K)")
    if Wout.shape[0] > 0 and (Wout.shape[0] != V or Wout.shape[1] != K):
        raise ValueError("Wout must have shape (V, K)")
    if ll_doc.shape[0] > 0 and ll_doc.shape[0] != D:
        raise ValueError("ll_doc must have shape (D,)")
    return 0


cdef int _check_tokens(const int64_t[::1] indptr, const int32_t[::1] indices,
                       const int32_t[::1] cnt, const int64_t[::1] tokptr, const zint_t[::1] z,
                       int V, int K, bint read_z) except -1:
    """The checks of the tokens before a sweep: their layout (:func:`_check_layout`), every
    entry's word id a row of the V weights or counts, and, when z is read on entry, every z a
    topic < K."""
    _check_layout(indptr, cnt, tokptr, z.shape[0])
    _check_word_ids(indices, V)
    if read_z:
        _check_topics(z, K)
    return 0


cdef object _set_common(_Args* a, const int64_t[::1] indptr, const int32_t[::1] indices,
                        const int32_t[::1] cnt, const int64_t[::1] tokptr, Py_ssize_t n_tok,
                        const double[::1] alpha, bint lg_table, int mode, bint dense,
                        int n_inner, int n_burn, uint64_t seed, uint64_t sweep,
                        double[:, ::1] acc, int32_t[:, ::1] Wout, double[::1] ll_doc,
                        int n_threads):
    """Set the arguments that both sweeps take alike (once their inputs are checked).  With
    ``lg_table`` and equal alphas, the per-topic terms of log p(z_d | alpha) come from a
    lookup table.  Returns the arrays ``a`` points into, which the caller holds during the
    sweep."""
    lg = np.ascontiguousarray(_sps.gammaln(np.asarray(alpha, dtype=np.float64)))
    lgt = np.empty(_LG_TAB)
    cdef const double[::1] lg_alpha = lg
    cdef double[::1] lgtv = lgt
    a.indptr = &indptr[0]
    a.indices = &indices[0] if indices.shape[0] > 0 else NULL
    a.cnt = &cnt[0] if cnt.shape[0] > 0 else NULL
    a.tokptr = &tokptr[0]
    a.n_tok = n_tok
    a.alpha = &alpha[0]
    a.lg_alpha = &lg_alpha[0]
    if lg_table and np.all(np.asarray(alpha) == alpha[0]):
        _lg_table(alpha[0], &lgtv[0])
        a.lga_tab = &lgtv[0]
    a.sum_alpha = float(np.sum(alpha))
    a.K = <int> alpha.shape[0]
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
    return lg, lgt


cdef int _set_split(_Args* a, split, int K) except -1:
    """Point ``a`` at the split word tables (a :class:`SplitTables`), after checking their
    shapes against each other and K; returns the number of words."""
    cdef const int64_t[::1] wptr = split.wptr
    cdef const int32_t[::1] wlen = split.wlen
    cdef const int32_t[::1] wtop = split.wtop
    cdef const float[::1] wx = split.wx
    cdef const float[::1] wprob = split.wprob
    cdef const int32_t[::1] walias = split.walias
    cdef const double[::1] Qw = split.Qw
    cdef const double[::1] sv = split.sv
    cdef const int32_t[:, ::1] wpre = split.wpre
    cdef const int64_t[::1] gcol = split.gcol
    cdef const uint64_t[:, ::1] bits = split.bits
    cdef const double[::1] e0 = split.e0
    cdef const float[::1] sprob = split.sprob
    cdef const int32_t[::1] salias = split.salias
    cdef double Qs = float(split.Qs)
    cdef int V = <int> wlen.shape[0]
    if (wptr.shape[0] != V + 1 or Qw.shape[0] != V or sv.shape[0] != V
            or gcol.shape[0] != V or wpre.shape[0] != V
            or wpre.shape[1] != bits.shape[1] or bits.shape[1] * 64 < K
            or e0.shape[0] != K or sprob.shape[0] != K or salias.shape[0] != K
            or wtop.shape[0] != wprob.shape[0] or wtop.shape[0] != walias.shape[0]
            or wx.shape[0] != wtop.shape[0] + 1 or wptr[V] > wtop.shape[0]
            or not Qs > 0.0):
        raise ValueError("inconsistent split word tables")
    _check_word_types(gcol, bits.shape[0])
    # (the tables stay alive: ``split`` is held by the caller during the sweep)
    a.wptr = &wptr[0]
    a.wlen = &wlen[0] if V > 0 else NULL
    a.wtop = <const void*> &wtop[0] if wtop.shape[0] > 0 else NULL
    a.wprob = &wprob[0] if wprob.shape[0] > 0 else NULL
    a.walias = <const void*> &walias[0] if walias.shape[0] > 0 else NULL
    a.wide = 1
    a.Qw = &Qw[0] if V > 0 else NULL
    a.sprob = &sprob[0]
    a.salias = &salias[0]
    a.Qs = Qs
    a.sv = &sv[0] if V > 0 else NULL
    a.wx = &wx[0]
    a.e0 = &e0[0]
    a.bits = &bits[0, 0] if bits.shape[0] > 0 else NULL
    a.gcol = &gcol[0] if V > 0 else NULL
    a.wpre = &wpre[0, 0] if V > 0 else NULL
    a.nw = <int> bits.shape[1]
    return V


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
                                   # (sparse path without alias tables: the word part is
                                   # drawn by a scan of w's row)
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
    zsave=None,                    # OUT int32 (n_tokens, n_inner - n_burn) or None
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

    ``zsave`` receives the assignments of every saved inner sweep (row t: token t of z;
    column s: sweep n_burn + s): the word-topic counts without a (V, K) table
    (:func:`count_word_topics`).

    Returns the number of tokens whose topic changed in the last inner sweep.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1
    cdef int K = <int> alpha.shape[0], V = <int> w.shape[0]
    cdef int32_t[:, ::1] zs
    cdef _Args a
    memset(&a, 0, sizeof(_Args))
    if keys.shape[0] != D or tokptr.shape[0] != D + 1:
        raise ValueError("inconsistent shapes")
    if indices.shape[0] != cnt.shape[0] or tokptr[D] != z.shape[0]:
        raise ValueError("inconsistent token layout")
    if split is not None:
        if dense or mode != 1:
            raise ValueError("split word tables are for the LIVE sparse path")
        V = _set_split(&a, split, K)
    else:
        if w.shape[1] != K:
            raise ValueError("inconsistent shapes")
        if not dense and not (
                Q.shape[0] == V
                and ((prob.shape[0] == V and prob.shape[1] == K and alias.shape[0] == V
                      and alias.shape[1] == K)
                     or (prob.shape[0] == 0 and alias.shape[0] == 0))):
            raise ValueError("the sparse path needs the alias tables of w, or none and Q")
        a.w = &w[0, 0] if V > 0 else NULL
        if not dense and V > 0:
            if prob.shape[0] > 0:
                a.prob = &prob[0, 0]
                a.alias = &alias[0, 0]
            a.Q = &Q[0]
    if mode not in (0, 1) or n_inner < 1 or n_burn < 0:
        raise ValueError("bad mode, n_inner or n_burn")
    if seq_init and mode != 1:
        raise ValueError("seq_init needs LIVE mode")
    _check_outputs(acc, Wout, ll_doc, D, V, K)
    _check_tokens(indptr, indices, cnt, tokptr, z, V, K, not seq_init)  # z read on entry
    if zsave is not None:
        zs = zsave
        if zs.shape[1] != max(n_inner - n_burn, 0) or zs.shape[0] != z.shape[0]:
            raise ValueError("zsave must have shape (n_tokens, n_inner - n_burn)")
        if zs.shape[0] > 0 and zs.shape[1] > 0:
            a.zsave = &zs[0, 0]
    held = _set_common(&a, indptr, indices, cnt, tokptr, z.shape[0], alpha, mode == 0, mode,
                       dense, n_inner, n_burn, seed, sweep, acc, Wout, ll_doc, n_threads)
    a.seq_init = seq_init
    return _run_docs(&a, z, keys, n_threads)


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
    bint seq_init=False,           # LIVE only: z is not read, every token drawn given the
                                   # document's earlier tokens and W (see below)
    int mh_steps=0,                # LIVE, not dense, equal alphas: Metropolis-Hastings cycles
                                   # per token instead of exact draws (see below)
    int dense_min_topics=0,        # LIVE, exact draws: documents whose assignments on entry
                                   # hold at least this many topics take the dense path (0:
                                   # none; see below)
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
    all K topics per token (FROZEN: per entry) from W directly.  ``dense_min_topics`` > 0
    (LIVE, exact draws) gives the documents whose assignments on entry hold at least that many
    distinct topics the dense draws and the others the sparse path: a sparse draw costs
    O(topics of the document), a dense one O(K) (in blocks, see ``_dense_pick``).  A long
    document holds most topics in the first sweeps and fewer as its assignments concentrate,
    so its path can change from sweep to sweep.  The choice depends on the document alone, so
    the draws stay thread-invariant.  With ``seq_init`` no topic is held on entry: the
    sparse path.

    Checked before the sweep (ValueError): the token layout is that of :func:`token_counts`
    (as in :func:`sample_sweep`), every entry's word id is a row of W (also for entries with
    no tokens) and every z is a topic < K (z is read on entry in both modes).

    ``seq_init`` (LIVE only; the sequential start of ``StochasticEMLDA(init='sequential')``):
    z is not read on entry and W, T count none of the documents' tokens; the first inner
    sweep draws every token given the topics of the tokens before it in its document,
    p(z_dn = k) propto (alpha_k + sum_{m < n} [z_dm = k]) (W_vk + e_k + beta) / (T_k + e_k
    + V beta), e the new topics of the entry's earlier tokens with ``live_entry`` (else 0),
    and every token counts as changed.

    ``mh_steps`` > 0 (LIVE): every token with a previous topic runs that many
    Metropolis-Hastings cycles from it instead of an exact draw, each cycle a proposal from
    the document's other tokens and one from the word's tables, with the same target
    conditional (``_draw_mh``): O(1) per token whatever the topics of the document (the
    tables are those of the sparse path).  The sequential start's first sweep draws exactly.

    Returns the number of tokens whose topic changed in the last inner sweep.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1
    cdef int K = <int> W.shape[1], V = <int> W.shape[0]
    cdef _Args a
    if mh_steps < 0:
        raise ValueError("mh_steps must be >= 0")
    if mh_steps > 0 and (mode != 1 or dense):
        raise ValueError("mh_steps needs mode=LIVE and the tables of the sparse path")
    if dense_min_topics < 0 or (dense_min_topics > 0 and (mode != 1 or mh_steps > 0)):
        raise ValueError("dense_min_topics must be >= 0, and > 0 only with mode=LIVE and "
                         "exact draws")
    if mh_steps > 0 and K > 0 and np.ptp(np.asarray(alpha)) != 0:
        raise ValueError("mh_steps needs equal alphas")
    if mode not in (0, 1):
        raise ValueError("bad mode")
    if seq_init and mode != 1:
        raise ValueError("seq_init needs LIVE mode")
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
    _check_outputs(acc, Wout, ll_doc, D, V, K)
    if K == 0 or not (dense or Qs > 0):
        raise ValueError("the smoothing mass must be positive")
    _check_tokens(indptr, indices, cnt, tokptr, z, V, K, not seq_init)  # z read on entry
    memset(&a, 0, sizeof(_Args))
    # equal alphas (stochastic EM): the per-topic terms of log p(z_d | alpha) from a table
    held = _set_common(&a, indptr, indices, cnt, tokptr, z.shape[0], alpha, True, mode,
                       dense, n_inner, n_burn, seed, sweep, acc, Wout, ll_doc, n_threads)
    a.counts = 1
    a.exclude_own = exclude_own
    a.live_entry = live_entry
    a.seq_init = seq_init
    a.mh_steps = mh_steps
    a.dense_min_topics = 0 if dense else dense_min_topics
    a.W = &W[0, 0] if V > 0 else NULL
    a.inv_tot = &inv_tot[0]
    tot_ = np.ascontiguousarray(1.0 / np.asarray(inv_tot))
    cdef const double[::1] totv = tot_
    a.tot = &totv[0]
    a.beta = beta
    a.Qs = Qs
    a.wide = tab_t is int32_t
    if not dense:
        a.wptr = &wptr[0]
        a.wlen = &wlen[0] if V > 0 else NULL
        a.wtop = <const void*> &wtop[0] if wtop.shape[0] > 0 else NULL
        a.wprob = &wprob[0] if wprob.shape[0] > 0 else NULL
        a.walias = <const void*> &walias[0] if walias.shape[0] > 0 else NULL
        a.Qw = &Qw[0] if V > 0 else NULL
        a.sprob = &sprob[0]
        a.salias = &salias[0]
    return _run_docs(&a, z, keys, n_threads)


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
