"""Benchmark adapters: twelve public benchmarks behind one item schema, each scored by its own rule.

This package sits below the suites: any suite may import it, it imports no suite.
"""

from tamperbench.tasks.schema import BenchItem, CodeTests, Domain, IFEvalSpec, Provenance, ScoringRule

__all__ = ["BenchItem", "CodeTests", "Domain", "IFEvalSpec", "Provenance", "ScoringRule"]
