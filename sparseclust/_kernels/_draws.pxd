# SPDX-License-Identifier: BSD-3-Clause
# The arguments of a sweep of _sampler.pyx and the draw of one token's topic from them: the
# alias tables of the weights path, the split word tables, and the four parts of the counts
# path with its live and own-topic corrections (see _sampler.pyx's docstring).  Inline, for
# the document loop of _sampler.pyx only.

from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t

from sparseclust._kernels._sampling cimport _scan, _search, sc_popcount64, sc_uniform, tab_t


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
    int32_t* zsave                 # (n_tokens, n_saved) the topics of every saved sweep, or NULL
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
    int mh_steps                   # counts path, LIVE: Metropolis-Hastings cycles per token
                                   # (0: exact draws), see _draw_mh of _sampler.pyx
    int dense_min_topics           # counts path, LIVE, not dense: documents that hold at least
                                   # this many topics take the dense draws (0: none)


cdef inline int _alias_slot(double x, int n, double* frac) noexcept nogil:
    """The slot i of an alias table of n entries in which x uniform in [0, 1) falls, and
    ``*frac`` = x n - i, the position within the slot that the slot's probability decides."""
    cdef double y = x * n
    cdef int i
    if y < 0.0:
        y = 0.0
    i = <int> y
    if i >= n:
        i = n - 1
    frac[0] = y - i
    return i


cdef inline int _alias_pick(const float* prob, const int32_t* alias, int n,
                            double x) noexcept nogil:
    """A draw from the alias table (prob, alias) of n topics, x uniform in [0, 1)."""
    cdef double frac
    cdef int i = _alias_slot(x, n, &frac)
    if frac < prob[i]:
        return i
    return alias[i]


cdef inline int _alias_draw(const _Args* a, int v, double x) noexcept nogil:
    """Draw from word v's alias table with x uniform in [0, 1)."""
    cdef int64_t row = <int64_t> v * a.K
    return _alias_pick(a.prob + row, a.alias + row, a.K, x)


cdef inline int _wt(const _Args* a, int64_t i) noexcept nogil:
    """Topic i of the words' sparse tables."""
    if a.wide:
        return (<const int32_t*> a.wtop)[i]
    return (<const uint16_t*> a.wtop)[i]


cdef inline int _word_draw(const _Args* a, int v, double x) noexcept nogil:
    """Draw from word v's sparse alias table (its topics with W_vk > 0), x uniform in [0, 1)."""
    cdef int64_t off = a.wptr[v]
    cdef double frac
    cdef int i = _alias_slot(x, a.wlen[v], &frac)
    if frac < a.wprob[off + i]:
        return _wt(a, off + i)
    if a.wide:
        return (<const int32_t*> a.walias)[off + i]
    return (<const uint16_t*> a.walias)[off + i]


cdef inline int _smooth_draw(const _Args* a, double x) noexcept nogil:
    """Draw from the shared alias table over alpha_k beta / (T_k + V beta)."""
    return _alias_pick(a.sprob, a.salias, a.K, x)


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


cdef inline int _scan_word_draw(const _Args* a, int v, double u) noexcept nogil:
    """A draw from the word part alpha_k w_vk by a scan of word v's K weights, u uniform in
    [0, Q[v]): the first topic whose cumulative weight exceeds u (the last topic of positive
    weight where rounding leaves u at or past the scan's total)."""
    cdef const float* wv = a.w + <int64_t> v * a.K
    cdef double s = 0.0, x
    cdef int k, last = 0
    for k in range(a.K):
        x = a.alpha[k] * wv[k]
        s += x
        if x > 0.0:
            last = k
            if s > u:
                return k
    return last


cdef inline int _word_part_draw(const _Args* a, int v, double u) noexcept nogil:
    """A draw from the word part alpha_k w_vk, u uniform in [0, _word_mass(a, v)). Split
    tables: w_vk = s_v e_k + x_vk with x_vk > 0 only on the word's listed topics, so the part is
    s_v alpha_k e_k (the shared table, mass s_v Qs) plus alpha_k x_vk (the word's table, mass
    Qw[v]); otherwise the word's alias table over all K topics, or without alias tables
    (``prob`` NULL) a scan of its weights."""
    cdef double qs
    if a.sv != NULL:
        qs = a.sv[v] * a.Qs
        if u < qs or a.Qw[v] <= 0.0:
            return _smooth_draw(a, u / qs)
        return _word_draw(a, v, (u - qs) / a.Qw[v])
    if a.prob == NULL:
        return _scan_word_draw(a, v, u)
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


cdef inline int _scan_topics(const tab_t* top, int n, const int32_t* nd, const int32_t* Wv,
                             const int32_t* keep, const double* inv_tot, double* cum,
                             int32_t* itop, double* acc) noexcept nogil:
    """The scan of :func:`_doc_word_part` over the topics ``top[0:n]`` (uint16 or int32): a
    topic k stays in the list when keep[k] > 0."""
    cdef int i, k, ni = 0
    cdef double s = acc[0]
    for i in range(n):
        k = top[i]
        s += nd[k] * (<double> Wv[k] * inv_tot[k])
        cum[ni] = s
        itop[ni] = k
        ni += keep[k] > 0
    acc[0] = s
    return ni


cdef inline int _doc_word_part(const _Args* a, const int32_t* nd, const int32_t* act, int na,
                               const int32_t* Wv, int v, double* cum, int32_t* itop,
                               double* sd) noexcept nogil:
    """The counts path's document-word part, sum over k of n_dk W_vk / (T_k + V beta) for the
    topics both the document (n_dk > 0) and word v (W_vk > 0) hold, scanned over the shorter
    of the two lists: its cumulative sums go to ``cum`` and its topics to ``itop`` (the
    number of them is returned), its total is added to ``*sd``.

    Branch-free: every topic of the scanned list is added (a zero term leaves the sum
    unchanged, exactly) and written at slot ni, which advances only when the term is
    non-zero, so the list is the same as with a test but without mispredicted branches."""
    cdef int ni, wn = a.wlen[v]
    cdef int64_t wo = a.wptr[v]
    if wn >= na:  # the document's topics, those the word holds kept
        ni = _scan_topics(act, na, nd, Wv, Wv, a.inv_tot, cum, itop, sd)
    elif a.wide:  # the word's topics, those the document holds kept
        ni = _scan_topics(<const int32_t*> a.wtop + wo, wn, nd, Wv, nd, a.inv_tot, cum, itop,
                          sd)
    else:
        ni = _scan_topics(<const uint16_t*> a.wtop + wo, wn, nd, Wv, nd, a.inv_tot, cum, itop,
                          sd)
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


cdef enum:
    # topics per block of the dense live draw (``_dense_pick``)
    _DENSE_BLOCK = 16


cdef inline void _dense_row(const _Args* a, int v, double* wrow) noexcept nogil:
    """The frozen weights of word v, wrow[k] = (W_vk + beta) / (T_k + V beta), once per entry
    for the dense live draws of its tokens."""
    cdef const int32_t* Wv = a.W + <int64_t> v * a.K
    cdef int k
    for k in range(a.K):
        wrow[k] = (Wv[k] + a.beta) * a.inv_tot[k]


cdef inline void _dense_patch(const _Args* a, int v, const int32_t* dl, int k,
                              double* wrow) noexcept nogil:
    """wrow[k] after the entry's change dl[k] of topic k: (W_vk + dl_k + beta) /
    (T_k + dl_k + V beta), the frozen weight when dl_k = 0 (as ``_dense_row``)."""
    cdef int32_t w = a.W[<int64_t> v * a.K + k]
    if dl[k] != 0:
        wrow[k] = (w + dl[k] + a.beta) / (a.tot[k] + dl[k])
    else:
        wrow[k] = (w + a.beta) * a.inv_tot[k]


cdef inline void _dense_block_sum(double* pc, int K, int b) noexcept nogil:
    """The total of block b of the products pc[0:K] into pc[K + b]: four interleaved partial
    sums over a full block of ``_DENSE_BLOCK`` topics, one running sum over the last, shorter
    block."""
    cdef int k, k0 = b * _DENSE_BLOCK
    cdef double s, s0, s1, s2, s3
    if k0 + _DENSE_BLOCK <= K:
        s0 = pc[k0] + pc[k0 + 4] + pc[k0 + 8] + pc[k0 + 12]
        s1 = pc[k0 + 1] + pc[k0 + 5] + pc[k0 + 9] + pc[k0 + 13]
        s2 = pc[k0 + 2] + pc[k0 + 6] + pc[k0 + 10] + pc[k0 + 14]
        s3 = pc[k0 + 3] + pc[k0 + 7] + pc[k0 + 11] + pc[k0 + 15]
        pc[K + b] = (s0 + s1) + (s2 + s3)
    else:
        s = 0.0
        for k in range(k0, K):
            s += pc[k]
        pc[K + b] = s


cdef inline void _dense_fill(const _Args* a, const int32_t* nd, const double* wrow,
                             double* pc) noexcept nogil:
    """The products p_k = (n_dk + alpha_k) wrow[k] into pc[0:K], in one pass without a
    dependency between topics, and their block totals into pc[K:] (``_dense_block_sum``)."""
    cdef int K = a.K, b, k
    for k in range(K):
        pc[k] = (nd[k] + a.alpha[k]) * wrow[k]
    for b in range((K + _DENSE_BLOCK - 1) // _DENSE_BLOCK):
        _dense_block_sum(pc, K, b)


cdef inline void _dense_set(const _Args* a, const int32_t* nd, const double* wrow, double* pc,
                            int k) noexcept nogil:
    """Topic k's product and its block's total after n_dk or wrow[k] changed: the values
    ``_dense_fill`` would compute, bit for bit."""
    pc[k] = (nd[k] + a.alpha[k]) * wrow[k]
    _dense_block_sum(pc, a.K, k // _DENSE_BLOCK)


cdef inline int _dense_pick(const _Args* a, const double* pc, uint64_t* state) noexcept nogil:
    """A draw of k with probability propto pc[k] (products and block totals of
    ``_dense_fill``): a uniform u in [0, sum of the block totals) picks the block from the
    block totals, then the topic from the running sums of that block's products: the first
    topic whose running sum exceeds what is left of u, the block's last topic if rounding
    leaves none.  The chain of dependent additions is about K / 16 + 16 long instead of K."""
    cdef int K = a.K, b, k, k0, k1
    cdef int nb = (K + _DENSE_BLOCK - 1) // _DENSE_BLOCK
    cdef const double* bs = pc + K
    cdef double s = 0.0, tot = 0.0, u
    for b in range(nb):
        tot += bs[b]
    u = sc_uniform(state) * tot
    b = 0
    while b < nb - 1 and u >= bs[b]:
        u -= bs[b]
        b += 1
    k0 = b * _DENSE_BLOCK
    k1 = k0 + _DENSE_BLOCK
    if k1 > K:
        k1 = K
    for k in range(k0, k1 - 1):
        s += pc[k]
        if s > u:
            return k
    return k1 - 1


cdef inline int _draw_live_counts(const _Args* a, const int32_t* nd, const int32_t* act,
                                  int na, double sdb, double* cum, int32_t* itop, int v,
                                  int old, bint dense, uint64_t* state) noexcept nogil:
    """One draw of a token of word v in LIVE counts mode (stochastic EM with the document's
    counts live): p(k) propto (n_dk + alpha_k) (W_vk - e_k + beta) / (T_k - e_k + V beta), nd
    the document's counts without the token, W and T the read buffer, e_k = [k == old] when
    ``exclude_own`` (the token's own previous topic, which the read buffer counts) else 0.

    Sparse path: the four parts of the frozen counts path with the current nd (``sdb`` =
    sum_k n_dk / (T_k + V beta)); with ``exclude_own`` the draw is from the frozen-W weights
    and a draw of k = old is accepted with probability
    [(W_vo - 1 + beta) / (T_o - 1 + V beta)] / [(W_vo + beta) / (T_o + V beta)] < 1, else
    redrawn (rejection sampling: exact)."""
    cdef int K = a.K, k, b, ni = 0
    cdef const int32_t* Wv = a.W + <int64_t> v * K
    cdef double tot = 0.0, sd = 0.0, u, qw, sb, ratio = 1.0
    if dense:
        # the products from W's row directly (the weights of ``_dense_row``), the own topic's
        # weight scaled by the ratio
        for k in range(K):
            cum[k] = (nd[k] + a.alpha[k]) * ((Wv[k] + a.beta) * a.inv_tot[k])
        if a.exclude_own and old >= 0 and Wv[old] > 0:
            ratio = _own_ratio(a, Wv, old)
        if ratio < 1.0:
            cum[old] = (nd[old] + a.alpha[old]) * (((Wv[old] + a.beta) * a.inv_tot[old])
                                                   * ratio)
        for b in range((K + _DENSE_BLOCK - 1) // _DENSE_BLOCK):
            _dense_block_sum(cum, K, b)
        return _dense_pick(a, cum, state)
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
                                 int32_t* etop, bint dense, uint64_t* state) noexcept nogil:
    """One draw of a token of word v in LIVE counts mode with the entry's own changes (the
    default of ``StochasticEMLDA``): p(k) propto (n_dk + alpha_k) (W_vk + e_k + beta) /
    (T_k + e_k + V beta), where e_k = dl[k] is the change the entry (d, v) has made so far in
    this sweep, its earlier tokens' new topics counted and their previous topics and the
    token's own previous topic taken out (the read buffer W counts the previous topics of
    all the entry's tokens), so the token sees its entry's other tokens as a collapsed Gibbs
    sampler does; the topics with e_k != 0 are dset[0:nds].  The dense path draws from the
    products in ``cum``, which the caller keeps up to date (see the dense branch below).

    Exact rejection sampling with the proposal g(k) = f(k) max(1, r_k), where f is the frozen
    conditional (the four parts of the counts path) and r_k = [(W_vk + e_k + beta) / (T_k + e_k
    + V beta)] / [(W_vk + beta) / (T_k + V beta)], which is > 1 exactly when e_k > 0: g is f
    plus a short extra part over the topics with e_k > 0, and a draw of k is kept with
    probability min(1, r_k).  With one token in the entry this is the own-topic rejection of
    ``_draw_live_counts``, with the same random draws."""
    cdef int K = a.K, k, i, ni = 0, ne = 0
    cdef const int32_t* Wv = a.W + <int64_t> v * K
    cdef double tot = 0.0, sd = 0.0, u, qw, sb, ext = 0.0, tk
    cdef double* ec = cum + (K + 1)
    if dense:
        # cum: the products and block totals of the current n_d and the entry's weights wrow
        # with its changes dl, which the caller keeps (``_dense_fill`` at the entry's start,
        # ``_dense_patch`` and ``_dense_set`` at every topic a token changes)
        return _dense_pick(a, cum, state)
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
