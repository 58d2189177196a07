"""Real job shapes for the sync benchmark: captured from the local stack, replayed many times.

``capture`` reads, for each given ended job, every raw ``jobs_*`` sample Prometheus holds
(times relative to the job's start) and the job's ``sacct --parsable2`` lines, into one
JSON file. ``write_openmetrics`` replays those shapes as ``n`` jobs, one starting every
``gap`` seconds on nodes node001..node100, for ``promtool tsdb create-blocks-from
openmetrics``; ``records`` gives each replayed job its accounting and sacct records.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import requests

from webapp.model import AccountingJob, SacctJob
from webapp.sources.sacct import FIELDS, SacctSource, parse_sacct, run_sacct
from webapp.sources.sacct_records import delimiter_of

NODES = 100
EXPORTER_PORT = 9306
COUNTERS = ("_total",)


def capture(prometheus: str, job_ids: list[str], out: Path) -> None:
    shapes = []
    for jid in job_ids:
        argv = SacctSource().argv(jid)  # the report's own command, random delimiter included
        text, delimiter = run_sacct(argv), delimiter_of(argv)
        job = parse_sacct(text, FIELDS, delimiter=delimiter)[0]
        start, end = job.start_time.timestamp(), job.end_time.timestamp()
        span = int(end - start) + 30
        answer = requests.get(f"{prometheus}/api/v1/query", timeout=30, params={
            "query": f'{{__name__=~"jobs_.+",jobid="{jid}"}}[{span}s]', "time": end + 15,
        }).json()["data"]["result"]
        series = [{"labels": {k: v for k, v in r["metric"].items()
                              if k not in ("jobid", "instance", "job")},
                   "samples": [[round(float(t) - start, 3), v] for t, v in r["values"]]}
                  for r in answer]
        shapes.append({"job_id": jid, "fields": list(FIELDS), "sacct": text,
                       "delimiter": delimiter, "series": series})
    out.write_text(json.dumps(shapes, indent=1) + "\n")


@dataclasses.dataclass(frozen=True)
class Replay:
    job_id: str
    shape: dict
    start: int
    node: str


def replays(shapes: list[dict], n: int, t0: int, gap: float) -> list[Replay]:
    return [Replay(str(1_000_000 + i), shapes[i % len(shapes)], t0 + int(i * gap),
                   f"node{i % NODES + 1:03d}") for i in range(n)]


def write_openmetrics(path: Path, jobs: list[Replay]) -> int:
    """Every replayed job's samples, family by family (OpenMetrics forbids interleaving)."""
    families: dict[str, list[tuple[Replay, dict]]] = defaultdict(list)
    for job in jobs:
        for s in job.shape["series"]:
            families[s["labels"]["__name__"]].append((job, s))
    samples = 0
    with open(path, "w", buffering=1 << 20) as out:
        for name, members in sorted(families.items()):
            counter = name.endswith(COUNTERS)
            base = name.removesuffix("_total") if counter else name
            out.write(f"# HELP {base} Replayed from a real job.\n"
                      f"# TYPE {base} {'counter' if counter else 'gauge'}\n")
            for job, s in members:
                labels = {k: v for k, v in s["labels"].items() if k != "__name__"}
                labels.update(jobid=job.job_id, instance=f"{job.node}:{EXPORTER_PORT}",
                              job="jobs-exporter")
                text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                out.write("".join(f"{name}{{{text}}} {v} {job.start + t:.3f}\n"
                                  for t, v in s["samples"]))
                samples += len(s["samples"])
        out.write("# EOF\n")
    return samples


def records(job: Replay, cluster: str) -> tuple[AccountingJob, SacctJob]:
    """The replayed job's sacct record (times and node moved) and accounting record."""
    # The columns the capture asked for (FIELDS has grown since some shapes were taken).
    real = parse_sacct(job.shape["sacct"], job.shape.get("fields", FIELDS),
                       delimiter=job.shape.get("delimiter", "|"))[0]
    shift = job.start - real.start_time.timestamp()

    def moved(t: datetime | None) -> datetime | None:
        return None if t is None else datetime.fromtimestamp(t.timestamp() + shift, UTC)

    sj = dataclasses.replace(real, job_id=job.job_id, start_time=moved(real.start_time),
                             end_time=moved(real.end_time), node_list=job.node,
                             steps=tuple(dataclasses.replace(st, step_id=st.step_id.replace(
                                 real.job_id, job.job_id), nodes=(job.node,))
                                 for st in real.steps))
    acct = AccountingJob(
        cluster=cluster, job_id=job.job_id, job=int(job.job_id), array_job=None,
        array_task=None, het_job=None, het_offset=None, uid=1001, user=sj.user,
        account=sj.account, partition=sj.partition, job_name=sj.job_name, state=sj.state,
        exit_code=sj.exit_code, submit_time=sj.start_time, start_time=sj.start_time,
        end_time=sj.end_time, cpus=sj.cpus, memory_requested_bytes=sj.memory_requested_bytes,
        time_limit_seconds=sj.time_limit_seconds, nodes=(job.node,), node_list=job.node,
        work_dir=sj.work_dir, gpus=sj.gpus)
    return acct, sj


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Capture ended stack jobs' shapes for the "
                                 "sync benchmark: sync_shapes.py capture JOBID...")
    ap.add_argument("command", choices=("capture",))
    ap.add_argument("job_ids", nargs="+", metavar="JOBID")
    ap.add_argument("--prometheus", default="http://127.0.0.1:9090")
    ap.add_argument("-o", "--output", type=Path,
                    default=Path(__file__).resolve().parents[2]
                    / "fixtures/prometheus/sync-shapes.json")
    args = ap.parse_args()
    capture(args.prometheus, args.job_ids, args.output)


if __name__ == "__main__":
    main()
