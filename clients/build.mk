# clients/: wb-sclient (owned by the clients part)
SCLIENT_SRC := $(wildcard clients/sclient/*.c)
SCLIENT_HDR := $(wildcard clients/sclient/*.h)

BINARIES += $(BIN)/wb-sclient

$(BIN)/wb-sclient: $(SCLIENT_SRC) $(SCLIENT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WARN) -o $@ $(SCLIENT_SRC) -lm

$(ASANBIN)/wb-sclient: $(SCLIENT_SRC) $(SCLIENT_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(ASANFLAGS) $(WARN) -o $@ $(SCLIENT_SRC) -lm

# Side-by-side generator benchmarks (docs/bench-clients.md); needs wb-server.
.PHONY: bench-clients
bench-clients: python-deps $(BIN)/wb-sclient $(BIN)/wb-server
	$(PY) scripts/bench_clients.py --out docs/bench-clients.md
