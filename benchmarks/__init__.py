"""Benchmarks of the course's code against PyTorch's, one module per section; ``python -m benchmarks.run`` from the
repository root runs them and writes results.md and results.json.
"""
