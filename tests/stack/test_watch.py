"""`jobreport watch` on the real stack: two idle GPU jobs (the replayed NVML readings
are an idle Tesla T4) watched over a 30 s window. Each gets exactly one alert, however
many runs; with a `[[cancel]]` table of the site's policy directory on the `gpu`
partition that exempts account `research`,
`--dry-run` cancels nothing, the next run cancels bob's job (account `teaching`) and
names the rule in the log and the email, and alice's job is never cancelled."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from email import message_from_bytes
from email.policy import default

import pytest
from aiosmtpd.controller import Controller

from tests.helpers import stack
from tests.helpers.mail import Recorder, free_port
from tests.helpers.wait import wait_for
from webapp.watch_records import AlertLog

WINDOW = 30  # seconds of idle GPU before an alert (1 h in production)
IDLE_GPU = "sleep 240"
BOB = stack.StackJob("watch-idle-gpu", "bob", ("-c1", "--mem=200M", *stack.IDLE_GPU,
                                               "--time=10"), IDLE_GPU)
ALICE = stack.StackJob("watch-idle-gpu", "alice", ("-c1", "--mem=200M", *stack.IDLE_GPU,
                                                   "--time=10"), IDLE_GPU)
POLICY = """
[[cancel]]
rule = "gpu_idle"
partition = "gpu"
grace_minutes = 0.05
excluded_accounts = ["research"]
"""


@pytest.fixture(scope="module")
def watched(stack_env, tmp_path_factory) -> Iterator[dict]:
    tmp = tmp_path_factory.mktemp("watch")
    recorder = Recorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port())
    controller.start()
    (tmp / "policy").mkdir()
    (tmp / "policy" / "watch.toml").write_text(POLICY)
    base = stack.load_env()
    env = {**base, "JOBREPORT_SMTP_HOST": "127.0.0.1",
           "JOBREPORT_SMTP_PORT": str(controller.port), "JOBREPORT_OUTBOX": str(tmp / "outbox"),
           "JOBREPORT_MAIL_TO": "{user}@example.org",
           "JOBREPORT_THRESHOLDS": ",".join(filter(None, (
               base.get("JOBREPORT_THRESHOLDS"), f"gpu_idle_seconds={WINDOW}")))}
    ids = {"bob": stack.submit(BOB), "alice": stack.submit(ALICE)}
    try:
        for job_id in ids.values():
            stack.wait_until_running(job_id, timeout=400)
        yield {"ids": ids, "env": env, "recorder": recorder, "tmp": tmp}
    finally:
        subprocess.run(["scancel", *ids.values()], check=False)
        controller.stop()


def watch(w: dict, *args: str, policy: bool = False) -> str:
    env = {**w["env"], **({"JOBREPORT_POLICY_DIR": str(w["tmp"] / "policy")}
                          if policy else {})}
    jobs = [a for job_id in w["ids"].values() for a in ("--jobid", job_id)]
    proc = stack.jobreport("watch", *jobs, *args, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def alerts_by_job(recorder: Recorder) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for _, raw in recorder.messages:
        msg = message_from_bytes(raw, policy=default)
        out.setdefault(msg["X-Jobreport-Job"], []).append(msg["Subject"])
    return out


def test_idle_gpu_job_gets_exactly_one_alert_over_three_runs(watched):
    ids = watched["ids"]
    queued: list[str] = []
    outs = [""]

    def both_queued() -> bool:  # runs until each job's window is covered (they start apart)
        outs[0] = watch(watched)
        queued.extend(j for j in ids.values() for line in outs[0].splitlines()
                      if line.startswith(f"job {j} ") and line.endswith("gpu_idle: queued"))
        return len(queued) >= 2

    wait_for(both_queued, 4 * WINDOW, lambda: f"both jobs' alerts queued: {outs[0]}", every=5)
    assert sorted(queued) == sorted(ids.values())  # each queued once, never again
    for _ in range(2):
        out = watch(watched)
        assert out.count("gpu_idle: sent before") == 2 and "queued" not in out
    got = alerts_by_job(watched["recorder"])
    assert {j: len(s) for j, s in got.items()} == {ids["bob"]: 1, ids["alice"]: 1}
    assert all("its GPUs are idle" in s[0] for s in got.values())
    body = message_from_bytes(watched["recorder"].messages[0][1], policy=default)
    assert f"scancel {body['X-Jobreport-Job']}" in body.get_body(("plain",)).get_content()


def test_policy_cancels_after_grace_dry_run_does_not_and_exempt_never(watched):
    ids = watched["ids"]

    def past_the_grace() -> str | None:  # 3 s after the notices of the test before
        out = watch(watched, "--dry-run", policy=True)
        return out if f"enforce: job {ids['bob']} rule gpu_idle: would cancel" in out else None

    dry = wait_for(past_the_grace, 60, "the dry run cancelling bob's job")
    assert f"job {ids['alice']}" not in dry.split("enforce:", 1)[-1]
    assert stack.states(list(ids.values())) == {ids["bob"]: "RUNNING", ids["alice"]: "RUNNING"}
    out = watch(watched, policy=True)
    assert f"enforce: job {ids['bob']} rule gpu_idle: cancelled" in out
    wait_for(lambda: stack.states([ids["bob"]])[ids["bob"]] != "RUNNING", 60,
             f"bob's job {ids['bob']} cancelled")
    assert stack.states([ids["bob"]])[ids["bob"]] == "CANCELLED"
    assert stack.states([ids["alice"]])[ids["alice"]] == "RUNNING"
    log = AlertLog(watched["env"]["JOBREPORT_OUTBOX"])
    (c,) = log.cancellations(0)
    log.close()
    assert (c.job_id, c.user, c.account, c.rule) == (ids["bob"], "bob", "teaching", "gpu_idle")
    cancel = [s for s in alerts_by_job(watched["recorder"])[ids["bob"]] if "cancelled" in s]
    assert len(cancel) == 1 and "its GPUs are idle" in cancel[0]
    again = watch(watched, policy=True)
    assert f"job {ids['alice']} (alice, research, gpu) gpu_idle: sent before" in again
    assert stack.states([ids["alice"]])[ids["alice"]] == "RUNNING"
