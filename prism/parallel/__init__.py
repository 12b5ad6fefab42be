"""Distributed training: rank discovery (`env`) and the parallel layout (`parallel`)."""
