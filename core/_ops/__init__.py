"""Differentiable operations: each module pairs forward kernels with their backward nodes."""
