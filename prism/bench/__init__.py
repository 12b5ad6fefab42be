"""Micro-benchmarks: the device's dense matmul peak and the throughput tests."""
