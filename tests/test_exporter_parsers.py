"""Pure parsers of the exporter on literal strings (copied from real files)."""

from __future__ import annotations

import pytest

from jobs_exporter import cgroup_parsers, procfs
from jobs_exporter.settings import parse_listen
from tests.helpers.exporter_scrape import FIXTURES

STAT_26231 = (
    "26231 (vim) R 5392 7446 5392 34835 7446 4218880 32533 309516 26 82 1677 44 158 99 20 0 1 0 "
    "82375 56274944 1981 18446744073709551615 4194304 6294284 140736914091744 140736914087944 "
    "139965136429984 0 0 12288 1870679807 0 0 0 17 0 0 0 31 0 0 8391624 8481048 16420864 "
    "140736914093252 140736914093279 140736914093279 140736914096107 0\n"
)
# procfs fixture 584: comm with spaces and parentheses.
STAT_584 = (
    "1020 ((a b ) ( c d) ) R 28378 1020 28378 34842 1020 4218880 286 0 0 0 0 0 0 0 20 0 1 0 "
    "10839175 10395648 155 18446744073709551615 4194304 4238788 140736466511168 "
    "140736466511168 140609271124624 0 0 0 0 0 0 0 17 5 0 0 0 0 0 6336016 6337300 25579520 "
    "140736466515030 140736466515050 140736466515050 140736466518002 0\n"
)


def test_parse_stat():
    assert procfs.parse_stat(STAT_26231) == procfs.StatFields(
        ppid=5392, num_threads=1, starttime=82375
    )


def test_parse_stat_comm_with_parentheses():
    assert procfs.parse_stat(STAT_584) == procfs.StatFields(
        ppid=28378, num_threads=1, starttime=10839175
    )


def test_parse_io_negative_cancelled_write():
    text = (
        "rchar: 750339\nwchar: 818609\nsyscr: 7405\nsyscw: 5245\nread_bytes: 1024\n"
        "write_bytes: 2048\ncancelled_write_bytes: -1024\n"
    )
    assert procfs.parse_io(text) == procfs.IoCounters(1024, 2048, 7405, 5245)


LIMITS = """Limit                     Soft Limit           Hard Limit           Units
Max processes             62898                62898                processes
Max open files            2048                 4096                 files
Max locked memory         18446744073708503040 18446744073708503040 bytes
"""


def test_parse_nofile_limit():
    assert procfs.parse_nofile_limit(LIMITS) == 2048
    assert procfs.parse_nofile_limit(LIMITS.replace("2048 ", "unlimited")) is None
    assert procfs.parse_nofile_limit("Limit Soft Limit\n") is None


def test_parse_status_field():
    text = "\nName:\tprometheus\nTgid:\t26231\nUid:\t1000\t1000\t1000\t0\nThreads:\t1\n"
    assert procfs.parse_status_field(text, "Uid") == "1000"
    assert procfs.parse_status_field(text, "Tgid") == "26231"
    assert procfs.parse_status_field(text, "Gid") is None
    # procfs fixture 26235 uses spaces instead of tabs on some lines
    assert procfs.parse_status_field("Uid:   20821  20821  20821  20821\n", "Uid") == "20821"



@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/scratch", True),
        ("/scratch/alice/out.dat", True),
        ("/scratch/alice/out.dat (deleted)", True),
        ("/scratch2/x", False),
        ("/home/alice", False),
        ("socket:[12345]", False),
        ("pipe:[678]", False),
        ("../../symlinktargets/abc", False),
    ],
)
def test_path_under_whole_components(path, expected):
    prefixes = procfs.normalize_prefixes(["/scratch/", "/tmp/jobreport-scratch"])
    assert procfs.path_under(path, prefixes) is expected


def test_parse_flat_keyed():
    text = "cache 0\nrss 0\ntotal_rss 311296\nhierarchical_memory_limit 191092490240\n"
    assert cgroup_parsers.parse_flat_keyed(text)["total_rss"] == 311296
    assert cgroup_parsers.parse_flat_keyed("usage_usec 126686\nuser_usec 49043\n") == {
        "usage_usec": 126686,
        "user_usec": 49043,
    }


@pytest.mark.parametrize(
    ("text", "count"), [("0-39\n", 40), ("0\n", 1), ("0-3,8,10-11\n", 7), ("\n", 0)]
)
def test_parse_cpu_list(text, count):
    assert len(cgroup_parsers.parse_cpu_list(text)) == count


def test_parse_percpu_trailing_space():
    per = cgroup_parsers.parse_percpu("3710825 3999390 \n")
    assert per == {0: pytest.approx(0.003710825), 1: pytest.approx(0.00399939)}


def test_parse_pressure_total():
    text = (
        "some avg10=0.47 avg60=0.62 avg300=0.69 total=10657030\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
    assert cgroup_parsers.parse_pressure_total(text) == pytest.approx(10.65703)
    with pytest.raises(ValueError):
        cgroup_parsers.parse_pressure_total("full avg10=0.00 total=5\n")


def test_parse_pids():
    assert cgroup_parsers.parse_pids("49276\n49334\n") == [49276, 49334]
    assert cgroup_parsers.parse_pids("") == []


@pytest.mark.parametrize(
    ("cmdline", "job_id"),
    [
        # Seen on Slurm 26.05.5 and 24.11.5 (scripts/vm-cluster): a batch step, and array
        # task 2_1, whose own id (sacct's JobIDRaw) is 3.
        (b"slurmstepd: [16.batch]\0", "16"),
        (b"slurmstepd: [3.batch]\0", "3"),
        # The other forms of Slurm's _set_job_log_prefix (slurmstepd.c): not seen running
        # here (an extern step needs PrologFlags=contain; a het job would not start on
        # these one-node clusters).
        (b"slurmstepd: [7.extern]\0", "7"),
        (b"slurmstepd: [7.0]\0", "7"),
        (b"slurmstepd: [7.interactive]\0", "7"),
        (b"slurmstepd: [8.0+1]\0", "8"),
        (b"slurmstepd: [7.extern stepmgr]\0", "7"),
        (b"slurmstepd: [7.batch]\0\0\0", "7"),  # the rest of the argv area cleared
        # slurmd's own stepd in the scope's `system` cgroup (seen live), and what is not one
        (b"/usr/sbin/slurmstepd\0infinity\0", None),
        (b"python3\0-c\0while True: pass\0", None),
        (b"slurmstepd: [x.batch]\0", None),
        (b"slurmstepd: [7]\0", None),
        (b"", None),
    ],
)
def test_parse_stepd_job_id(cmdline, job_id):
    assert procfs.parse_stepd_job_id(cmdline) == job_id


def test_parse_stepd_job_id_of_captured_processes():
    proc = FIXTURES / "v2-sluid-26.05" / "proc"
    found = {p.name: procfs.parse_stepd_job_id((p / "cmdline").read_bytes())
             for p in proc.iterdir() if p.name.isdigit()}
    assert found == {"2965": "16", "2974": None, "2975": None, "2976": None}



@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9306", ("127.0.0.1", 9306)),
        (":9306", ("0.0.0.0", 9306)),
        ("[::]:9306", ("::", 9306)),
    ],
)
def test_parse_listen(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["9306", "host:", "host:99999", "host:http"])
def test_parse_listen_rejects(text):
    with pytest.raises(ValueError):
        parse_listen(text)
