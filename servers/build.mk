# servers/: wb-server (one HTTP core, one file per dispatch backend), its ASan+UBSan build,
# the libFuzzer target for the HTTP parser, and `make bench-servers`.
SERVER_SRCS := $(addprefix servers/,main.c server.c http.c stats.c dispatch.c pollset.c \
  epollset.c dispatch_select.c dispatch_poll.c dispatch_devpoll.c dispatch_epoll.c \
  dispatch_rtsig.c dispatch_uring.c) clients/sclient/pacing.c
SERVER_HDRS := $(wildcard servers/*.h) clients/sclient/pacing.h
# --source paces its stream as wb-sclient's stream connections do: the same file
SERVER_LIBS := -Iclients/sclient -luring
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

.PHONY: bench-servers bench-servers-idle bench-servers-nginx bench-servers-report
# Two scenarios run by the runner (results under results/bench/, kept in the repository), then
# docs/bench-servers.md rendered from the newest run of each. Invalid runs are reported there.
BENCH_RUN := $(VENV)/bin/wanbench run --out results/bench --allow-invalid
bench-servers: bench-servers-idle bench-servers-nginx
	$(PY) servers/bench.py --out docs/bench-servers.md

# One part alone, then `make bench-servers-report` (it takes the other part's newest run).
bench-servers-idle: python-deps $(BIN)/wb-server $(BIN)/wb-sclient
	$(BENCH_RUN) scenarios/bench/bench-servers-idle.yaml

bench-servers-nginx: python-deps $(BIN)/wb-server $(BIN)/wb-sclient
	$(BENCH_RUN) scenarios/bench/bench-servers-nginx.yaml

bench-servers-report: python-deps
	$(PY) servers/bench.py --out docs/bench-servers.md
