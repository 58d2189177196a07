"""Integration tests on the real local stack (Slurm, MariaDB, Prometheus, SMTP, Chromium)."""
