"""The benchmarks and soak tests, with the scale generator (``bench.scale_archive``) and
the Python floor (``bench.floor_proc``). What they share with the tests lives with the
tests (the captured job shapes, ``tests.helpers.sync_shapes``; a Prometheus of one's own,
``tests.helpers.prometheus_server``): benchmarks may use the tests' helpers, not the
other way round (the scale generator is still imported by the scale tests).

Each ``bench_*.py`` runs from the checkout as ``python bench/bench_x.py`` or
``python -m bench.bench_x``; the tests import them as ``bench.bench_x``."""
