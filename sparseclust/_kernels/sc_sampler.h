// SPDX-License-Identifier: BSD-3-Clause
//
// Helpers of the topic sampler (_sampler.pyx): a counter-keyed random stream, an integer
// atomic increment and bit counting.
//
// Random stream: SplitMix64 (Steele, Lea & Flood 2014).  The state of a document's stream is a
// hash of the triple (seed, sweep, key), so the draws of a document depend on nothing else --
// not on the thread that processes it nor on the order documents are visited.
#pragma once

#include <math.h>
#include <stdint.h>

static inline uint64_t sc_splitmix64(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// State of the stream keyed by (seed, sweep, key).
static inline uint64_t sc_stream_key(uint64_t seed, uint64_t sweep, uint64_t key) {
    uint64_t s = seed;
    uint64_t h = sc_splitmix64(&s) ^ sweep;
    s = h;
    h = sc_splitmix64(&s) ^ key;
    s = h;
    return sc_splitmix64(&s);
}

// Uniform double in [0, 1) with 53 random bits.
static inline double sc_uniform(uint64_t* state) {
    return (double)(sc_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
}

// Hint the cache to fetch the n bytes from p (reads; a no-op where unsupported).
static inline void sc_prefetch(const void* p, long n) {
#if defined(__GNUC__) || defined(__clang__)
    const char* c = (const char*)p;
    for (long i = 0; i < n; i += 64) __builtin_prefetch(c + i, 0, 3);
#else
    (void)p; (void)n;
#endif
}

// *p += v, atomically when called from several OpenMP threads.  Integer addition is
// associative and commutative, so the final value does not depend on the order of increments.
static inline void sc_atomic_add_i32(int32_t* p, int32_t v) {
#ifdef _OPENMP
#pragma omp atomic
#endif
    *p += v;
}

// Number of set bits of x, and the index of its lowest set bit (x != 0): the bit sets of the
// topics with statistics of the split word tables.
static inline int sc_popcount64(uint64_t x) {
#if (defined(__GNUC__) || defined(__clang__)) && defined(__POPCNT__)
    return __builtin_popcountll(x);
#else
    // the parallel bit count, inline (without the popcnt instruction GCC's builtin is a
    // library call)
    x = x - ((x >> 1) & 0x5555555555555555ULL);
    x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (int)((x * 0x0101010101010101ULL) >> 56);
#endif
}

static inline int sc_ctz64(uint64_t x) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(x);
#else
    int n = 0;
    while (!(x & 1)) { x >>= 1; ++n; }
    return n;
#endif
}

// psi(x) for x > 0 (the split word tables' E[log phi]): below 8 the recurrence psi(x) =
// psi(x + 1) - 1/x, its terms summed as one fraction (one division instead of one per term),
// then the asymptotic series log x - 1/(2x) - sum_n B_2n / (2n x^2n) through x^-12 (absolute
// error below 2e-14 at x = 8).  Tiny x, whose product of terms would underflow, sums the
// terms one by one.
static inline double sc_digamma(double x) {
    double r = 0.0;
    if (x < 1e-8) {
        while (x < 8.0) { r -= 1.0 / x; x += 1.0; }
    } else if (x < 8.0) {
        double num = 0.0, den = 1.0;
        while (x < 8.0) { num = num * x + den; den *= x; x += 1.0; }
        r = -num / den;
    }
    double f = 1.0 / (x * x);
    return r + log(x) - 0.5 / x - f * (
        1.0 / 12.0 - f * (1.0 / 120.0 - f * (1.0 / 252.0 - f * (
            1.0 / 240.0 - f * (1.0 / 132.0 - f * (691.0 / 32760.0))))));
}
