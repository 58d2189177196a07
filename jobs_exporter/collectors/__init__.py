"""One collector per file; each has ``name`` and ``collect(jobs)`` yielding metric families.

The list of collectors that run is the explicit tuple ``jobs_exporter.registry.COLLECTORS``.
"""
