"""Micro-benchmarks: the throughput tests (the device's matmul peak they divide by is `prism.runtime.peak`)."""
