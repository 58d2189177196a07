"""Chat notices on the real stack: `jobreport sync` and `jobreport email JOBID` (the real
command line, real jobs) with apprise posting to a JSON webhook server on loopback. The
server is down for the first sync: the notice waits in the outbox, `jobreport outbox
--retry` delivers it, and later runs and a send by hand add none; the opted-out user's
job gets no notice. The email goes its own way meanwhile (a real SMTP server)."""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest

from tests.helpers import stack
from tests.helpers.mail import free_port
from tests.helpers.sync import jobreport, mail_env, own_jobs_ended, reach_back
from tests.helpers.sync import sync_past_stand_ins as sync
from tests.helpers.webhook import Webhook

pytestmark = pytest.mark.stack

PUBLIC_URL = "https://jobreport.cluster-support.example.org"
JOBS = (  # idle for its whole run: a finding the policy sends, whatever the load
    stack.StackJob("chat-1", "alice", ("-c1", "--mem=200M", "--time=5"), "sleep 15"),
    stack.StackJob("chat-2", "bob", ("-c1", "--mem=200M", "--time=5"), "sleep 15"),
)


@pytest.fixture(scope="module")
def my_jobs(stack_env) -> tuple[int, list[str]]:
    """This module's own jobs, ended: (a time just before their submission, their ids)."""
    return own_jobs_ended(JOBS)



def test_sync_and_by_hand_notify_each_job_once_after_an_outage(stack_env, my_jobs, smtp,
                                                               tmp_path):
    _, smtp_port = smtp
    t0, (alice_job, bob_job) = my_jobs
    hook = Webhook(free_port())  # down until the retry
    (tmp_path / "optout").write_text("bob\n")
    env = {**os.environ, **mail_env(stack_env, tmp_path, smtp_port),
           "PYTHONPATH": str(stack.ROOT), "JOBREPORT_MAIL_MAP": "",
           "JOBREPORT_MAIL_OPT_OUT": str(tmp_path / "optout"), "JOBREPORT_PUBLIC_URL": PUBLIC_URL,
           "JOBREPORT_CHAT_URLS": hook.url("{user}"), "JOBREPORT_CHAT_MAP": ""}
    try:
        first = sync(env, "--direction", "both", "--max-span", f"{reach_back(t0)}s")
        assert "chat notices: 0 sent" in first and " deferred" in first, first
        assert hook.posts == []
        hook.up()
        retried = jobreport(env, "outbox", "--retry")
        assert "chat notices: " in retried.stdout, retried.stdout + retried.stderr
        sync(env, "--max-span", f"{reach_back(t0)}s")
        again = jobreport(env, "email", alice_job)
        assert again.returncode == 0 and "already sent" in again.stdout, again
        sync(env, "--max-span", f"{reach_back(t0)}s")
    finally:
        hook.down()

    per_job = Counter(body["title"].split()[1] for _, body in hook.posts)
    # Other suites' jobs that ended in the window are notified too, each once as well.
    assert per_job[alice_job] == 1 and set(per_job.values()) == {1}, per_job
    assert bob_job not in per_job and "/bob" not in {p for p, _ in hook.posts}
    (body,) = [b for _, b in hook.posts if b["title"].split()[1] == alice_job]
    # The stack serves its VM clusters too: links name the cluster (/c/<cluster>/jobs/<id>).
    path = (f"/c/{stack_env['JOBREPORT_CLUSTER']}/jobs/{alice_job}"
            if stack_env.get("JOBREPORT_CLUSTERS") else f"/jobs/{alice_job}")
    assert body["message"].endswith(f"Full report: {PUBLIC_URL}{path}"), body
    assert "What to do: " in body["message"], body
    assert re.search(r": (\d+ problems? to fix|nothing to fix)", body["title"]), body
