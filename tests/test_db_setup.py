"""db-setup without a database: --admin-host (TCP) beside --admin-socket, the reader's
host, and the check of slurmdbd's schema against what the views read, on the columns of
Slurm 22.05, 24.11 and 26.05 (captured below; tests/vm/test_accounting_versions.py checks
the captures against the live 24.11 and 26.05 databases)."""

from __future__ import annotations

import pytest

from mgmt.schema import missing_columns, parse_needed_columns
from mgmt.setup import (
    DEFAULT_SOCKET,
    Admin,
    Schema,
    SetupError,
    apply,
    build_statements,
    check_schema,
    parse_host_port,
    views_read,
)
from tests.helpers.mail import free_port
from webapp.cli import build_parser, main
from webapp.cli.db_setup import admin_from

# SHOW COLUMNS of slurmdbd's tables, in table order: 22.05 (the stack's, Debian 12),
# 24.11.5 (Debian 13) and 26.05.5 (Debian testing), each on a fresh database.
_JOB_2205 = (
    "job_db_inx mod_time deleted account admin_comment array_task_str array_max_tasks "
    "array_task_pending constraints container cpus_req derived_ec derived_es env_hash_inx "
    "exit_code flags job_name id_assoc id_array_job id_array_task id_block id_job id_qos "
    "id_resv id_wckey id_user id_group het_job_id het_job_offset kill_requid "
    "state_reason_prev mcs_label mem_req nodelist nodes_alloc node_inx partition priority "
    "script_hash_inx state timelimit time_submit time_eligible time_start time_end "
    "time_suspended gres_used wckey work_dir submit_line system_comment tres_alloc tres_req")
_JOB_2411 = (
    "job_db_inx mod_time deleted account admin_comment array_task_str array_max_tasks "
    "array_task_pending constraints container cpus_req derived_ec derived_es env_hash_inx "
    "exit_code extra flags failed_node job_name id_assoc id_array_job id_array_task id_block "
    "id_job id_qos id_resv id_wckey id_user id_group het_job_id het_job_offset kill_requid "
    "state_reason_prev licenses mcs_label mem_req nodelist nodes_alloc node_inx partition "
    "priority qos_req restart_cnt script_hash_inx state timelimit time_submit time_eligible "
    "time_start time_end time_suspended gres_used wckey work_dir std_err std_in std_out "
    "submit_line system_comment tres_alloc tres_req")
_JOB_2605 = (
    "job_db_inx mod_time deleted account admin_comment array_task_str array_max_tasks "
    "array_task_pending constraints container cpus_req derived_ec derived_es env_hash_inx "
    "exclusive exit_code extra flags failed_node job_name id_assoc id_array_job "
    "id_array_task id_block id_job id_qos id_resv id_wckey id_user id_group het_job_id "
    "het_job_offset kill_requid state_reason_prev licenses mcs_label mem_req nodelist "
    "nodes_alloc node_inx oversubscribe partition priority qos_req restart_cnt resv_req "
    "script_hash_inx sluid state timelimit time_submit time_eligible time_start time_end "
    "time_suspended gres_used wckey work_dir segment_size std_err std_in std_out "
    "submit_line system_comment tres_alloc tres_req")
_ASSOC_TAIL = (
    "shares max_jobs max_jobs_accrue min_prio_thresh max_submit_jobs max_tres_pj "
    "max_tres_pn max_tres_mins_pj max_tres_run_mins max_wall_pj grp_jobs grp_jobs_accrue "
    "grp_submit_jobs grp_tres grp_tres_mins grp_tres_run_mins grp_wall priority def_qos_id "
    "qos delta_qos")
_ASSOC_2205 = ("creation_time mod_time deleted is_def id_assoc user acct partition "
               "parent_acct lft rgt " + _ASSOC_TAIL)
_ASSOC_2411 = ("creation_time mod_time deleted comment flags is_def id_assoc user acct "
               "partition parent_acct id_parent lineage lft rgt " + _ASSOC_TAIL)
_ASSOC_2605 = ("creation_time mod_time deleted comment flags is_def id_assoc user acct "
               "partition parent_acct id_parent lineage " + _ASSOC_TAIL)
_TRES = "creation_time deleted id type name"
_EVENT_2205 = "time_start time_end node_name cluster_nodes reason reason_uid state tres"
_EVENT_2411 = ("deleted time_start time_end node_name extra cluster_nodes instance_id "
               "instance_type reason reason_uid state tres")
_EVENT_2605 = _EVENT_2411
# qos_table (one for all clusters) was not among the tables captured: its leading
# columns, the same in every release's table definition (Slurm's
# accounting_storage_mysql.c, qos_table_fields, unchanged since 2.x), hold all the view
# reads of it (id, name); tests/vm/test_accounting_versions.py checks that against the
# live 24.11 and 26.05 tables.
QOS_HEAD = frozenset("creation_time mod_time deleted id name description".split())
# Slurm release -> table (of a cluster named "c") -> its columns, in table order.
SCHEMAS: dict[str, dict[str, tuple[str, ...]]] = {
    version: {"c_job_table": tuple(job.split()), "c_assoc_table": tuple(assoc.split()),
              "c_event_table": tuple(event.split()), "tres_table": tuple(_TRES.split())}
    for version, job, assoc, event in (("22.05", _JOB_2205, _ASSOC_2205, _EVENT_2205),
                                       ("24.11", _JOB_2411, _ASSOC_2411, _EVENT_2411),
                                       ("26.05", _JOB_2605, _ASSOC_2605, _EVENT_2605))
}


def _schema(version: str, drop: str = "") -> Schema:
    tables = {t: frozenset(cols) for t, cols in SCHEMAS[version].items()}
    tables["qos_table"] = QOS_HEAD
    return Schema(("c",), {t: cols - {drop} for t, cols in tables.items()})


def test_parse_needed_columns_reads_aliases_not_backticked_names():
    sql = ("-- j.commented_out is no column\n"
           "SELECT j.id_job AS job_id, a.user AS user, j.`partition` AS `partition`\n"
           "FROM `{acct_db}`.`{cluster}_job_table` AS j\n"
           "LEFT JOIN `{acct_db}`.`{cluster}_assoc_table` AS a ON a.id_assoc = j.id_assoc")
    assert parse_needed_columns(sql) == {
        "{cluster}_job_table": {"id_job", "partition", "id_assoc"},
        "{cluster}_assoc_table": {"user", "id_assoc"},
    }


def test_the_views_read_these_columns_of_each_cluster():
    needed = views_read(["v24", "v26"])
    assert set(needed) == {"v24_job_table", "v24_assoc_table", "v24_event_table",
                           "v26_job_table", "v26_assoc_table", "v26_event_table", "tres_table",
                           "qos_table"}
    # the node events: when a node of the job was down or drained, and why
    assert needed["v24_event_table"] == {"node_name", "time_start", "time_end", "state",
                                         "reason"}
    assert {"id_job", "het_job_id", "tres_alloc", "work_dir", "deleted"} <= needed["v24_job_table"]
    assert needed["v26_assoc_table"] == {"id_assoc", "user"}
    assert needed["tres_table"] == {"id", "type", "name", "deleted"}
    # the job's QoS by name (qos_table is one for all clusters)
    assert needed["qos_table"] == {"id", "name"}
    assert "id_qos" in needed["v26_job_table"]


@pytest.mark.parametrize("version", sorted(SCHEMAS))
def test_one_sql_fits_every_release(version):
    check_schema(_schema(version), ["c"], "slurm_acct_db")  # raises when one lacks a column


def test_the_releases_differ_in_columns_the_views_do_not_read():
    job = {v: set(s["c_job_table"]) for v, s in SCHEMAS.items()}
    assoc = {v: set(s["c_assoc_table"]) for v, s in SCHEMAS.items()}
    assert job["24.11"] - job["22.05"] == {"extra", "failed_node", "licenses", "qos_req",
                                           "restart_cnt", "std_err", "std_in", "std_out"}
    assert job["26.05"] - job["24.11"] == {"exclusive", "oversubscribe", "resv_req", "sluid",
                                           "segment_size"}
    assert assoc["22.05"] - assoc["26.05"] == {"lft", "rgt"}
    read = views_read(["c"])
    changed = (job["26.05"] ^ job["22.05"]) | (assoc["26.05"] ^ assoc["22.05"])
    assert not changed & (read["c_job_table"] | read["c_assoc_table"])


def test_a_missing_column_or_table_is_named_before_anything_is_created():
    with pytest.raises(SetupError) as err:
        check_schema(_schema("26.05", drop="work_dir"), ["c"], "slurm_acct_db")
    assert "slurm_acct_db.c_job_table has no column work_dir" in str(err.value)
    with pytest.raises(SetupError, match=r"no job table for cluster\(s\) other in "
                                         r"slurm_acct_db \(registered: c\)"):
        check_schema(_schema("24.11"), ["c", "other"], "slurm_acct_db")
    assert missing_columns({"t": frozenset({"x"})}, {}, "db") == ["db.t does not exist"]
    with pytest.raises(SetupError, match=r"slurm_acct_db\.qos_table has no column name"):
        check_schema(_schema("22.05", drop="name"), ["c"], "slurm_acct_db")


def test_the_definer_reads_the_qos_names_and_the_view_joins_them():
    statements = build_statements(["c", "d"], "pw", ["localhost"], "slurm_acct_db")
    grant = ("GRANT SELECT ON `slurm_acct_db`.`qos_table` TO "
             "'jobreport_definer'@'localhost'")
    assert grant in statements
    view = next(s for s in statements if "VIEW jobreport.jobs AS" in s)
    join = "LEFT JOIN `slurm_acct_db`.`qos_table` AS q ON q.id = j.id_qos"
    assert view.count(join) == 2 and view.count("q.name AS qos") == 2  # one per cluster


@pytest.mark.parametrize(("text", "host", "port"), [
    ("db.example.org", "db.example.org", 3306),
    ("127.0.0.1:16133", "127.0.0.1", 16133),
    ("[::1]:3307", "::1", 3307),
    ("[fe80::1]", "fe80::1", 3306),
])
def test_admin_host_and_port(text, host, port):
    assert parse_host_port(text) == (host, port)


@pytest.mark.parametrize("text", ["", "db:0", "db:65536", "db:x", "db:", "a b", "::1:3306",
                                  "db;DROP", "[::1"])
def test_admin_host_rejects(text):
    with pytest.raises(ValueError, match="--admin-host"):
        parse_host_port(text)


def _args(*argv: str):
    return build_parser().parse_args(["db-setup", *argv])


def test_admin_socket_by_default_host_when_named():
    assert admin_from(_args()) == Admin("root", None, socket=DEFAULT_SOCKET)
    assert str(admin_from(_args("--admin-socket", "/tmp/my.sock"))) == "/tmp/my.sock"
    admin = admin_from(_args("--admin-host", "[::1]:3307", "--admin-user", "adm",
                             "--admin-password", "pw"))
    assert (admin.host, admin.port, admin.user, admin.password) == ("::1", 3307, "adm", "pw")
    assert str(admin) == "[::1]:3307"


def test_admin_host_and_socket_exclude_each_other(capsys):
    with pytest.raises(SystemExit):
        _args("--admin-host", "db", "--admin-socket", "/tmp/my.sock")
    assert "not allowed with argument" in capsys.readouterr().err


def test_admin_host_needs_the_readers_host(capsys, monkeypatch):
    monkeypatch.setattr("webapp.cli.db_setup.read_schema", _no_call)
    assert main(["db-setup", "--cluster", "c", "--admin-host", "db"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["jobreport: --admin-host needs --reader-host: the host jobreport connects "
                   "from, as the database server sees it"]


def _no_call(*args, **kwargs):
    raise AssertionError("no database is to be reached")


def test_tcp_setup_reads_the_schema_then_creates_the_reader_at_its_host(monkeypatch, capsys):
    seen: dict[str, object] = {}

    def read_schema(admin, acct_db):
        seen["read"] = admin
        return _schema("26.05") if acct_db == "slurm_acct_db" else None

    monkeypatch.setattr("webapp.cli.db_setup.read_schema", read_schema)
    monkeypatch.setattr("webapp.cli.db_setup.apply",
                        lambda statements, admin: seen.update(applied=(statements, admin)))
    monkeypatch.setenv("JOBREPORT_DB_URL", "mysql://jobreport:s3cret@127.0.0.1:16233/jobreport")
    assert main(["db-setup", "--admin-host", "127.0.0.1:16233", "--admin-user", "adm",
                 "--admin-password", "pw", "--reader-host", "10.0.2.2"]) == 0
    assert capsys.readouterr().out == "jobreport views ready for cluster(s): c\n"
    statements, admin = seen["applied"]
    assert admin == seen["read"] == Admin("adm", "pw", host="127.0.0.1", port=16233)
    assert "CREATE USER IF NOT EXISTS 'jobreport'@'10.0.2.2' IDENTIFIED BY 's3cret'" in statements
    assert "GRANT SELECT ON jobreport.jobs TO 'jobreport'@'10.0.2.2'" in statements
    assert not any("'jobreport'@'localhost'" in s for s in statements)


def test_a_schema_without_a_column_stops_db_setup_before_any_statement(monkeypatch, capsys):
    monkeypatch.setattr("webapp.cli.db_setup.read_schema",
                        lambda admin, acct_db: _schema("24.11", drop="tres_alloc"))
    monkeypatch.setattr("webapp.cli.db_setup.apply", _no_call)
    monkeypatch.setenv("JOBREPORT_DB_URL", "mysql://jobreport:s3cret@127.0.0.1/jobreport")
    assert main(["db-setup", "--cluster", "c"]) == 1
    assert "c_job_table has no column tres_alloc" in capsys.readouterr().err


@pytest.mark.parametrize("host", ["10.0.2.2", "%.example.org", "10.0.2.0/255.255.255.0",
                                  "fe80::1"])
def test_reader_hosts_as_mariadb_writes_them(host):
    statements = build_statements(["c"], "pw", [host], "slurm_acct_db")
    assert f"GRANT SELECT ON jobreport.tres TO 'jobreport'@'{host}'" in statements


@pytest.mark.parametrize("host", ["10.0.2.2'; DROP USER root; --", "a b", ""])
def test_reader_host_injection_is_refused(host):
    with pytest.raises(ValueError, match="reader host"):
        build_statements(["c"], "pw", [host], "slurm_acct_db")


def test_unreachable_tcp_server_is_one_line_naming_host_and_port():
    port = free_port()  # nothing listens there
    with pytest.raises(SetupError) as err:
        apply(["SELECT 1"], Admin("adm", "secret-pw", host="127.0.0.1", port=port))
    assert str(err.value).startswith(f"cannot connect to MariaDB at 127.0.0.1:{port} as adm: ")
    assert "secret-pw" not in str(err.value)


def test_apply_still_takes_a_socket_user_and_password():
    with pytest.raises(SetupError, match="at /nonexistent/sock as someone: "):
        apply(["SELECT 1"], "/nonexistent/sock", "someone", "pw")
