"""Benchmarks: ops (``blockfuse bench ops``); blocks and models later.

An op declares its benchmark once (``norm.py``: shapes, inputs, providers, byte count),
``runner.py`` times every declaration the same way and ``report.py`` writes the results.
"""
