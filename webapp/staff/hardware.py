"""The staff report's hardware table: every GPU that reported faults in the window, per
card (XIDs by code, memory errors by type, and how many jobs held it then), and every node
set down, drained or failing, with the reason given. What the hardware_fault finding tells
one job's owner, gathered for the people who fix the cards."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from webapp.detectors.hardware_fault import PROGRAM_XIDS, XID_MEANINGS
from webapp.model import SourceUnavailable
from webapp.sources.protocols import NodeEventReader, VectorReader
from webapp.staff.tables import Row, Table

log = logging.getLogger(__name__)

KEY = "hardware_faults"
TITLE = "GPU and node faults"


def fault_queries(node: str, window: int, sel: str = "") -> dict[str, str]:
    """Per card over the window: the errors counted, and the jobs that held it then.
    ``sel``: label matchers keeping one cluster's series (``cluster="v24"``), or none."""
    xid = f"increase(jobs_gpu_xid_errors_total{{{sel}}}[{window}s])"
    ecc = f"increase(jobs_gpu_ecc_errors_total{{{sel}}}[{window}s])"
    return {
        "xid": f"sum by ({node}, gpu, xid) ({xid}) > 0",
        "xid_jobs": f"count by ({node}, gpu, xid) ({xid} > 0)",
        "ecc": f"sum by ({node}, gpu, type) ({ecc}) > 0",
        "ecc_jobs": f"count by ({node}, gpu, type) ({ecc} > 0)",
    }


def gpu_rows(answers: dict[str, list[tuple[dict[str, str], float]]], node: str) -> list[Row]:
    def key(m: dict[str, str]) -> tuple[str, str, str]:
        return m.get(node, "?"), m.get("gpu", "?"), m.get("xid") or m.get("type", "")

    jobs = {key(m): v for name in ("xid_jobs", "ecc_jobs") for m, v in answers.get(name, [])}
    rows = []
    for name in ("xid", "ecc"):
        for m, count in answers.get(name, []):
            host, gpu, code = key(m)
            if name == "xid":
                if code in PROGRAM_XIDS:
                    continue  # the program's own error, not the card's
                what = f"XID {code}" + (f" ({XID_MEANINGS[code]})" if code in XID_MEANINGS
                                        else "")
            else:
                what = f"{code} memory errors"
            held = int(jobs.get((host, gpu, code), 0))
            rows.append(Row((f"{host}/{gpu}", what, f"{count:g}", str(held)),
                            {"gpu": f"{host}/{gpu}", "fault": what, "count": count,
                             "jobs": held}))
    return sorted(rows, key=lambda r: (str(r.values["gpu"]), str(r.values["fault"])))


def hardware_table(prometheus: VectorReader, accounting: object, node: str, since: float,
                   until: float, sel: str = "") -> Table:
    """The table; a source that cannot answer leaves its rows out and says so."""
    notes: list[str] = []
    rows: list[Row] = []
    window = max(60, int(until - since))
    try:
        answers = {name: prometheus.vector(q, until)
                   for name, q in fault_queries(node, window, sel).items()}
        rows += gpu_rows(answers, node)
    except SourceUnavailable as exc:
        notes.append(f"GPU faults unavailable: {exc.reason}")
    if isinstance(accounting, NodeEventReader):
        start, end = (datetime.fromtimestamp(t, UTC) for t in (since, until))
        try:
            for e in accounting.node_events(None, start, end):
                if e.state == "IDLE":
                    continue
                when = e.start.strftime("%Y-%m-%d %H:%M UTC")
                rows.append(Row((e.node, f"set {e.state} at {when}", e.reason or "", ""),
                                {"node": e.node, "state": e.state, "start": e.start.timestamp(),
                                 "reason": e.reason}))
        except SourceUnavailable as exc:
            notes.append(f"Node events unavailable: {exc.reason}")
    why = ("GPUs that reported hardware or driver errors while jobs held them (XIDs the "
           "program causes left out) and nodes set down, drained or failing, with the "
           "reason given." + "".join(f" {n[0].upper()}{n[1:]}." for n in notes))
    return Table(KEY, TITLE, why, ("GPU or node", "fault", "count or reason", "jobs"),
                 tuple(rows))
