#!/usr/bin/env bash
# Installs the Debian packages wanbench needs that this machine lacks; does nothing when all are present.
# Usage: setup-system.sh [test]
set -euo pipefail

# command-or-file : Debian package
needs=(
  "cc:gcc" "make:make" "clang:clang" "/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a:libclang-rt-14-dev"
  "ip:iproute2" "tc:iproute2" "taskset:util-linux" "ps:procps" "ping:iputils-ping"
  "wrk:wrk" "httperf:httperf" "nginx:nginx-light" "perf:linux-perf"
  "/usr/include/liburing.h:liburing-dev"
  # kernels under test in guests (virtme-ng, a Python dependency, drives them): QEMU, and the
  # static busybox of virtme-ng's initramfs
  "qemu-system-x86_64:qemu-system-x86" "/usr/share/doc/busybox-static:busybox-static"
)
# `setup-system.sh test`: also what only the tests use (the report is checked in a real browser)
[[ ${1:-} == test ]] && needs+=("chromium:chromium" "chromedriver:chromium-driver")

missing=()
for entry in "${needs[@]}"; do
  what=${entry%%:*}; pkg=${entry##*:}
  if [[ $what == /* ]]; then [[ -e $what ]] && continue
  else command -v "$what" >/dev/null 2>&1 && continue; fi
  [[ " ${missing[*]} " == *" $pkg "* ]] || missing+=("$pkg")
done

# The live-netem guest test boots Debian's 6.12 generic kernel (9p and sch_netem as modules;
# the -cloud flavour lacks 9p), whichever 6.12 release the archive has now.
guest_kernel() { compgen -G '/boot/vmlinuz-6.12.*-amd64' >/dev/null; }
if [[ ${1:-} == test ]] && ! guest_kernel; then
  if [[ $(id -u) -eq 0 ]]; then apt-get update -q >/dev/null; fi
  pkg=$(apt-cache search --names-only '^linux-image-6\.12\.[0-9.]+\+deb[0-9]+-amd64-unsigned$' \
        | cut -d' ' -f1 | sort -V | tail -n 1)
  missing+=("${pkg:-linux-image-6.12-amd64-unsigned}")
fi

[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "wanbench: missing Debian packages: ${missing[*]}" >&2
  echo "fix: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "wanbench: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
