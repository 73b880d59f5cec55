"""Offline evaluations of memlane against public benchmarks (LoCoMo)."""
