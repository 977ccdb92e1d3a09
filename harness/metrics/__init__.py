"""Samplers: CPU per process and per CPU, packets in a namespace, perf counters and profiles."""
