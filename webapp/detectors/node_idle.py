"""A node of a multi-node job that did nothing: its share of the job never reached it."""

from __future__ import annotations

from webapp.detectors.measures import long_enough, node_mean_cores
from webapp.model import Finding, JobReport, Severity
from webapp.thresholds import Thresholds
from webapp.unused import idle_nodes


class NodeIdleDetector:
    name = "node_idle"

    def detect(self, report: JobReport, thresholds: Thresholds) -> tuple[Finding, ...]:
        if report.unfinished or len(report.nodes) < 2:
            return ()
        if not long_enough(report, thresholds.min_runtime_seconds):
            return ()
        cores = node_mean_cores(report)
        if set(cores) != set(report.nodes):
            return ()  # a node without samples is unknown, not idle
        idle = idle_nodes(cores, thresholds.node_idle_cores)
        if not idle:
            return ()
        shown = ", ".join(f"{n}: {cores[n]:.2f} cores" for n in idle)
        return (
            Finding(
                name=self.name,
                severity=Severity.WARNING,
                message=(
                    f"{len(idle)} of the job's {len(report.nodes)} nodes did nothing ({shown} "
                    f"busy on average), yet the job held {'it' if len(idle) == 1 else 'them'} "
                    "whole."
                ),
                advice=(
                    "Check that every node gets work: srun starts tasks on all nodes, "
                    "mpirun or torchrun must be told the node count, and a plain script runs "
                    "on the first node only. If fewer nodes suffice, ask for fewer with "
                    "`--nodes`."
                ),
                evidence_text=(
                    "Mean cores busy per node: "
                    + ", ".join(f"{n} {c:.2f}" for n, c in sorted(cores.items()))
                    + f"; idle below {thresholds.node_idle_cores:g}."
                ),
                evidence={"nodes": len(report.nodes), "idle_nodes": ",".join(idle),
                          **{f"cores_busy_{n}": round(c, 3) for n, c in sorted(cores.items())}},
            ),
        )
