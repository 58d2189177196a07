"""Retention per cluster on the stack's MariaDB: two clusters sharing one archive, each
pruned by its own retention, keep each other's old rows in every table. SQLite:
tests/test_archive.py."""

from __future__ import annotations

from tests.helpers.sync import create_mariadb_archive, drop_mariadb_archive
from tests.test_archive import check_retention_per_cluster

NAME = "jobreport_retention"


def test_each_cluster_keeps_its_own_retention_in_a_shared_mariadb_archive(stack_env):
    url = create_mariadb_archive(NAME)
    try:
        check_retention_per_cluster(url)
    finally:
        drop_mariadb_archive(NAME)
