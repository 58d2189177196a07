"""The account report as text (terminal, email), JSON and PDF (pylatex, compiled as the
job report's PDF is: ``renderers.pdf.compile_tex``; every string through ``escaped``)."""

from __future__ import annotations

import json
import os
import tempfile
import textwrap
from datetime import UTC, datetime

from pylatex import Document, NoEscape

from webapp.json_codec import Json
from webapp.renderers.latex import escaped
from webapp.renderers.pdf import compile_tex
from webapp.staff.account_report import FIGURES, AccountReport

LABELS = {
    "jobs": "jobs",
    "cpu_hours": "CPU-h allocated",
    "cpu_hours_used": "CPU-h used",
    "cpu_hours_idle": "CPU-h idle",
    "gpu_hours": "GPU-h",
    "gpu_hours_idle": "GPU-h idle",
    "memory_gib_hours_asked": "mem GiB-h asked",
    "memory_gib_hours_idle": "mem GiB-h idle",
    "energy_kwh": "kWh",
    "co2e_kg": "kg CO2e",
}
FINDING_COLUMNS = ("finding", "jobs", "cpu_hours_idle", "gpu_hours_idle",
                   "memory_gib_hours_idle")
NOTE_ALLOCATED = ("CPU-h allocated is CPU time allocated (elapsed x allocated CPUs, sacct's "
                  "CPUTimeRAW, what sreport counts); CPU-h used is TotalCPU. Jobs running "
                  "across an edge of the period count their part inside it (sacct -T).")


def day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


def subject(r: AccountReport) -> str:
    return (f"Account {r.account} on {r.cluster}: usage {day(r.since)[:10]} to "
            f"{day(r.until)[:10]}")


def _num(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) and abs(value) >= 1 else f"{value:,.2f}"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    return ["  ".join(c.rjust(w) if i else c.ljust(w)
                      for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()
            for row in (header, *rows)]


def _rows(r: AccountReport, figures: tuple[str, ...] = FIGURES
          ) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    header = ("member", *(LABELS[k] for k in figures))
    rows = [(m.user + ("*" if m.from_accounting else ""),
             *(_num(m.figures[k]) for k in figures)) for m in r.members]
    rows.append(("total", *(_num(r.totals[k]) for k in figures)))
    rows.append(("change", *(("+" if r.change[k] >= 0 else "") + _num(r.change[k])
                             for k in figures)))
    return header, rows


# The text's member table in two, each within 80 columns: compute, then memory and energy.
TEXT_TABLES = (tuple(k for k in FIGURES if k.startswith(("jobs", "cpu_", "gpu_"))),
               tuple(k for k in FIGURES if not k.startswith(("jobs", "cpu_", "gpu_"))))


def verdict(r: AccountReport) -> str:
    """The first line after the title: how much of the CPU time allocated was used."""
    allocated, used = r.totals["cpu_hours"], r.totals["cpu_hours_used"]
    if not allocated:
        return "No CPU time allocated in the period."
    return (f"Used {_num(used)} of {_num(allocated)} CPU-hours allocated "
            f"({used / allocated:.0%}); {_num(r.totals['cpu_hours_idle'])} left idle.")


def render_text(r: AccountReport) -> str:
    lines = [subject(r), f"{day(r.since)} to {day(r.until)}", "", verdict(r), ""]
    for figures in TEXT_TABLES:
        lines += [*_table(*_rows(r, figures)), ""]
    notes = ["change: since the previous period of the same length.", NOTE_ALLOCATED,
             f"CO2e: {r.intensity_source}."]
    if r.from_accounting:
        notes.append(f"* {r.from_accounting} jobs not in the archive yet, from the "
                     "accounting database: their allocated CPU and GPU time only.")
    lines += [w for n in notes for w in textwrap.wrap(n, 80)]
    lines += ["", "Findings that cost the most (CPU-h, GPU-h, GiB-h left idle):"]
    if r.findings:
        lines += _table(("finding", "jobs", "CPU-h idle", "GPU-h idle", "GiB-h idle"),
                        [(f["finding"], *(_num(f[k]) for k in FINDING_COLUMNS[1:]))
                         for f in r.findings])
    else:
        lines.append("(none)")
    return "\n".join(lines) + "\n"


def as_dict(r: AccountReport) -> Json:
    return {
        "cluster": r.cluster, "account": r.account, "since": r.since, "until": r.until,
        "members": [{"user": m.user, "from_accounting": m.from_accounting, **m.figures}
                    for m in r.members],
        "totals": r.totals, "previous": r.previous, "change": r.change,
        "findings": r.findings, "from_accounting": r.from_accounting,
        "co2e_intensity_source": r.intensity_source, "coordinators": list(r.coordinators),
    }


def render_json(r: AccountReport) -> str:
    return json.dumps(as_dict(r), indent=2, sort_keys=True)


def _latex_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    spec = "l" + "r" * (len(header) - 1)
    lines = [" & ".join(escaped(c) for c in row) for row in (header, *rows)]
    return ("{\\small\\begin{tabular}{" + spec + "}\n" + lines[0] + "\\\\\\hline\n"
            + "\\\\\n".join(lines[1:]) + "\\\\\n\\end{tabular}}\n\n")


def render_pdf(r: AccountReport) -> bytes:
    """The report as PDF bytes: landscape, the members' table, the findings, the notes."""
    doc = Document(documentclass="article", document_options=["a4paper", "landscape"],
                   page_numbers=False,  # pylatex's page numbers need lastpage.sty
                   geometry_options={"margin": "1.5cm"})
    doc.append(NoEscape("\\section*{" + escaped(subject(r)) + "}\n"))
    doc.append(NoEscape("\\textbf{" + escaped(verdict(r)) + "}\n\n\\medskip\n"))
    header, rows = _rows(r)
    doc.append(NoEscape(_latex_table(header, rows)))
    notes = ["change: since the previous period of the same length.", NOTE_ALLOCATED,
             f"CO2e: {r.intensity_source}."]
    if r.from_accounting:
        notes.append(f"* {r.from_accounting} jobs not in the archive yet: their allocated "
                     "CPU and GPU time only, from the accounting database.")
    doc.append(NoEscape("\n\n".join(escaped(n) for n in notes) + "\n\n"))
    doc.append(NoEscape("\\subsection*{Findings that cost the most}\n"))
    doc.append(NoEscape(_latex_table(
        ("finding", "jobs", "CPU-h idle", "GPU-h idle", "GiB-h idle"),
        [(f["finding"], *(_num(f[k]) for k in FINDING_COLUMNS[1:])) for f in r.findings])
        if r.findings else "(none)\n"))
    with tempfile.TemporaryDirectory(prefix="jobreport-account-") as tmp:
        base = os.path.join(tmp, "account")
        doc.generate_tex(base)
        compile_tex(base + ".tex")
        with open(base + ".pdf", "rb") as fh:
            return fh.read()
