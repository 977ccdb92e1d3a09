/* stats.c: the counters' shared mapping and their JSON snapshot, written atomically. */
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double monotonic_seconds(void)
{
    return (double)monotonic_ns() / 1e9;
}

static void write_counters(FILE *f, const struct stats *s)
{
#define STATS_PRINT(name) fprintf(f, ", \"" #name "\": %llu", (unsigned long long)s->name);
    STATS_FIELDS(STATS_PRINT)
#undef STATS_PRINT
}

/* taken_ns: the CLOCK_MONOTONIC instant the counters were read, which a reader's window
 * edges are compared with (the runner's, on the same clock). */
static void write_header(FILE *f, const struct stats_info *info, pid_t pid, int workers,
                         uint64_t taken_ns)
{
    fprintf(f, "\"schema\": 1, \"backend\": \"%s\", \"accept\": \"%s\", \"reply_bytes\": %ld, "
               "\"pid\": %ld, \"workers\": %d, \"uptime_s\": %.6f, \"monotonic_ns\": %llu",
            info->backend, info->accept, info->reply_bytes, (long)pid, workers,
            (double)taken_ns / 1e9 - info->started, (unsigned long long)taken_ns);
}

int stats_write(const char *path, const struct stats_info *info,
                const struct stats *workers, int n)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;

    uint64_t taken_ns = monotonic_ns();
    struct stats total = {0};
    for (int i = 0; i < n; i++) {
#define STATS_SUM(name) total.name += workers[i].name;
        STATS_FIELDS(STATS_SUM)
#undef STATS_SUM
    }
    fputc('{', f);
    write_header(f, info, getpid(), n, taken_ns);
    write_counters(f, &total);
    if (n > 1) {
        fputs(", \"per_worker\": [", f);
        for (int i = 0; i < n; i++) {
            fputs(i ? ", {" : "{", f);
            write_header(f, info, workers[i].pid, 1, taken_ns);
            write_counters(f, &workers[i]);
            fputc('}', f);
        }
        fputc(']', f);
    }
    fputs("}\n", f);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static int write_header_page(char *page)
{
    struct counters_header *h = (struct counters_header *)page;
    memcpy(h->magic, COUNTERS_MAGIC, sizeof h->magic);
    h->slot_bytes = sizeof(struct stats);
    h->slots_offset = COUNTERS_PAGE;
    h->pid_offset = offsetof(struct stats, pid);
    char *name = h->names, *end = page + COUNTERS_PAGE;
#define STATS_NAME(field)                                        \
    if (name + sizeof #field > end)                              \
        return -1;                                               \
    memcpy(name, #field, sizeof #field);                         \
    name += sizeof #field;                                       \
    h->fields++;
    STATS_FIELDS(STATS_NAME)
#undef STATS_NAME
    return 0;
}

struct stats *stats_map(const char *path, int workers)
{
    size_t slots = sizeof(struct stats) * (size_t)workers;
    if (!path) {
        void *anon = mmap(NULL, slots, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        return anon == MAP_FAILED ? NULL : anon;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return NULL;
    char *base = MAP_FAILED;
    if (ftruncate(fd, (off_t)(COUNTERS_PAGE + slots)) == 0)
        base = mmap(NULL, COUNTERS_PAGE + slots, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd); /* the mapping holds the file */
    if (base == MAP_FAILED)
        return NULL;
    if (write_header_page(base) < 0) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    /* the worker count last: a reader that sees it sees a whole header */
    __atomic_store_n(&((struct counters_header *)base)->workers, (uint32_t)workers,
                     __ATOMIC_RELEASE);
    return (struct stats *)(base + COUNTERS_PAGE);
}
