"""Files in /dev/shm or another tmpfs held much of the job's memory.

A tmpfs file lives in memory: the kernel charges it to the job's cgroup as shared memory
(``jobs_memory_shmem_bytes``) and cannot drop it as it drops page cache, so it counts
against ``--mem`` like the program's own data, and may outlive the job (a file left in
/dev/shm keeps its memory after the processes end). On cgroup v1 Slurm's MaxRSS leaves
it out, so seff and sacct show a job that held a GiB there as using almost none.
"""

from __future__ import annotations

from webapp.detectors.measures import memory_limit
from webapp.formatting import format_bytes, format_percent
from webapp.model import Finding, JobReport, NodeMemory, Severity
from webapp.thresholds import Thresholds


def tmpfs_node(report: JobReport, thresholds: Thresholds) -> NodeMemory | None:
    """The node whose shared memory was largest, when it passes both thresholds."""
    shared = [n for n in report.memory_nodes if n.shmem_bytes]
    if not shared:
        return None
    top = max(shared, key=lambda n: n.shmem_bytes or 0)
    shmem, held = top.shmem_bytes or 0, top.held_bytes or 0
    if (shmem < thresholds.tmpfs_memory_min_bytes or not held
            or shmem < thresholds.tmpfs_memory_share * held):
        return None
    return top


class MemoryInTmpfsDetector:
    name = "memory_in_tmpfs"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        node = tmpfs_node(report, thresholds)
        if node is None:
            return ()
        shmem, held = node.shmem_bytes or 0, node.held_bytes or 0
        limit = memory_limit(report)
        where = f" on {node.node}" if len(report.memory_nodes) > 1 else ""
        of_limit = f", {format_percent(held / limit)} of the limit" if limit else ""
        # cgroup v1's MaxRSS is anonymous memory alone; v2's counts the files too
        unseen = node.max_rss_bytes is not None and node.max_rss_bytes < shmem / 2
        max_rss = (f" Slurm's MaxRSS ({format_bytes(node.max_rss_bytes)}) leaves them out, "
                   "so sacct and seff do not show them." if unseen else "")
        evidence: dict[str, float | int | str] = {
            "node": node.node,
            "memory_shmem_bytes": shmem,
            "memory_held_bytes": held,
        }
        if node.anon_bytes is not None:
            evidence["memory_anon_bytes"] = node.anon_bytes
        if node.max_rss_bytes is not None:
            evidence["max_rss_bytes"] = node.max_rss_bytes
        if limit:
            evidence["memory_limit_bytes"] = limit
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"Files in /dev/shm or another in-memory file system (tmpfs) held up to "
                    f"{format_bytes(shmem)} of the job's memory{where}: they count against "
                    "its memory limit like the program's own data, and stay in memory "
                    f"until deleted.{max_rss}"
                ),
                advice=(
                    "Write temporary files to the node's local disk (`$TMPDIR` or the "
                    "site's local scratch) instead of /dev/shm, and delete what you put in "
                    "/dev/shm as soon as the job is done with it. Data that must stay in "
                    "memory needs room in `--mem`."
                ),
                evidence_text=(
                    f"Shared memory (tmpfs, /dev/shm) peaked at {format_bytes(shmem)}"
                    f"{where}; with anonymous memory the job held up to "
                    f"{format_bytes(held)} there{of_limit}."
                ),
                evidence=evidence,
            ),
        )
