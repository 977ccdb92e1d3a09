/* Connection deadlines: a binary min-heap of (instant, connection index). */
#include "timers.h"

#include <stdio.h>
#include <stdlib.h>

void timers_push(struct timers *timers, int64_t at, uint32_t conn) {
    if (timers->len == timers->cap) {
        timers->cap = timers->cap ? timers->cap * 2 : 1024;
        timers->heap = realloc(timers->heap, timers->cap * sizeof *timers->heap);
        if (!timers->heap) { perror("wb-sclient: timer heap"); exit(1); }
    }
    size_t i = timers->len++;
    while (i && timers->heap[(i - 1) / 2].at > at) {
        timers->heap[i] = timers->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    timers->heap[i] = (struct timer){at, conn};
}

struct timer timers_pop(struct timers *timers) {
    struct timer *heap = timers->heap;
    struct timer top = heap[0], last = heap[--timers->len];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= timers->len) break;
        if (child + 1 < timers->len && heap[child + 1].at < heap[child].at) child++;
        if (heap[child].at >= last.at) break;
        heap[i] = heap[child];
        i = child;
    }
    if (timers->len) heap[i] = last;
    return top;
}
