"""Kernels under test: a kernel image booted in a virtual machine (virtme-ng over QEMU) runs
the same scenario as the host, and the runs are compared (`wanbench run --kernel`)."""
