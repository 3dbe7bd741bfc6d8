"""Kernels of ``hookgrad.nn.functional``: fused forward computations and their graph nodes."""
