"""The demo stack shows what a site sees: `scripts/dev-stack` runs `jobreport sync` on a
short timer (the one path that archives ended jobs and emails them), so a newcomer's
"My jobs" list on the stack's own web app shows each ended job's findings rather than
"not archived yet"."""

from __future__ import annotations

import os
import re

from tests.helpers import stack
from tests.helpers.stack import StackJob
from tests.helpers.wait import wait_for

SYNC_EVERY = 60  # scripts/dev-stack's SYNC_EVERY
IDLE = StackJob("demo-sync-idle", "alice", ("-c1", "--mem=500M", "--time=10"), "sleep 15")


def _sync_loop_runs() -> bool:
    pid_file = stack.STACK_ROOT / "var" / "dev-stack" / "sync.pid"
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text().strip()), 0)
    except (ValueError, ProcessLookupError):
        return False
    return True


def _row(page: str, job_id: str) -> str:
    """The job's row of the "My jobs" table ("" when it is not listed)."""
    row = re.search(rf'<tr[^>]*data-job="{job_id}".*?</tr>', page, re.S)
    return row.group(0) if row else ""


def _findings(row: str) -> str | None:
    cell = re.search(r'<td class="[^"]*\bfindings">([^<]*)</td>', row)
    return cell.group(1).strip() if cell else None


def test_my_jobs_on_the_demo_stack_lists_findings(stack_env):
    assert _sync_loop_runs(), "scripts/dev-stack start runs no `jobreport sync` loop"
    job_id = stack.submit(IDLE)
    stack.wait_until_done([job_id])
    base = "http://" + stack_env["JOBREPORT_BIND"]
    session = stack.login(base, "alice")
    # The next run, or a slow one: the loop runs at nice 19, behind the test workers.
    rows = [""]

    def counted() -> bool:
        rows[0] = _row(session.get(f"{base}/", timeout=30).text, job_id)
        return (_findings(rows[0]) or "").isdigit()

    wait_for(counted, 10 * SYNC_EVERY, lambda: f"job {job_id}'s findings counted in {rows[0]!r}",
             every=5)
    row = rows[0]
    cell = _findings(row)
    assert int(cell) >= 1  # sleep 15 on one core: idle CPU at the least
    assert "not archived yet" not in row
