// SPDX-License-Identifier: BSD-3-Clause
//
// Helpers of the topic sampler (_sampler.pyx): a counter-keyed random stream and an integer
// atomic increment.
//
// Random stream: SplitMix64 (Steele, Lea & Flood 2014).  The state of a document's stream is a
// hash of the triple (seed, sweep, key), so the draws of a document depend on nothing else --
// not on the thread that processes it nor on the order documents are visited.
#pragma once

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
