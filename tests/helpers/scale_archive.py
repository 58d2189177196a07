"""A week of a large site in the archive, made of the project's real captures.

The job shapes are real ended jobs: the staff window the stack's sacct returned
(``fixtures/sacct/local-staff-window.psv``, parsed by the staff report's own parser) and
the six jobs of ``fixtures/prometheus/sync-shapes.json`` (their sacct record, and from
their raw samples what the staff report's bulk queries read: GPU utilisation and memory,
CPU seconds per node). ``staff_jobs(n, users)`` replays them as ``n`` jobs ending evenly
over ``days``, renumbered, owned round-robin by ``users`` users (one user, ``user0000``,
gets ``heavy`` of them: the "my jobs" of a busy user), run times scaled by a factor
1..``stretch`` (a large site's jobs run hours, the stack's seconds: every figure of the
job scales with it, so ratios stay as captured). A job's energy is DERIVED from its CPU
time as the exporter's split would give it on the captured RAPL package
(``fixtures/exporter/energy/powercap``: 95 W at most over the capture machine's 2 CPUs,
so 47.5 J per busy CPU-second). ``fill`` writes them into an archive in batches, with a
progress bar.

``fill_reports`` writes the same jobs as archived reports (``archive_jobs``, what the sync
stores and the weekly digest reads): the archived form of the tests' sample reports (a
busy CPU job; a two-GPU job with one GPU idle and every finding) given each generated
job's identity, times and figures (request, run time, CPU time, peak, energy). Of their
series only the GPUs' use and the CPU cores are kept (3-9 KB a record; the full plotted
series add 20-35 KB a job that nothing timed here reads).

    .venv/bin/python tests/helpers/scale_archive.py ARCHIVE_URL [--jobs 700000] [--users 5000]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

if not __package__:  # run as a file (python tests/helpers/scale_archive.py): the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webapp.archive.record import ArchivedJob
from webapp.archive.staff_rows import StaffRows  # noqa: E402
from webapp.archive.store import Archive
from webapp.sources.sacct import FIELDS, parse_sacct  # noqa: E402
from webapp.staff.archived import staff_row  # noqa: E402
from webapp.staff.data import StaffJob, parse_window  # noqa: E402
from webapp.staff.data import staff_job as staff_job_of  # noqa: E402
from webapp.staff.tables import memory_peak  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLUSTER = "bench"
DAY = 86400
BATCH = 20_000
JOULES_PER_CPU_SECOND = 95.0 / 2  # the captured package's max power over its 2 CPUs


def _mean(samples: list) -> float | None:
    return sum(float(v) for _, v in samples) / len(samples) if samples else None


def shapes() -> list[StaffJob]:
    """The real ended jobs every generated job is a copy of."""
    text = (FIXTURES / "sacct/local-staff-window.psv").read_text()
    out = [j for j in parse_window(text, 0, 2**40) if j.elapsed > 0]
    for shape in json.loads((FIXTURES / "prometheus/sync-shapes.json").read_text()):
        real = parse_sacct(shape["sacct"], shape.get("fields", FIELDS),
                           delimiter=shape.get("delimiter", "|"))[0]
        by_name: dict[str, list[dict]] = {}
        for s in shape["series"]:
            by_name.setdefault(s["labels"].get("__name__", ""), []).append(s)
        util = [_mean(s["samples"]) for s in by_name.get("jobs_gpu_utilization_ratio", [])]
        used = [float(v) for s in by_name.get("jobs_gpu_memory_used_bytes", [])
                for _, v in s["samples"]]
        total = [float(v) for s in by_name.get("jobs_gpu_memory_total_bytes", [])
                 for _, v in s["samples"]]
        cpu = [float(v) for s in by_name.get("jobs_cpu_seconds_total", [])
               for _, v in s["samples"]]
        j = staff_job_of(real, real.job_id, real.start_time.timestamp() - 1)
        out.append(dataclasses.replace(
            j, sacct=None, max_rss=j.max_rss,
            gpu_utilization=(sum(u for u in util if u is not None) / len(util)) if util else None,
            gpu_memory_used=max(used) if used else None,
            gpu_memory_total=max(total) if total else None,
            node_cpu_seconds={n: max(cpu) for n in j.nodes} if cpu else {}))
    return out


def staff_jobs(n: int, users: int, days: float = 7.0, until: int = 1_800_000_000,
               heavy: int = 2000, stretch: int = 720) -> Iterator[StaffJob]:
    """``n`` jobs that ended in the ``days`` before ``until`` (see the module's doc)."""
    base = shapes()
    heavy_every = max(1, n // heavy) if heavy else 0
    for i in range(n):
        s = base[i % len(base)]
        f = 1 + (i * 7919) % stretch
        end = until - days * DAY + (i + 1) * days * DAY / n
        elapsed = s.elapsed * f
        start = end - elapsed
        wait = (s.start - s.submit) * f if s.start and s.submit else 0.0
        user = "user0000" if heavy_every and i % heavy_every == 0 else \
            f"user{1 + i % max(1, users - 1):04d}"
        node = f"n{(i * 13) % 10_000:05d}"
        yield dataclasses.replace(
            s, job_id=str(5_000_000 + i), raw_id=str(5_000_000 + i), user=user,
            account=f"acct{int(user[4:]) % 50:02d}",
            submit=start - wait, start=start, end=end, elapsed=elapsed,
            time_limit=s.time_limit * f if s.time_limit else None,
            cpu_seconds=s.cpu_seconds * f if s.cpu_seconds is not None else None,
            nodes=(node,) if len(s.nodes) == 1 else s.nodes,  # every captured job: 1 node
            node_cpu_seconds={node: sum(s.node_cpu_seconds.values()) * f}
            if s.node_cpu_seconds and len(s.nodes) == 1 else {},
            pending_reasons=tuple((r, t * f) for r, t in s.pending_reasons),
            sacct=None, max_rss=memory_peak(s),
            energy_joules=s.cpu_seconds * f * JOULES_PER_CPU_SECOND
            if s.cpu_seconds is not None else None)


def _templates() -> dict[bool, dict]:
    """Archived summary and series of a CPU and of a GPU sample report, by "has GPUs"."""
    from tests.helpers.reports import busy_cpu_report, many_findings_report
    from webapp.report.archived import archive_record

    out = {}
    for gpus, report in ((False, busy_cpu_report()), (True, many_findings_report())):
        record = archive_record(report)
        keep = ("cpu_cores", "gpu_utilization") if gpus else ("cpu_cores",)
        out[gpus] = {"summary": record.summary,
                     "series": {k: v for k, v in record.series.items() if k in keep}}
    return out


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat() if t else None


def archived_report(j: StaffJob, template: dict) -> ArchivedJob:
    """The generated job ``j`` as an archived report shaped like ``template``'s."""
    summary = dict(template["summary"])
    summary.update(
        cluster=CLUSTER, job_id=j.job_id, user=j.user, account=j.account, state=j.state,
        partition=j.partition, cpus=j.cpus, gpus=j.gpus, nodes=list(j.nodes),
        elapsed_seconds=j.elapsed, cpu_seconds=j.cpu_seconds,
        memory_requested_bytes=j.memory_requested, memory_peak_bytes=j.max_rss,
        submit_time=_iso(j.submit), start_time=_iso(j.start), end_time=_iso(j.end),
        usage={**summary["usage"], "energy_joules": j.energy_joules})
    return ArchivedJob(CLUSTER, j.job_id, int(j.submit or 0), int(j.end or 0), j.user,
                       j.state, 30.0, summary, template["series"], float(j.end or 0))


def fill_reports(url: str, n: int, users: int, progress: bool = True, **kw: object) -> int:
    """Write ``staff_jobs(n, users, **kw)`` into the archive at ``url`` as archived
    reports (``archived_report``); rows written."""
    templates = _templates()
    archive = Archive(url)
    jobs = iter(staff_jobs(n, users, **kw))
    bar = tqdm(total=n, disable=not progress, unit="job", desc="reports")
    written = 0
    try:
        while True:
            batch = [archived_report(j, templates[j.gpus > 0])
                     for _, j in zip(range(BATCH), jobs, strict=False)]
            if not batch:
                break
            with archive.db.transaction():
                written += sum(archive.put(record) for record in batch)
            bar.update(len(batch))
    finally:
        bar.close()
        archive.close()
    return written


def fill(url: str, n: int, users: int, progress: bool = True, **kw: object) -> int:
    """Write ``staff_jobs(n, users, **kw)`` into the archive at ``url``; rows written."""
    archive = Archive(url)
    rows = StaffRows(archive.db)
    batch: list[dict] = []
    try:
        for j in tqdm(staff_jobs(n, users, **kw), total=n, disable=not progress,
                      unit="job", desc="archive"):
            batch.append(staff_row(CLUSTER, j))
            if len(batch) >= BATCH:
                with archive.db.transaction():
                    rows.put(batch)
                batch = []
        with archive.db.transaction():
            rows.put(batch)
    finally:
        archive.close()
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--jobs", type=int, default=700_000)
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--reports", action="store_true",
                    help="archived reports (the digest's input) instead of staff rows")
    args = ap.parse_args()
    (fill_reports if args.reports else fill)(args.url, args.jobs, args.users)


if __name__ == "__main__":
    main()
