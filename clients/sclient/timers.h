/* Connection deadlines: a binary min-heap of (instant, connection index). */
#ifndef WB_TIMERS_H
#define WB_TIMERS_H

#include <stddef.h>
#include <stdint.h>

struct timer {
    int64_t at; /* CLOCK_MONOTONIC ns */
    uint32_t conn;
};

struct timers {
    struct timer *heap;
    size_t len, cap;
};

void timers_push(struct timers *timers, int64_t at, uint32_t conn);
/* Removes and returns the earliest timer; the heap must not be empty. */
struct timer timers_pop(struct timers *timers);
/* The earliest instant, or INT64_MAX when no timer is armed. */
static inline int64_t timers_next(const struct timers *timers) {
    return timers->len ? timers->heap[0].at : INT64_MAX;
}

#endif
