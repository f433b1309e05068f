// SPDX-License-Identifier: BSD-3-Clause
//
// Per-row building blocks of the L-sparse local step (Hughes & Sudderth 2016, Alg. 1):
// top-L selection of a weight vector W_n (K entries), and the exp-normalization of either
// all K weights (DenseRespFromWeights) or only the L selected ones (TopLRespFromWeights).
//
// Cython owns the loop over rows (prange); these functions own one row and never allocate.
//
// Ranking rule, shared by both selection paths: entry a ranks before entry b iff
//     w[a] > w[b]  or  (w[a] == w[b] and a < b),
// i.e. a stable descending sort; this is a strict total order on NaN-free rows, so the
// selected set is unique and identical for both paths (and for the numpy reference).
//
// Every row function returns a "bad row" flag: 1 if the row contains NaN or +inf or has no
// finite entry (all -inf); the caller counts these and raises, the kernels never do.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <functional>
#include <limits>

namespace sparseclust {

// TOPL_SCAN picks one of the two single-pass variants by L and K (top_l_scan_auto);
// TOPL_INSERT and TOPL_BUFFER force one of them.
// TOPL_BUFFER_PORTABLE is TOPL_BUFFER with the portable block test (for tests).
enum TopLMethod {
    TOPL_SELECT = 0,
    TOPL_SCAN = 1,
    TOPL_INSERT = 2,
    TOPL_BUFFER = 3,
    TOPL_BUFFER_PORTABLE = 4
};

// Candidate-buffer capacity of the threshold scan, in multiples of L (plus one block of slack).
constexpr int TOPL_BUFFER_FACTOR = 4;
constexpr int TOPL_BLOCK = 8;
constexpr int TOPL_SEED_GROUPS = 2;  // seed groups per selected entry (0: no seed)

// Whether the packed block test below uses GCC/Clang vector extensions.  A compiler without
// them (or a build with SPARSECLUST_NO_VECTOR_EXTENSIONS defined, SPARSECLUST_PORTABLE=1 in
// setup.py) gets the portable scalar loop, which gives the same answer.
#if !defined(SPARSECLUST_NO_VECTOR_EXTENSIONS) && (defined(__GNUC__) || defined(__clang__))
#define SPARSECLUST_VECTOR_EXTENSIONS 1
#else
#define SPARSECLUST_VECTOR_EXTENSIONS 0
#endif

inline int topl_vector_extensions() { return SPARSECLUST_VECTOR_EXTENSIONS; }

// True iff some of the TOPL_BLOCK weights p[0..8) is not below t (w >= t, NaN, +inf).
// Portable form: one unordered "not less than" per weight, or-ed without branches.
template <typename T>
inline bool block_reaches_portable(const T* p, T t) {
    bool any = false;
    for (int j = 0; j < TOPL_BLOCK; ++j) any |= !(p[j] < t);
    return any;
}

#if SPARSECLUST_VECTOR_EXTENSIONS
// The same test written with GCC/Clang vector extensions, so that it compiles to packed
// compares on any target (one unordered "not less than" per SIMD register, then one
// horizontal test).
template <typename T>
inline bool block_reaches_packed(const T* p, T t) {
    constexpr int W = 16 / sizeof(T);  // lanes of a 16-byte register
    typedef T V __attribute__((vector_size(16), aligned(sizeof(T))));
    typedef std::conditional_t<sizeof(T) == 8, int64_t, int32_t> I;
    typedef I M __attribute__((vector_size(16)));
    V tv;
    for (int j = 0; j < W; ++j) tv[j] = t;
    V a;
    std::memcpy(&a, p, 16);
    M below = a < tv;  // -1 in lanes strictly below t (false for NaN)
    for (int r = 1; r < TOPL_BLOCK / W; ++r) {
        std::memcpy(&a, p + r * W, 16);
        below &= a < tv;
    }
    I all = below[0];
    for (int j = 1; j < W; ++j) all &= below[j];
    return all == 0;
}
#endif

// The block test of the buffer scan; Portable forces the scalar form (tests compare the two).
template <typename T, bool Portable>
inline bool block_reaches(const T* p, T t) {
#if SPARSECLUST_VECTOR_EXTENSIONS
    if (!Portable) return block_reaches_packed(p, t);
#endif
    return block_reaches_portable(p, t);
}

template <typename T>
struct WeightIndex {
    T w;
    int32_t i;
};

template <typename T>
inline bool ranks_before(const WeightIndex<T>& a, const WeightIndex<T>& b) {
    return a.w > b.w || (a.w == b.w && a.i < b.i);
}

template <typename T>
struct RanksBefore {
    bool operator()(const WeightIndex<T>& a, const WeightIndex<T>& b) const {
        return a.w > b.w || (a.w == b.w && a.i < b.i);
    }
};

template <typename T>
inline bool by_index(const WeightIndex<T>& a, const WeightIndex<T>& b) {
    return a.i < b.i;
}

// Bytes of scratch space one thread needs for rows of K weights and L selected entries.
inline std::size_t topl_work_bytes(int K, int L) {
    std::size_t n = static_cast<std::size_t>(K > L ? K : L);
    std::size_t nb = static_cast<std::size_t>(TOPL_BUFFER_FACTOR) * static_cast<std::size_t>(L);
    n = (n > nb ? n : nb) + 2 * TOPL_BLOCK;
    return n * sizeof(WeightIndex<double>) + 64;
}

// Row maximum with 4 independent accumulators (breaks the compare latency chain), and the
// bad-row flag: NaN or +inf anywhere (!(v < inf)), or no finite entry (max == -inf).
template <typename T>
inline int row_max_checked(const T* w, int K, T* out_max) {
    const T inf = std::numeric_limits<T>::infinity();
    T m0 = -inf, m1 = -inf, m2 = -inf, m3 = -inf;
    bool bad = false;
    int k = 0;
    for (; k + 4 <= K; k += 4) {
        T a = w[k], b = w[k + 1], c = w[k + 2], d = w[k + 3];
        bad |= !(a < inf) | !(b < inf) | !(c < inf) | !(d < inf);
        m0 = a > m0 ? a : m0;
        m1 = b > m1 ? b : m1;
        m2 = c > m2 ? c : m2;
        m3 = d > m3 ? d : m3;
    }
    for (; k < K; ++k) {
        T a = w[k];
        bad |= !(a < inf);
        m0 = a > m0 ? a : m0;
    }
    m0 = m1 > m0 ? m1 : m0;
    m2 = m3 > m2 ? m3 : m2;
    m0 = m2 > m0 ? m2 : m0;
    *out_max = m0;
    return (bad || !(m0 > -inf)) ? 1 : 0;
}

// Collect, in ascending index order, every entry ranked within the top L given the L-th
// largest weight t: all entries with w > t, then the first (L - #{w > t}) entries equal to t.
template <typename T>
inline void collect_top_l(const T* w, int K, int L, T t, int32_t* idx, T* val) {
    int greater = 0;
    for (int k = 0; k < K; ++k) greater += (w[k] > t);
    int ties = L - greater;
    int j = 0;
    for (int k = 0; k < K && j < L; ++k) {
        T v = w[k];
        if (v > t || (v == t && ties-- > 0)) {
            idx[j] = k;
            val[j] = v;
            ++j;
        }
    }
}

// Introselect path (Hughes & Sudderth 2016, Sec. 3.2 and App. F): copy the weights (checking them), find
// the L-th largest value with std::nth_element on plain values, then collect the winners in
// index order with the tie rule.  work: at least K values of T.
template <typename T>
inline int top_l_select(const T* w, int K, int L, T* work, int32_t* idx, T* val, T* row_max) {
    const T inf = std::numeric_limits<T>::infinity();
    bool bad = false;
    for (int k = 0; k < K; ++k) {
        T v = w[k];
        bad |= !(v < inf);
        work[k] = v;
    }
    if (bad) return 1;
    std::nth_element(work, work + (L - 1), work + K, std::greater<T>());
    T t = work[L - 1];
    T m = *std::max_element(work, work + L);
    *row_max = m;
    if (!(m > -inf)) return 1;
    collect_top_l(w, K, L, t, idx, val);
    return 0;
}

// Single-pass path "insert": a buffer of the L best entries so far, kept sorted by rank;
// each weight is compared once with the current L-th best ("threshold"), eight at a time, and
// the rare winners are inserted.  A weight equal to the threshold ranks after every kept entry
// (it has a larger index), so the strict ">" is exact under the tie rule.  A NaN fails
// "v <= threshold" and so enters the slow branch, where it is flagged.
// Cost O(K + L * #insertions); on random rows #insertions ~ L log(K / L).
// work: at least L pairs.  Outputs in ascending index order.
template <typename T>
inline int top_l_insert(const T* w, int K, int L, WeightIndex<T>* work, int32_t* idx, T* val,
                        T* row_max) {
    const T inf = std::numeric_limits<T>::infinity();
    bool bad = false;
    // initial fill with the first L entries (stable insertion: after equal weights)
    for (int k = 0; k < L; ++k) {
        T v = w[k];
        bad |= !(v < inf);
        int j = k;
        while (j > 0 && work[j - 1].w < v) {
            work[j] = work[j - 1];
            --j;
        }
        work[j].w = v;
        work[j].i = k;
    }
    if (bad) return 1;
    T thr = work[L - 1].w;
    const WeightIndex<T>* last = work + (L - 1);
    auto consider = [&](int k) {
        T v = w[k];
        if (!(v <= thr)) {
            if (!(v < inf)) {
                bad = true;
                return;
            }
            int j = L - 1;
            while (j > 0 && work[j - 1].w < v) {
                work[j] = work[j - 1];
                --j;
            }
            work[j].w = v;
            work[j].i = k;
            thr = last->w;
        }
    };
    int k = L;
    for (; k + 8 <= K; k += 8) {
        const T* p = w + k;
        bool any = !(p[0] <= thr) | !(p[1] <= thr) | !(p[2] <= thr) | !(p[3] <= thr) |
                   !(p[4] <= thr) | !(p[5] <= thr) | !(p[6] <= thr) | !(p[7] <= thr);
        if (any) {
            for (int j = 0; j < 8; ++j) consider(k + j);
        }
    }
    for (; k < K; ++k) consider(k);
    T m = work[0].w;
    *row_max = m;
    if (bad || !(m > -inf)) return 1;
    // ascending index order (insertion sort: L is small on this path)
    for (int a = 1; a < L; ++a) {
        WeightIndex<T> x = work[a];
        int j = a;
        while (j > 0 && work[j - 1].i > x.i) {
            work[j] = work[j - 1];
            --j;
        }
        work[j] = x;
    }
    for (int j = 0; j < L; ++j) {
        idx[j] = work[j].i;
        val[j] = work[j].w;
    }
    return 0;
}

// Keep the L best of buf[0..n) (by rank) in buf[0..L), in no particular order; returns the
// L-th best weight, the new threshold.  Requires n >= L and a NaN-free buffer.
template <typename T>
inline T compact_best(WeightIndex<T>* buf, int n, int L) {
    if (n > L) std::nth_element(buf, buf + (L - 1), buf + n, RanksBefore<T>());
    T t = buf[0].w;
    for (int j = 1; j < L; ++j) t = buf[j].w < t ? buf[j].w : t;
    return t;
}

// A lower bound on the L-th best weight of a row: the row (up to a remainder) is cut into
// G >= L equal groups of at least TOPL_BLOCK entries; the L-th largest group maximum is a weight
// that L distinct entries (the maxima of L distinct groups) reach, hence <= the L-th best.
// NaNs are ignored here (the scan flags them).  Returns -inf when the groups would be too
// small to pay off.  work: at least G values.
template <typename T>
inline T seed_threshold(const T* w, int K, int L, int G, T* work) {
    const T inf = std::numeric_limits<T>::infinity();
    int g = K / G;
    if (g < TOPL_BLOCK) return -inf;
    for (int q = 0; q < G; ++q) {
        const T* p = w + static_cast<std::ptrdiff_t>(q) * g;
        T m0 = -inf, m1 = -inf, m2 = -inf, m3 = -inf;
        int k = 0;
        for (; k + 4 <= g; k += 4) {
            m0 = p[k] > m0 ? p[k] : m0;
            m1 = p[k + 1] > m1 ? p[k + 1] : m1;
            m2 = p[k + 2] > m2 ? p[k + 2] : m2;
            m3 = p[k + 3] > m3 ? p[k + 3] : m3;
        }
        for (; k < g; ++k) m0 = p[k] > m0 ? p[k] : m0;
        m0 = m1 > m0 ? m1 : m0;
        m2 = m3 > m2 ? m3 : m2;
        work[q] = m2 > m0 ? m2 : m0;
    }
    std::nth_element(work, work + (L - 1), work + G, std::greater<T>());
    return work[L - 1];
}

// Single-pass path "buffer": a threshold t (a weight at most the L-th best of the row) and an
// unsorted candidate buffer of capacity TOPL_BUFFER_FACTOR * L.  The scan goes over blocks of
// TOPL_BLOCK weights; a block whose weights are all below t (one vectorizable any-test) is
// skipped, otherwise each of its weights is appended without a branch (stored, and the count
// advanced by w >= t).  When the buffer is full it is compacted to its best L with
// std::nth_element under the ranking rule, and t rises to the new L-th best.  Cost O(K) plus
// O(1) amortized per candidate, independent of L.
//
// Exactness: t starts at -inf and only ever equals the L-th best of a set of entries that
// are all retained, so every entry of the final top L has w >= t when it is visited and is
// appended; the comparison is ">=" (an entry equal to t is kept as a candidate), so ties are
// settled only by the comparator of the compactions, which is the ranking rule itself.
// A NaN or +inf fails "w < t" and so lands in the slow branch, where it is flagged; the row
// is abandoned before any compaction (the comparator needs NaN-free input).  Rows with many
// -inf weights keep t = -inf until L finite entries were seen and simply compact more often.
// work: at least TOPL_BUFFER_FACTOR * L + TOPL_BLOCK pairs.  Outputs in ascending index order.
template <typename T, bool Portable = false>
inline int top_l_buffer(const T* w, int K, int L, WeightIndex<T>* work, int32_t* idx, T* val,
                        T* row_max, int seed_groups) {
    const T inf = std::numeric_limits<T>::infinity();
    const int cap = TOPL_BUFFER_FACTOR * L;
    WeightIndex<T>* buf = work;
    int n = 0;
    T t = -inf;
    if (seed_groups > 0) t = seed_threshold(w, K, L, seed_groups * L, reinterpret_cast<T*>(work));
    int k = 0;
    for (; k + TOPL_BLOCK <= K; k += TOPL_BLOCK) {
        const T* p = w + k;
        if (!block_reaches<T, Portable>(p, t)) continue;
        int bad = 0;
        for (int j = 0; j < TOPL_BLOCK; ++j) {
            T v = p[j];
            bad |= !(v < inf);
            buf[n].w = v;
            buf[n].i = k + j;
            n += !(v < t);
        }
        if (bad) return 1;
        if (n >= cap) {
            t = compact_best(buf, n, L);
            n = L;
        }
    }
    {
        int bad = 0;
        for (; k < K; ++k) {
            T v = w[k];
            bad |= !(v < inf);
            buf[n].w = v;
            buf[n].i = k;
            n += !(v < t);
        }
        if (bad) return 1;
    }
    // n >= L: t = -inf until L entries were appended, and -inf >= -inf appends
    compact_best(buf, n, L);
    T m = buf[0].w;
    for (int j = 1; j < L; ++j) m = buf[j].w > m ? buf[j].w : m;
    *row_max = m;
    if (!(m > -inf)) return 1;
    if (L <= 32) {
        for (int a = 1; a < L; ++a) {
            WeightIndex<T> x = buf[a];
            int j = a;
            while (j > 0 && buf[j - 1].i > x.i) {
                buf[j] = buf[j - 1];
                --j;
            }
            buf[j] = x;
        }
    } else {
        std::sort(buf, buf + L, by_index<T>);
    }
    for (int j = 0; j < L; ++j) {
        idx[j] = buf[j].i;
        val[j] = buf[j].w;
    }
    return 0;
}

// Choice between the two single-pass variants.
// The sorted buffer wins for L = 1 on long rows (one compare-and-replace, no seed pass) and
// for L <= 16 on short rows (K < 16 L: the seed groups would be shorter than a block).
inline int scan_variant(int K, int L) {
    if (L == 1) return K > 1024 ? TOPL_INSERT : TOPL_BUFFER;
    if (L <= 16 && K < 16 * L) return TOPL_INSERT;
    return TOPL_BUFFER;
}

// Indices (ascending) and weights of the top-L entries of one row; L is already clamped to K.
template <typename T>
inline int top_l_row(const T* w, int K, int L, int method, void* work, int32_t* idx, T* val,
                     T* row_max) {
    if (L >= K) {  // dense answer: every index
        int bad = row_max_checked(w, K, row_max);
        for (int k = 0; k < K; ++k) {
            idx[k] = k;
            val[k] = w[k];
        }
        return bad;
    }
    if (method == TOPL_SCAN) method = scan_variant(K, L);
    if (method == TOPL_INSERT)
        return top_l_insert(w, K, L, static_cast<WeightIndex<T>*>(work), idx, val, row_max);
    if (method == TOPL_BUFFER)
        return top_l_buffer(w, K, L, static_cast<WeightIndex<T>*>(work), idx, val, row_max,
                            TOPL_SEED_GROUPS);
    if (method == TOPL_BUFFER_PORTABLE)
        return top_l_buffer<T, true>(w, K, L, static_cast<WeightIndex<T>*>(work), idx, val,
                                     row_max, TOPL_SEED_GROUPS);
    return top_l_select(w, K, L, static_cast<T*>(work), idx, val, row_max);
}

// In place: v[j] <- exp(v[j] - m) / sum_j exp(v[j] - m), exponentials in double.
// m is the maximum of v (finite), so every exponent is <= 0, the sum is >= 1, and a weight
// of -inf (or far below m) gets exactly zero.
template <typename T>
inline void exp_normalize(T* v, int n, double m) {
    double s = 0.0;
    for (int j = 0; j < n; ++j) {
        double e = std::exp(static_cast<double>(v[j]) - m);
        v[j] = static_cast<T>(e);
        s += e;
    }
    double inv = 1.0 / s;
    for (int j = 0; j < n; ++j) v[j] = static_cast<T>(static_cast<double>(v[j]) * inv);
}

// TopLRespFromWeights for one row (Alg. 1): select, then exp-normalize the L weights.
template <typename T>
inline int top_l_resp_row(const T* w, int K, int L, int method, void* work, int32_t* idx,
                          T* val) {
    T m;
    int bad = top_l_row(w, K, L, method, work, idx, val, &m);
    if (bad) {
        for (int j = 0; j < L; ++j) val[j] = T(0);
        return 1;
    }
    exp_normalize(val, L, static_cast<double>(m));
    return 0;
}

// DenseRespFromWeights for one row: out = exp(w - max w) / sum.
template <typename T>
inline int dense_resp_row(const T* w, int K, T* out) {
    T m;
    int bad = row_max_checked(w, K, &m);
    if (bad) {
        for (int k = 0; k < K; ++k) out[k] = T(0);
        return 1;
    }
    double s = 0.0;
    const double md = static_cast<double>(m);
    for (int k = 0; k < K; ++k) {
        double e = std::exp(static_cast<double>(w[k]) - md);
        out[k] = static_cast<T>(e);
        s += e;
    }
    double inv = 1.0 / s;
    for (int k = 0; k < K; ++k) out[k] = static_cast<T>(static_cast<double>(out[k]) * inv);
    return 0;
}

}  // namespace sparseclust
