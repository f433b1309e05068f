// SPDX-License-Identifier: BSD-3-Clause
//
// Per-row building blocks of the L-sparse local step (Hughes & Sudderth, paper 000, Alg. 1):
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
#include <functional>
#include <limits>

namespace sparseclust {

enum TopLMethod { TOPL_SELECT = 0, TOPL_SCAN = 1 };

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
inline bool by_index(const WeightIndex<T>& a, const WeightIndex<T>& b) {
    return a.i < b.i;
}

// Bytes of scratch space one thread needs for rows of K weights and L selected entries.
inline std::size_t topl_work_bytes(int K, int L) {
    std::size_t n = static_cast<std::size_t>(K > L ? K : L) + 8;
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

// Introselect path (paper 000, Sec. 3.2 and App. F): copy the weights (checking them), find
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

// Single-pass path for small L: a buffer of the L best entries so far, kept sorted by rank;
// each weight is compared once with the current L-th best ("threshold"), eight at a time, and
// the rare winners are inserted.  A weight equal to the threshold ranks after every kept entry
// (it has a larger index), so the strict ">" is exact under the tie rule.  A NaN fails
// "v <= threshold" and so enters the slow branch, where it is flagged.
// Cost O(K + L * #insertions); on random rows #insertions ~ L log(K / L).
// work: at least L pairs.  Outputs in ascending index order.
template <typename T>
inline int top_l_scan(const T* w, int K, int L, WeightIndex<T>* work, int32_t* idx, T* val,
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
    if (method == TOPL_SCAN)
        return top_l_scan(w, K, L, static_cast<WeightIndex<T>*>(work), idx, val, row_max);
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
