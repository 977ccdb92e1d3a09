/* fuzz_http.c: libFuzzer target for the HTTP parser. Besides crashes and sanitizer
 * reports it checks that the parse does not depend on how the input is split: the
 * whole input at once and one byte per call must give the same requests and replies. */
#include <stdint.h>
#include <stdlib.h>

#include "http.h"

#define MAX_OUTCOMES 4096

struct outcome {
    enum http_result result;
    enum reply_kind kind;
};

/* Parses data in pieces of `step` bytes (0 = all at once); records what each request got. */
static int parse_all(const uint8_t *data, size_t size, size_t step, struct outcome *out)
{
    struct http_parser p;
    http_parser_init(&p);
    int n = 0;
    size_t off = 0;
    while (off < size && n < MAX_OUTCOMES) {
        size_t len = step && size - off > step ? step : size - off;
        size_t used;
        enum http_result r = http_parse(&p, (const char *)data + off, len, &used);
        if (used > len || (r == HTTP_NEED_MORE && used != len))
            abort();
        off += used;
        if (r == HTTP_NEED_MORE)
            continue;
        out[n++] = (struct outcome){r, r == HTTP_REQUEST ? reply_for(&p) : REPLY_400};
        if (r != HTTP_REQUEST)
            break;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct outcome whole[MAX_OUTCOMES], bytewise[MAX_OUTCOMES];
    int a = parse_all(data, size, 0, whole);
    int b = parse_all(data, size, 1, bytewise);
    if (a != b)
        abort();
    for (int i = 0; i < a; i++)
        if (whole[i].result != bytewise[i].result || whole[i].kind != bytewise[i].kind)
            abort();
    return 0;
}
