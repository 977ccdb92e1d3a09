/* The loop's random numbers: xorshift64*, seeded per shard. */
#ifndef WB_RNG_H
#define WB_RNG_H

#include <stdint.h>

/* Uniform on (0, 1]. */
static inline double rng_uniform(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return ((double)((*state * 2685821657736338717ull) >> 11) + 1.0) / 9007199254740992.0;
}

#endif
