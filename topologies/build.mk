# topologies/: wb-linkem (owned by the topologies part)
BINARIES += $(BIN)/wb-linkem $(ASANBIN)/wb-linkem

$(BIN)/wb-linkem: topologies/linkem/linkem.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -o $@ $< -lm -lpthread

$(ASANBIN)/wb-linkem: topologies/linkem/linkem.c
	@mkdir -p $(@D)
	$(CC) $(ASANFLAGS) $(WARN) -o $@ $< -lm -lpthread

.PHONY: bench-wan
bench-wan: python-deps $(BIN)/wb-linkem $(BIN)/wb-server $(BIN)/wb-sclient
	$(VENV)/bin/wanbench run --out results/bench --allow-invalid scenarios/bench/bench-wan.yaml
	$(PY) topologies/bench_wan.py --out docs/bench-wan.md
