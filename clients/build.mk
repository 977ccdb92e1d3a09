# clients/: wb-sclient (owned by the clients part)
SCLIENT_SRC := $(wildcard clients/sclient/*.c)
SCLIENT_HDR := $(wildcard clients/sclient/*.h)

# The results format's version its documents carry: defined once, in clients/schema.py, and
# read from there (no copy to keep in step).
SCLIENT_SCHEMA := clients/schema.py
SCLIENT_SCHEMA_VERSION := $(shell sed -n 's/^SCHEMA_VERSION = \([0-9][0-9]*\)$$/\1/p' $(SCLIENT_SCHEMA))
ifeq ($(SCLIENT_SCHEMA_VERSION),)
$(error $(SCLIENT_SCHEMA) defines no SCHEMA_VERSION = N line for wb-sclient's documents)
endif
SCLIENT_DEFS := -DSCHEMA_VERSION=$(SCLIENT_SCHEMA_VERSION)

BINARIES += $(BIN)/wb-sclient

$(BIN)/wb-sclient: $(SCLIENT_SRC) $(SCLIENT_HDR) $(SCLIENT_SCHEMA)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(WARN) $(SCLIENT_DEFS) -o $@ $(SCLIENT_SRC) -lm

$(ASANBIN)/wb-sclient: $(SCLIENT_SRC) $(SCLIENT_HDR) $(SCLIENT_SCHEMA)
	@mkdir -p $(dir $@)
	$(CC) $(ASANFLAGS) $(WARN) $(SCLIENT_DEFS) -o $@ $(SCLIENT_SRC) -lm

# Side-by-side generator benchmarks (docs/bench-clients.md); needs wb-server.
.PHONY: bench-clients
bench-clients: python-deps $(BIN)/wb-sclient $(BIN)/wb-server
	$(PY) scripts/bench_clients.py --out docs/bench-clients.md
