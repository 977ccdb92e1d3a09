/* What a shard asks of the kernel beside its sockets: the monotonic clock, the counters of
 * /proc/self, and the CPU it runs on. */
#ifndef WB_OS_H
#define WB_OS_H

#include <stdint.h>

uint64_t now_ns(void);
/* The second of the two numbers a /proc file starts with (0 if unreadable). */
uint64_t proc_self_second(const char *path);
uint64_t rss_kb(void);
int pin_cpu(int cpu);

#endif
