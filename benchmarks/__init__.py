"""The benchmarks: each module is run as ``python -m benchmarks.NAME`` from the repository.

Helpers they share live in :mod:`benchmarks._common` (paths, the shared traces, the
protocol's split) and :mod:`benchmarks.cli` (running the ``hpcpolicy`` command); a smoke run
of each, at tiny sizes, is in ``tests/test_benchmarks_smoke.py``.
"""
