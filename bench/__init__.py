"""The benchmarks and soak tests, with the Python floor (``bench.floor_proc``). What they
share with the tests lives with the tests (the scale generator,
``tests.helpers.scale_archive``; the captured job shapes, ``tests.helpers.sync_shapes``; a
Prometheus of one's own, ``tests.helpers.prometheus_server``): benchmarks may use the
tests' helpers; tests import a benchmark only to run it small (tests/test_scale_small.py).

Each ``bench_*.py`` runs from the checkout as ``python bench/bench_x.py`` or
``python -m bench.bench_x``; the tests import them as ``bench.bench_x``."""
