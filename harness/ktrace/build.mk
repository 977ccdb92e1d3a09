# harness/ktrace/: wb-ktrace, the in-kernel timer: an eBPF program (libbpf CO-RE, compiled here with
# clang -target bpf against a vmlinux.h dumped from this kernel's BTF), its bpftool skeleton
# and its loader, as bcc's libbpf-tools are built. No BPF compiler at run time: CO-RE
# relocates the object to whichever kernel loads it. A kernel without BTF cannot run it, so
# it is built only where /sys/kernel/btf/vmlinux exists (harness/metrics/ktrace.py then says
# why the kernel columns are null).
VMLINUX_BTF := /sys/kernel/btf/vmlinux
KTRACE_GEN  := build/ktrace
BPF_ARCH    := $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(shell uname -m)))
BPF_CFLAGS  := -g -O2 -target bpf -D__TARGET_ARCH_$(BPF_ARCH) -Wall -Werror

ifneq ($(wildcard $(VMLINUX_BTF)),)
BINARIES += $(BIN)/wb-ktrace $(ASANBIN)/wb-ktrace
endif

$(KTRACE_GEN)/vmlinux.h:
	@mkdir -p $(@D)
	bpftool btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

$(KTRACE_GEN)/ktrace.bpf.o: harness/ktrace/ktrace.bpf.c harness/ktrace/ktrace.h $(KTRACE_GEN)/vmlinux.h
	clang $(BPF_CFLAGS) -I$(KTRACE_GEN) -Iharness/ktrace -c $< -o $@
	llvm-strip -g $@  # DWARF: CO-RE needs only the object's BTF

$(KTRACE_GEN)/ktrace.skel.h: $(KTRACE_GEN)/ktrace.bpf.o
	bpftool gen skeleton $< > $@.tmp && mv $@.tmp $@

KTRACE_DEPS := harness/ktrace/ktrace.c harness/ktrace/ktrace.h $(KTRACE_GEN)/ktrace.skel.h

$(BIN)/wb-ktrace: $(KTRACE_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -I$(KTRACE_GEN) -Iharness/ktrace -o $@ $< -lbpf

$(ASANBIN)/wb-ktrace: $(KTRACE_DEPS)
	@mkdir -p $(@D)
	$(CC) $(ASANFLAGS) $(WARN) -I$(KTRACE_GEN) -Iharness/ktrace -o $@ $< -lbpf

# The probe effect: the quickstart's points with kernel_trace off and on, side by side in one
# run (results/bench/bench-ktrace/, tables and manifest kept), then docs/bench-ktrace.md.
.PHONY: bench-ktrace
bench-ktrace: python-deps $(BIN)/wb-ktrace $(BIN)/wb-server $(BIN)/wb-sclient
	$(VENV)/bin/wanbench run --out results/bench --allow-invalid scenarios/bench/bench-ktrace.yaml
	$(PY) scripts/bench_ktrace.py --out docs/bench-ktrace.md
