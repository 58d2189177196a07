"""The archive: each ended job's report summary and downsampled series, kept after
Prometheus has dropped the job (SQLite by default, MariaDB when web hosts share it).

A source-like layer: it stores and returns plain records and ``JobReport``s, and knows
nothing of renderers or of how a report is built.
"""
