"""Helpers the tests and the benchmarks share (a throwaway PostgreSQL cluster)."""
