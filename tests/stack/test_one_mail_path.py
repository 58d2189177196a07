"""One mail path on the real stack: `jobreport email JOBID` by hand and `jobreport sync`, the
two entry points an admin may still use, run back to back (real jobs, the real command
line, a real SMTP server on loopback) email each job once; the old batch's command now
refuses to run instead of sending a second copy. The raw bytes the server received carry
the one-click opt-out headers unencoded."""

from __future__ import annotations

import os
import re
from collections import Counter
from email import message_from_bytes
from email.policy import default

import pytest

from tests.helpers import stack
from tests.helpers.sync import jobreport, mail_env, own_jobs_ended, reach_back
from tests.helpers.sync import sync_past_stand_ins as sync
from webapp.opt_out_token import read_token

pytestmark = pytest.mark.stack

SECRET = "k" * 40
PUBLIC_URL = "https://jobreport.cluster-support.example.org"
JOBS = (  # idle for its whole run: a finding the policy emails, whatever the load
    stack.StackJob("one-path-1", "alice", ("-c1", "--mem=200M", "--time=5"), "sleep 15"),
    stack.StackJob("one-path-2", "bob", ("-c1", "--mem=200M", "--time=5"), "sleep 15"),
    stack.StackJob("one-path-3", "alice", ("-c1", "--mem=200M", "--time=5"), "sleep 15"),
)


@pytest.fixture(scope="module")
def my_jobs(stack_env) -> tuple[int, list[str]]:
    """This module's own jobs, ended: (a time just before their submission, their ids)."""
    return own_jobs_ended(JOBS)



def test_by_hand_and_sync_back_to_back_email_each_job_once(stack_env, my_jobs, smtp,
                                                           tmp_path):
    recorder, port = smtp
    t0, (first, second, third) = my_jobs
    env = {**os.environ, **mail_env(stack_env, tmp_path, port), "PYTHONPATH": str(stack.ROOT),
           "JOBREPORT_MAIL_OPT_OUT": "", "JOBREPORT_MAIL_MAP": "",
           "JOBREPORT_SECRET_KEY": SECRET, "JOBREPORT_PUBLIC_URL": PUBLIC_URL}

    # The old mail timer's command no longer sends anything.
    old = jobreport(env, "email", "--ended-since", "1h")
    assert old.returncode == 2 and "`jobreport sync`" in old.stderr, old.stderr
    # By hand first, then the sync (as its timer would), then by hand, then the sync again.
    done = jobreport(env, "email", first)
    assert done.returncode == 0 and f"sent job {first} report to" in done.stdout, done
    synced = sync(env, "--direction", "both", "--max-span", f"{reach_back(t0)}s")
    assert "already queued" in synced, synced  # the job sent by hand
    again = jobreport(env, "email", second)
    assert again.returncode == 0 and f"job {second} was already sent" in again.stdout, again
    sync(env, "--max-span", f"{reach_back(t0)}s")
    assert jobreport(env, "email", third).returncode == 0

    received = [(rcpt, message_from_bytes(raw, policy=default), raw)
                for rcpt, raw in recorder.messages]
    per_job = Counter(msg["X-Jobreport-Job"] for _, msg, _ in received)
    # Other suites' jobs that ended in the window are emailed too, each once as well.
    assert {first, second, third} <= set(per_job) and set(per_job.values()) == {1}, per_job
    for rcpt, msg, raw in received:
        if msg["X-Jobreport-Job"] not in (first, second, third):
            continue
        owner = "bob" if msg["X-Jobreport-Job"] == second else "alice"
        assert rcpt == [f"{owner}@example.org"]
        head = raw.split(b"\r\n\r\n", 1)[0] + b"\r\n"
        url = re.search(rb"\r\nList-Unsubscribe: <(https://[^>\r\n ]+)>\r\n", head)
        assert url and url.group(1).startswith(f"{PUBLIC_URL}/unsubscribe/".encode()), head
        token = read_token(SECRET, url.group(1).rsplit(b"/", 1)[1].decode(), 90)
        assert token is not None and (token.cluster, token.user, token.expired) == (
            stack_env.get("JOBREPORT_CLUSTER", "demo"), owner, False)
        assert b"\r\nList-Unsubscribe-Post: List-Unsubscribe=One-Click\r\n" in head
        assert b"=?" not in head.split(b"\r\nList-Unsubscribe")[1]
