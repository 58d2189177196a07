"""The benchmarks and soak tests, and the pieces they share with the tests: the scale
generator (``bench.scale_archive``), the captured job shapes (``bench.sync_shapes``), the
Python floor (``bench.floor_proc``) and a Prometheus of one's own (``bench.prometheus``).

Each ``bench_*.py`` runs from the checkout as ``python bench/bench_x.py`` or
``python -m bench.bench_x``; the tests import them as ``bench.bench_x``."""
