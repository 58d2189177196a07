"""sacct parsers on literal strings and on real captures (fixtures/sacct, see SOURCES.md)."""

from __future__ import annotations

import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from jobreport_common.slurm_values import gpus_from_tres, parse_tres
from tests.helpers.sacct_fields import CAPTURED_FIELDS
from webapp.model import InvalidJobId, JobNotFound, SourceUnavailable
from webapp.sources.sacct import FIELDS, SacctSource, find_array, parse_sacct, run_sacct
from webapp.sources.sacct_records import delimiter_of
from webapp.sources.sacct_values import (
    parse_memory,
    parse_nodelist,
    parse_req_mem,
    parse_sacct_duration,
    parse_sacct_state,
    parse_time,
)

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "sacct"
K, M, G = 1024, 1024**2, 1024**3

# Column lists of the captures that have no header line (from each project's sacct call).
HB_FIELDS = (
    "JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,"
    "Timelimit,Elapsed,TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,"
    "AllocTRES,TRESUsageInMax,TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,"
    "MaxRSSTask,MaxVMSizeNode,MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWriteNode,"
    "MaxDiskWriteTask,Comment"
).split(",")
JOBINFO_FIELDS = (
    "JobID,JobName,User,Partition,NodeList,NNodes,ncpus,NTasks,State,Submit,start,end,timelimit,"
    "elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,TRESUsageInTot,TRESUsageOutTot,"
    "MaxDiskWrite,MaxDiskRead,MaxRSSNode,MaxDiskWriteNode,MaxDiskReadNode,Comment"
).split(",")
SLURMDOG_FIELDS = (
    "JobID,User,Group,State,Cluster,AllocCPUS,REQMEM,TotalCPU,Elapsed,MaxRSS,ExitCode,NNodes,"
    "NTasks,JobName"
).split(",")
REPORTSEFF_12 = (
    "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,Timelimit,"
    "TotalCPU"
).split(",")
REPORTSEFF_11 = [f for f in REPORTSEFF_12 if f != "Timelimit"]
SLYME_FIELDS = (
    "User,JobID,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU,SystemCPU,ReqMem,"
    "MaxRSS,Submit,Start,End,NodeList"
).split(",")
# The 2014 test rows: 16 documented columns plus one constant the test author appended.
SLYME_2014_FIELDS = (
    "JobID,User,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU,SystemCPU,ReqMem,"
    "MaxRSS,Start,End,NodeList,Extra"
).split(",")


def load(name: str, fields=None, delimiter: str = "|"):
    return {
        j.job_id: j
        for j in parse_sacct((FIX / name).read_text(), fields, delimiter=delimiter, tz=UTC)
    }


# --- pure parsers on literal strings -------------------------------------------------


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("00:19.419", 19.419),  # MM:SS.mmm (TotalCPU)
        ("02:03.640", 123.64),
        ("16:01", 961.0),  # MM:SS
        ("00:00:20", 20.0),  # HH:MM:SS
        ("23:00:00", 82800.0),
        ("1-06:51:32", 111092.0),  # D-HH:MM:SS
        ("762-08:11:49", 762 * 86400 + 8 * 3600 + 11 * 60 + 49),
        ("2-12", 2 * 86400 + 12 * 3600),  # D-HH (Slurm input syntax)
        ("2-12:30", 2 * 86400 + 12 * 3600 + 1800),  # D-HH:MM
        ("1440", 86400.0),  # bare minutes (TimelimitRaw)
        ("UNLIMITED", None),
        ("Partition_Limit", None),
        ("", None),
    ],
)
def test_parse_duration(text, seconds):
    if seconds is None:
        assert parse_sacct_duration(text) is None
    else:
        assert parse_sacct_duration(text) == pytest.approx(seconds)


def test_parse_duration_rejects_garbage():
    with pytest.raises(ValueError):
        parse_sacct_duration("soon")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("3040K", 3040 * K),
        ("4M", 4 * M),
        ("10G", 10 * G),
        ("312.50G", int(312.5 * G)),
        ("1T", 1024 * G),
        ("2P", 2 * 1024**5),
        ("0", 0),
        ("1234567", 1234567),  # no suffix: bytes (sacct shortens only exact multiples)
        ("", None),
        ("16?", None),  # NO_VAL64, past sacct's largest unit: "not known"
    ],
)
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


def test_parse_memory_rejects_garbage():
    with pytest.raises(ValueError):
        parse_memory("lots")


@pytest.mark.parametrize(
    "text, cpus, nodes, expected",
    [
        ("4000Mc", 16, 1, 16 * 4000 * M),  # per CPU
        ("512Mc", 12, 1, 12 * 512 * M),
        ("100Gn", 6, 1, 100 * G),  # per node
        ("5150Mn", 3, 2, 2 * 5150 * M),
        ("500M", 1, 1, 500 * M),  # Slurm >= 21.08: already the job total
        ("1000Mc", None, 1, None),  # multiplier unknown
        ("", 1, 1, None),
    ],
)
def test_parse_req_mem(text, cpus, nodes, expected):
    assert parse_req_mem(text, cpus, nodes) == expected


def test_parse_tres_and_gpus():
    tres = parse_tres("billing=1,cpu=1,mem=500M,node=1,gres/gpu=2")
    assert tres == {"billing": "1", "cpu": "1", "mem": "500M", "node": "1", "gres/gpu": "2"}
    assert gpus_from_tres(tres) == 2
    assert gpus_from_tres(parse_tres("cpu=8,gres/gpu:a100=4,mem=64G")) == 4
    # Typed and untyped together: the untyped total, not the sum of both.
    assert gpus_from_tres(parse_tres("cpu=8,gres/gpu:v100=1,gres/gpu=1,mem=10G")) == 1
    # Usage TRES share the prefix and must not count as GPUs.
    assert gpus_from_tres(parse_tres("gres/gpumem=20500736K,gres/gpuutil=90,mem=1G")) == 0
    assert parse_tres("") == {}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("CANCELLED by 223988", ("CANCELLED", 223988)),
        ("CANCELLED by 0", ("CANCELLED", 0)),
        ("CANCELLED", ("CANCELLED", None)),
        ("OUT_OF_MEMORY", ("OUT_OF_MEMORY", None)),
        ("TIMEOUT", ("TIMEOUT", None)),
        ("NODE_FAIL", ("NODE_FAIL", None)),
    ],
)
def test_parse_state(text, expected):
    assert parse_sacct_state(text) == expected


def test_parse_time_zones():
    # sacct prints the sacct host's local time; a zone turns it into UTC.
    paris = ZoneInfo("Europe/Paris")
    assert parse_time("2024-04-04T19:29:45", paris) == datetime(2024, 4, 4, 17, 29, 45, tzinfo=UTC)
    assert parse_time("2024-01-04T19:29:45", paris) == datetime(2024, 1, 4, 18, 29, 45, tzinfo=UTC)
    assert parse_time("1681342706") == datetime(2023, 4, 12, 23, 38, 26, tzinfo=UTC)
    for missing in ("Unknown", "None", ""):
        assert parse_time(missing) is None
    assert parse_time("2024-04-04T19:29:45").tzinfo is UTC  # local zone, still aware


@pytest.mark.parametrize(
    "text, hosts",
    [
        ("vm", ("vm",)),
        ("omni[1,10-12]", ("omni1", "omni10", "omni11", "omni12")),
        ("hero[4515-4516]", ("hero4515", "hero4516")),
        ("mycluster2-node[022-023,057]", ("mycluster2-node022", "mycluster2-node023",
                                          "mycluster2-node057")),
        ("a[1-2],b3", ("a1", "a2", "b3")),
        ("None assigned", ()),
        ("", ()),
    ],
)
def test_parse_nodelist(text, hosts):
    assert parse_nodelist(text) == hosts


def test_stack_lines_from_the_local_dev_stack():
    # Two lines measured on the real local stack (Slurm 22.05), with their header.
    text = (
        "JobID|JobName|User|Account|Partition|State|Elapsed|TotalCPU|CPUTime|AllocCPUS|ReqMem|"
        "MaxRSS|AllocTRES|Start|End|ExitCode|NodeList|WorkDir\n"
        "1|busy|alice|research|debug|COMPLETED|00:00:20|00:19.419|00:00:20|1|500M||"
        "billing=1,cpu=1,mem=500M,node=1|2026-11-22T13:03:16|2026-11-22T13:03:36|0:0|vm|/home/alice\n"
        "1.batch|batch||research||COMPLETED|00:00:20|00:19.419|00:00:20|1||3040K|"
        "cpu=1,mem=500M,node=1|2026-11-22T13:03:16|2026-11-22T13:03:36|0:0|vm|\n"
    )
    (job,) = parse_sacct(text, tz=UTC)
    assert job.job_id == "1" and job.user == "alice" and job.account == "research"
    assert job.elapsed_seconds == 20 and job.cpus == 1 and job.gpus == 0
    assert job.memory_requested_bytes == 500 * M
    assert job.total_cpu_seconds == pytest.approx(19.419)
    assert job.max_rss_bytes == 3040 * K
    assert job.start_time == datetime(2026, 11, 22, 13, 3, 16, tzinfo=UTC)
    assert job.work_dir == "/home/alice" and job.node_list == "vm"
    (step,) = job.steps
    assert (step.step_id, step.name, step.nodes) == ("batch", "batch", ("vm",))
    # seff's formulas on these numbers
    assert job.total_cpu_seconds / (job.elapsed_seconds * job.cpus) == pytest.approx(0.97095)


def test_header_optional_when_fields_given_and_job_name_with_delimiter():
    fields = ["JobID", "JobName", "State"]
    with_header = "JobID|JobName|State\n5|a|b|COMPLETED\n5.batch|batch|COMPLETED\n"
    (job,) = parse_sacct(with_header, fields)
    assert job.job_name == "a|b" and job.state == "COMPLETED"
    (job,) = parse_sacct(with_header.split("\n", 1)[1], fields)
    assert job.job_name == "a|b" and [s.step_id for s in job.steps] == ["batch"]


def test_bad_lines_are_skipped_not_fatal(caplog):
    text = "JobID|Elapsed|State\n1|soon|COMPLETED\n2|00:01:00|COMPLETED\n3|x\n"
    jobs = parse_sacct(text)
    assert [j.job_id for j in jobs] == ["2"]
    assert "skipped" in caplog.text


# --- real captures --------------------------------------------------------------------


def test_hb_steps_gpus_and_every_time_format():
    jobs = load("DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv")
    assert len(jobs) == 14
    gpu = jobs["7971484"]  # 2 nodes, 4 A100s, a failed step .0
    assert [s.step_id for s in gpu.steps] == ["batch", "extern", "0"]
    assert gpu.gpus == 4 and gpu.cpus == 16 and gpu.memory_requested_bytes == 64 * G
    assert gpu.steps[2].state == "FAILED" and gpu.steps[2].nodes == ("a100gpu2", "a100gpu4")
    assert gpu.time_limit_seconds == 3 * 86400  # 3-00:00:00
    v100 = jobs["7965768"]  # gres/gpu:v100=1,gres/gpu=1 counts once
    assert v100.gpus == 1 and v100.state == "CANCELLED" and v100.cancelled_by == 10314909
    assert v100.max_rss_bytes == 1294440 * K
    big = jobs["6708912"]  # multi-day CPU time, TIMEOUT, batch CANCELLED
    assert big.state == "TIMEOUT" and big.steps[0].state == "CANCELLED"
    assert big.steps[2].total_cpu_seconds == 762 * 86400 + 8 * 3600 + 11 * 60 + 49
    assert big.steps[2].nodes == ("omni11", "omni12")
    # MM:SS.mmm on a step; HH:MM:SS elapsed
    assert jobs["7478253"].steps[0].total_cpu_seconds == pytest.approx(0.225)
    assert jobs["7478253"].elapsed_seconds == 66
    assert jobs["7478253"].steps[2].tasks == 11  # NTasks: MaxRSS is per task
    # NODE_FAIL never started: Start None, no nodes, no steps
    nf = jobs["7336818"]
    assert nf.state == "NODE_FAIL" and nf.start_time is None and nf.steps == ()
    # RUNNING: End Unknown; PENDING: both Unknown
    assert jobs["8298012"].end_time is None and jobs["8298012"].start_time is not None
    assert jobs["7219441"].state == "PENDING" and jobs["7219441"].start_time is None
    # array tasks are jobs of their own, with their steps
    task = jobs["7216821_144"]
    assert task.state == "TIMEOUT" and [s.step_id for s in task.steps] == ["batch", "extern"]
    assert task.memory_requested_bytes == 16000 * M


def test_snowman_delimiter_with_trailing_delimiter_matches_derived_file():
    original = load("hb-jobinfo_sacct_snowmandelim_noheader_trimmed.txt", HB_FIELDS, "☃")
    derived = load("DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv")
    assert original == derived


def test_jobinfo_per_cpu_and_per_node_reqmem():
    jobs = load("slurm-jobinfo_sacct_snowmandelim_noheader_Gn_Mc_trimmed.txt", JOBINFO_FIELDS, "☃")
    assert jobs["20872560"].memory_requested_bytes == 100 * G  # 100Gn x 1 node
    assert jobs["20957017"].memory_requested_bytes == 12 * 512 * M  # 512Mc x 12 CPUs
    assert jobs["20980772"].memory_requested_bytes == 2000 * M  # 2000Mc x 1 CPU
    assert jobs["21085537"].memory_requested_bytes == 80 * 750 * M  # 750Mc x 80 CPUs
    assert jobs["21051464"].memory_requested_bytes == 1000 * G  # 1000Gn
    assert jobs["20957017"].steps[0].max_rss_bytes == 4 * M  # "4M"
    assert jobs["20957017"].steps[1].total_cpu_seconds == 34 * 86400 + 15 * 3600 + 25 * 60 + 49
    assert len(jobs["21085537"].steps[1].nodes) == 21  # ranged 21-node list
    assert jobs["21085537"].steps[2].state == "RUNNING"
    assert jobs["21085523"].state == "PENDING"


def test_reportseff_caret_delimiter_cancelled_by_and_timelimit_oddities():
    jobs = load("reportseff_console_caretdelim_noheader_12col.txt", REPORTSEFF_12, "^|^")
    assert jobs["23000233"].state == "CANCELLED" and jobs["23000233"].cancelled_by == 129319
    assert jobs["23000233"].time_limit_seconds == 6 * 86400
    assert jobs["23000233"].memory_requested_bytes == 16 * 4000 * M
    assert jobs["23000381"].steps[0].max_rss_bytes is None  # empty MaxRSS stays unknown
    assert jobs["23000210"].time_limit_seconds == pytest.approx(0.007)  # hand-edited, kept
    assert jobs["24418435"].memory_requested_bytes == G  # 1Gn


def test_reportseff_array_task_found_by_raw_id():
    jobs = load("reportseff_console_caretdelim_noheader_11col.txt", REPORTSEFF_11, "^|^")
    assert jobs["24220929_421"].memory_requested_bytes == 16000 * M
    assert jobs["24220929_421"].max_rss_bytes == 5664932 * K


def test_reportseff_rows_with_header():
    jobs = load("reportseff_fixture_rows_11col.psv")
    assert jobs["39889258_1426"].time_limit_seconds == 2 * 3600 + 55 * 60
    assert jobs["8205048"].memory_requested_bytes == int(312.5 * G)
    assert jobs["6196869"].time_limit_seconds is None  # UNLIMITED
    assert jobs["6196869"].memory_requested_bytes == 20 * 191846 * M  # Mn x 20 nodes
    assert jobs["45352405"].cancelled_by == 349394
    assert jobs["46044267"].state == "TIMEOUT"
    # 8189521 has no allocation line in the capture: its steps still make a job.
    orphan = jobs["8189521"]
    assert orphan.steps[0].state == "CANCELLED" and orphan.user is None


def test_slurmdog_oom_cancelled_timeout_and_arrays():
    jobs = load("slurmdog_sacct_P_n_alpine_trimmed_14col.psv", SLURMDOG_FIELDS)
    oom = jobs["6144229"]
    assert oom.state == "OUT_OF_MEMORY" and oom.exit_code == "0:125"
    assert oom.steps[0].state == "OUT_OF_MEMORY" and oom.max_rss_bytes == 15330372 * K
    # the job is CANCELLED by its user; its batch step had run out of memory first
    mixed = jobs["12051616"]
    assert (mixed.state, mixed.cancelled_by) == ("CANCELLED", 2000886)
    assert mixed.steps[0].state == "OUT_OF_MEMORY"
    assert jobs["8480274"].steps[1].state == "CANCELLED"  # step-level "CANCELLED by N"
    assert jobs["6240722"].state == "TIMEOUT" and jobs["6240722"].steps[0].exit_code == "0:15"
    assert jobs["6114624"].state == "FAILED" and jobs["6114624"].exit_code == "1:0"
    assert jobs["6144084"].cpus == 0 and jobs["6144084"].steps == ()  # never started
    assert {"9742843_1", "9742843_10"} <= set(jobs)
    assert jobs["9742843_1"].total_cpu_seconds == pytest.approx(0.017)
    assert jobs["8479534"].job_name == "sys/dashboard/sys/jupyter_session"


def test_slyme_old_slurm_rows():
    jobs = load("slyme_JobReportTest_sacct_rows_2014.psv", SLYME_2014_FIELDS)
    assert jobs["10048462"].cancelled_by == 0
    never = jobs["10058675"]
    assert never.cpus == 0 and never.node_list == "None assigned"
    assert never.memory_requested_bytes == 2 * 300000 * M  # Mn x 2 nodes
    assert jobs["10102688"].memory_requested_bytes == 4 * 1000 * M  # Mc x 4 CPUs
    assert jobs["10897512"].end_time is None
    par = load("slyme_sacct_parsable2_noheader_parallel_77454.psv", SLYME_FIELDS)["77454"]
    assert par.steps[1].name == "orted" and par.steps[1].nodes == ("hero4516",)
    assert par.memory_requested_bytes == 2 * 5150 * M
    serial = load("slurmmon_sacct_parsable2_noheader_serial_75269.psv",
                  [f for f in SLYME_FIELDS if f != "Submit"])["75269"]
    assert serial.steps[0].max_rss_bytes == 1504 * K


@pytest.mark.parametrize(
    "name, base",
    [("torchx_sacct_parsable2_hetjob_1853.psv", "1853"),
     ("torchx_sacct_hetjob_176_trailing_pipe.psv", "176")],  # `-p`: trailing | on every line
)
def test_het_jobs(name, base):
    jobs = load(name)
    assert list(jobs) == [f"{base}+0", f"{base}+1", f"{base}+2"]
    assert [s.step_id for s in jobs[f"{base}+0"].steps] == ["batch", "0"]
    assert [s.step_id for s in jobs[f"{base}+1"].steps] == ["0"]
    assert all(j.state == "COMPLETED" and j.exit_code == "0:0" for j in jobs.values())


def test_jobstats_jobidraw_epoch_times_timelimitraw_and_gres_order():
    (job,) = load("jobstats_sacct_P_X_46915114_gpu_used_memory_missing.psv").values()
    assert job.job_id == "46915114" and job.cancelled_by == 223988
    assert job.start_time == datetime(2023, 4, 12, 23, 38, 26, tzinfo=UTC)
    assert job.time_limit_seconds == 840 * 60 and job.gpus == 1
    assert job.memory_requested_bytes == 250 * G
    (late_gres,) = load("jobstats_sacct_P_X_845136_gpu_utilization_missing.psv").values()
    assert late_gres.gpus == 1 and late_gres.memory_requested_bytes == 350 * M
    (timeout,) = load("jobstats_sacct_P_X_49589697_cpu_mem_over_100_percent.psv").values()
    assert timeout.state == "TIMEOUT" and timeout.time_limit_seconds == 600 * 60
    # the QOS column beside the partition, as SacctSource asks for it (FIELDS)
    assert (job.qos, job.partition) == ("gpu-short", "gpu")
    assert (timeout.qos, timeout.partition) == ("short", "cpu")


def test_sacct_is_asked_for_the_qos_only_when_the_view_did_not_answer():
    # the view's qos column holds it; sacct's QOS column costs it a slurmdbd request
    assert "QOS" in FIELDS
    src = SacctSource()
    assert "QOS" in src.fields and "QOS" not in src.figure_fields


def test_pending_array_range_from_local_stack():
    jobs = load("local-pending-array-14.psv")
    assert jobs["14_[1-3]"].state == "PENDING"
    assert jobs["14_[1-3]"].time_limit_seconds is None  # Partition_Limit
    assert jobs["17"].start_time is None and jobs["17"].node_list == "None assigned"


# --- SacctSource with an injected runner ------------------------------------------------


class Runner:
    def __init__(self, out: str = "", exc: Exception | None = None) -> None:
        self.out, self.exc, self.calls = out, exc, []

    def __call__(self, argv: list[str]) -> str:
        self.calls.append(argv)
        if self.exc:
            raise self.exc
        return self.out


def _noheader(name: str) -> str:
    return (FIX / name).read_text().split("\n", 1)[1]


def test_source_argv_and_job():
    line = dict(JobID="1", JobIDRaw="1", JobName="busy", User="alice", State="COMPLETED",
                Elapsed="00:00:08", Start="1795870442", End="1795870450", NodeList="vm")
    calls = []

    def runner(argv):  # answers with the delimiter the call asked for
        calls.append(argv)
        return delimiter_of(argv).join(line.get(f, "") for f in FIELDS) + "\n"

    src = SacctSource("/usr/bin/sacct", runner=runner, cluster="demo")
    job = src.job("1")
    assert job.user == "alice" and job.end_time == datetime.fromtimestamp(1795870450, UTC)
    argv = calls[0]
    assert argv[0] == "/usr/bin/sacct" and "--parsable2" in argv
    # a fresh delimiter per call, no "|" a job name could hold
    assert "|" not in delimiter_of(argv) and len(delimiter_of(argv)) >= 16
    src.job("1")
    assert delimiter_of(calls[1]) != delimiter_of(argv)
    assert argv[argv.index("--format") + 1] == ",".join(FIELDS)
    assert argv[argv.index("--jobs") + 1] == "1"
    assert argv[argv.index("--clusters") + 1] == "demo"
    for name in ("JobID", "JobName", "User", "Account", "Partition", "State", "ExitCode",
                 "Elapsed", "Timelimit", "TotalCPU", "AllocCPUS", "ReqMem", "MaxRSS",
                 "AllocTRES", "Start", "End", "NodeList", "WorkDir"):
        assert name in FIELDS


def test_source_refuses_bad_ids_without_running_anything():
    runner = Runner()
    with pytest.raises(InvalidJobId):
        SacctSource(delimiter="|", runner=runner).job("1; rm -rf /")
    assert runner.calls == []


def test_source_not_found_and_unavailable(tmp_path):
    with pytest.raises(JobNotFound):
        SacctSource(delimiter="|", runner=Runner("")).job("99")
    with pytest.raises(SourceUnavailable) as e:
        SacctSource(runner=Runner(exc=subprocess.TimeoutExpired("sacct", 1))).job("1")
    assert e.value.source == "sacct"
    with pytest.raises(SourceUnavailable, match="not found"):
        SacctSource(str(tmp_path / "no-such-sacct")).job("1")
    failing = tmp_path / "sacct"
    failing.write_text(
        "#!/bin/sh\necho 'sacct: error: Problem talking to the database' >&2\nexit 1\n"
    )
    failing.chmod(0o755)
    with pytest.raises(SourceUnavailable, match="Problem talking to the database"):
        SacctSource(str(failing)).job("1")
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nexec sleep 5\n")
    slow.chmod(0o755)
    with pytest.raises(SourceUnavailable, match="no answer"):
        SacctSource(str(slow), timeout=0.2).job("1")


def test_run_sacct_sets_epoch_time_format(tmp_path):
    fake = tmp_path / "sacct"
    fake.write_text('#!/bin/sh\necho "$SLURM_TIME_FORMAT"\n')
    fake.chmod(0o755)
    assert run_sacct([str(fake)]).strip() == "%s"


def _rows(text: str, fields) -> str:
    """Re-emit a capture in FIELDS order, as SacctSource's own sacct call prints it."""
    out = []
    for line in text.splitlines()[1:]:
        row = dict(zip(fields, line.split("|"), strict=True))
        out.append("|".join(row.get(f, "") for f in FIELDS))
    return "\n".join(out) + "\n"


def test_source_picks_het_leader_array_tasks_and_raw_ids():
    text = (FIX / "torchx_sacct_parsable2_hetjob_1853.psv").read_text()
    fields = text.split("\n", 1)[0].split("|")
    src = SacctSource(delimiter="|", runner=Runner(_rows(text, fields)))
    assert src.job("1853").job_id == "1853+0"
    assert src.job("1853+2").job_id == "1853+2"

    hb = (FIX / "DERIVED_hb-jobinfo_sacct_as_parsable2_with_header.psv").read_text()
    fields = hb.split("\n", 1)[0].split("|")
    lines = [ln for ln in hb.splitlines()[1:] if ln.startswith("7216821_144")]
    one_task = _rows("header\n" + "\n".join(lines), fields)
    # asked by its raw id, sacct answers with the task line: the sole job is the answer
    replay = SacctSource(delimiter="|", runner=Runner(one_task))
    assert replay.job("7216999").job_id == "7216821_144"
    tasks = replay.array("7216821")
    assert [t.job_id for t in tasks] == ["7216821_144"]
    with pytest.raises(JobNotFound):
        rows = _rows(text, text.split("\n", 1)[0].split("|"))
        SacctSource(delimiter="|", runner=Runner(rows)).array("1853")


def test_array_tasks_come_in_task_order_from_either_source():
    """SacctSource and SlurmrestdSource share find_array: the tasks in task order whatever
    order the source answers in (before, only slurmrestd's were sorted), and a task's own
    numeric id (JobIDRaw 33 is 28_1) finds its array."""
    text = (FIX / "local-array-28.psv").read_text()
    header, *lines = text.splitlines()
    # slurmdbd's order: the array's own record (28_4, raw id 28) first, then by raw id
    scrambled = sorted(lines, key=lambda ln: (not ln.startswith("28_4"), ln))
    rows = _rows("\n".join([header, *scrambled]), header.split("|"))
    src = SacctSource(delimiter="|", runner=Runner(rows))
    assert [t.job_id for t in src.array("28")] == ["28_1", "28_2", "28_3", "28_4"]
    assert [t.job_id for t in src.array("33")] == ["28_1", "28_2", "28_3", "28_4"]
    jobs = {j.job_id: j for j in parse_sacct(text, tz=UTC)}
    by_raw_id = [jobs["28_4"], jobs["28_2"], jobs["28_1"], jobs["28_3"]]
    assert [t.job_id for t in find_array("28_2", lambda _: by_raw_id)] == [
        "28_1", "28_2", "28_3", "28_4"]
    with pytest.raises(JobNotFound):
        find_array("29", lambda _: ())


def test_big_outputs_parse_the_same_and_leave_the_collector_as_found():
    import gc

    lines = (FIX / "local-array-28.psv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    big = [header]
    for r in range(1, 800):  # 6,392 lines: above the size where collection pauses
        big += [f"{r}{row}" for row in rows]  # 28_1 -> 128_1, 228_1, ...: distinct jobs
    assert gc.isenabled()
    jobs = parse_sacct("\n".join(big), tz=UTC)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert len(jobs) == 4 * 799
    small = parse_sacct("\n".join([header, *rows]), tz=UTC)
    assert [replace(j, job_id=j.job_id[1:]) for j in jobs[:4]] == list(small)


def test_run_sacct_replaces_bytes_that_are_not_utf8():
    # A site whose accounting DB kept a Latin-1 byte: sacct prints it raw.
    import sys

    from webapp.sources.sacct import run_sacct

    out = run_sacct([sys.executable, "-c",
                     "import sys; sys.stdout.buffer.write(b'1|caf\\xe9|alice\\n')"])
    assert out == "1|caf\N{REPLACEMENT CHARACTER}|alice\n"


def test_a_running_job_known_to_slurmdbd_only_by_its_steps_keeps_its_line():
    # slurmdbd had the step's start but not yet the job's: a placeholder allocation line
    # ("allocation", no partition, PENDING) whose ReqMem is NO_VAL64, printed "16?".
    job = load("local-placeholder-336-running.psv", CAPTURED_FIELDS)["336"]
    assert (job.job_name, job.user, job.state) == ("allocation", "alice", "PENDING")
    assert job.partition is None and job.memory_requested_bytes is None
    assert [s.step_id for s in job.steps] == ["batch"] and job.steps[0].state == "RUNNING"
