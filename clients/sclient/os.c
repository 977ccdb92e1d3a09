/* What a shard asks of the kernel beside its sockets: the monotonic clock, the counters of
 * /proc/self, and the CPU it runs on. */
#include "os.h"

#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t proc_self_second(const char *path) {
    FILE *f = fopen(path, "r");
    unsigned long long first = 0, second = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &first, &second) != 2) second = 0;
        fclose(f);
    }
    return second;
}

uint64_t rss_kb(void) {
    return proc_self_second("/proc/self/statm") * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

int pin_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}
