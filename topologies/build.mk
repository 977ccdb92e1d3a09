# topologies/: wb-linkem (owned by the topologies part): the forwarding loop, the shaping core
# and one file per I/O back end (topologies/linkem/linkem.h says what they share). The AF_XDP
# back end's XDP program is compiled with clang -target bpf against the system's UAPI headers
# (it reads no kernel structure: no vmlinux.h, no BTF needed) and embedded by a bpftool
# skeleton; wb-linkem links libbpf to load it.
LINKEM_DIR := topologies/linkem
LINKEM_GEN := build/linkem
LINKEM_SRC := $(addprefix $(LINKEM_DIR)/,linkem.c shaping.c io_tun.c io_xdp.c)
LINKEM_DEPS := $(LINKEM_SRC) $(LINKEM_DIR)/linkem.h $(LINKEM_GEN)/io_xdp.skel.h
LINKEM_LIBS := -lbpf -lm -lpthread
BINARIES += $(BIN)/wb-linkem $(ASANBIN)/wb-linkem

$(LINKEM_GEN)/io_xdp.bpf.o: $(LINKEM_DIR)/io_xdp.bpf.c
	@mkdir -p $(@D)
	clang -g -O2 -target bpf -Wall -Werror -I/usr/include/$(shell $(CC) -print-multiarch) \
	  -c $< -o $@
	llvm-strip -g $@

$(LINKEM_GEN)/io_xdp.skel.h: $(LINKEM_GEN)/io_xdp.bpf.o
	bpftool gen skeleton $< > $@.tmp && mv $@.tmp $@

$(BIN)/wb-linkem: $(LINKEM_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -I$(LINKEM_GEN) -o $@ $(LINKEM_SRC) $(LINKEM_LIBS)

$(ASANBIN)/wb-linkem: $(LINKEM_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ASANFLAGS) $(WARN) -I$(LINKEM_GEN) -o $@ $(LINKEM_SRC) $(LINKEM_LIBS)

.PHONY: bench-wan
bench-wan: python-deps $(BIN)/wb-linkem $(BIN)/wb-server $(BIN)/wb-sclient
	$(VENV)/bin/wanbench run --out results/bench --allow-invalid scenarios/bench/bench-wan.yaml
	$(PY) topologies/bench_wan.py --out docs/bench-wan.md
