"""Benchmarks: ops (``blockfuse bench ops``), blocks and models (``bench block`` / ``bench model``,
``model hf-llama``), and ``blockfuse report``, all timed and written by the same helpers.

An op declares its benchmark once (``norm.py``: shapes, inputs, providers, byte count),
``runner.py`` times every declaration the same way and ``report.py`` writes the results.
"""
