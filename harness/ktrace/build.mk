# harness/ktrace/: the in-kernel tracers, two tools built alike, as bcc's libbpf-tools are: each
# an eBPF program (libbpf CO-RE, compiled here with clang -target bpf against a vmlinux.h dumped
# from this kernel's BTF), its bpftool skeleton and its loader. wb-ktrace times the measured
# trees' system calls and the network softirqs; wb-whoran tells who ran on one CPU. They share
# common.h, common.bpf.h and loader.c. No BPF compiler at run time: CO-RE relocates each object
# to whichever kernel loads it. A kernel without BTF cannot run them, so they are built only
# where /sys/kernel/btf/vmlinux exists (harness/metrics/ktrace.py then says why the kernel
# columns are null).
VMLINUX_BTF := /sys/kernel/btf/vmlinux
KTRACE_GEN  := build/ktrace
KTRACE_DIR  := harness/ktrace
KTRACE_TOOLS := ktrace whoran
BPF_ARCH    := $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(shell uname -m)))
BPF_CFLAGS  := -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Werror

KTRACE_BINS := $(KTRACE_TOOLS:%=$(BIN)/wb-%)
KTRACE_ASAN_BINS := $(KTRACE_TOOLS:%=$(ASANBIN)/wb-%)

ifneq ($(wildcard $(VMLINUX_BTF)),)
BINARIES += $(KTRACE_BINS) $(KTRACE_ASAN_BINS)
endif

$(KTRACE_GEN)/vmlinux.h:
	@mkdir -p $(@D)
	bpftool btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

$(KTRACE_TOOLS:%=$(KTRACE_GEN)/%.bpf.o): $(KTRACE_GEN)/%.bpf.o: $(KTRACE_DIR)/%.bpf.c \
		$(KTRACE_DIR)/%.h $(KTRACE_DIR)/common.h $(KTRACE_DIR)/common.bpf.h $(KTRACE_GEN)/vmlinux.h
	clang $(BPF_CFLAGS) -I$(KTRACE_GEN) -I$(KTRACE_DIR) -c $< -o $@
	llvm-strip -g $@  # DWARF: CO-RE needs only the object's BTF

$(KTRACE_TOOLS:%=$(KTRACE_GEN)/%.skel.h): $(KTRACE_GEN)/%.skel.h: $(KTRACE_GEN)/%.bpf.o
	bpftool gen skeleton $< > $@.tmp && mv $@.tmp $@

# a tool's loader (% is the tool): its .c, the shared loader.c, its skeleton
KTRACE_LOADER_DEPS := $(KTRACE_DIR)/%.c $(KTRACE_DIR)/%.h $(KTRACE_DIR)/loader.c \
	$(KTRACE_DIR)/loader.h $(KTRACE_DIR)/common.h $(KTRACE_GEN)/%.skel.h

$(KTRACE_BINS): $(BIN)/wb-%: $(KTRACE_LOADER_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -I$(KTRACE_GEN) -I$(KTRACE_DIR) -o $@ $(filter %.c,$^) -lbpf

$(KTRACE_ASAN_BINS): $(ASANBIN)/wb-%: $(KTRACE_LOADER_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ASANFLAGS) $(WARN) -I$(KTRACE_GEN) -I$(KTRACE_DIR) -o $@ $(filter %.c,$^) -lbpf

# The probe effect: the quickstart's points with kernel_trace off and on, side by side in one
# run (results/bench/bench-ktrace/, tables and manifest kept), then docs/bench-ktrace.md.
.PHONY: bench-ktrace
bench-ktrace: python-deps $(BIN)/wb-ktrace $(BIN)/wb-server $(BIN)/wb-sclient
	$(VENV)/bin/wanbench run --out results/bench --allow-invalid scenarios/bench/bench-ktrace.yaml
	$(PY) scripts/bench_ktrace.py --out docs/bench-ktrace.md

# What the hooks alone cost (programs attached, not counting) beside tracing whole, on the
# quickstart's epoll point: results/bench/bench-ktrace-hooks/, then docs/bench-ktrace-hooks.md.
.PHONY: bench-ktrace-hooks
bench-ktrace-hooks: python-deps $(BIN)/wb-ktrace $(BIN)/wb-server $(BIN)/wb-sclient
	$(PY) scripts/bench_ktrace_hooks.py
