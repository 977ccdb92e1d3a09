# servers/: wb-server (one HTTP core, one file per dispatch backend), its ASan+UBSan build,
# the libFuzzer target for the HTTP parser, and `make bench-servers`.
SERVER_SRCS := $(addprefix servers/,main.c server.c http.c stats.c dispatch.c pollset.c \
  epollset.c dispatch_select.c dispatch_poll.c dispatch_devpoll.c dispatch_epoll.c \
  dispatch_rtsig.c dispatch_uring.c)
SERVER_HDRS := $(wildcard servers/*.h)
SERVER_LIBS := -luring
FUZZBIN := build/fuzz

BINARIES += $(BIN)/wb-server

$(BIN)/wb-server: $(SERVER_SRCS) $(SERVER_HDRS) servers/build.mk
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -o $@ $(SERVER_SRCS) $(SERVER_LIBS)

$(ASANBIN)/wb-server: $(SERVER_SRCS) $(SERVER_HDRS) servers/build.mk
	@mkdir -p $(@D)
	$(CC) $(ASANFLAGS) $(WARN) -o $@ $(SERVER_SRCS) $(SERVER_LIBS)

# The parser under libFuzzer (clang), with ASan and UBSan.
$(FUZZBIN)/fuzz-http: servers/fuzz/fuzz_http.c servers/http.c servers/http.h servers/build.mk
	@mkdir -p $(@D)
	clang -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  $(WARN) -Iservers -o $@ servers/fuzz/fuzz_http.c servers/http.c

.PHONY: bench-servers bench-servers-sweep bench-servers-nginx
bench-servers: python-deps $(BIN)/wb-server $(BIN)/wb-sclient
	$(PY) servers/bench.py --out docs/bench-servers.md

# Only one part; the other, stored in docs/bench-servers.json, is kept.
bench-servers-sweep: python-deps $(BIN)/wb-server $(BIN)/wb-sclient
	$(PY) servers/bench.py --part sweep --out docs/bench-servers.md

bench-servers-nginx: python-deps $(BIN)/wb-server $(BIN)/wb-sclient
	$(PY) servers/bench.py --part nginx --out docs/bench-servers.md
