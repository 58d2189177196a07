"""docs/policy.md's first example on the stack: `short_job` off in partition `debug`. A
2-second job in `debug` has no `short_job` finding under it, its twin in `gpu` keeps it,
and `jobreport policy explain` names the override."""

from __future__ import annotations

import json
import re
import subprocess

from tests.helpers import stack

DOC = stack.ROOT / "docs" / "policy.md"


def policy_block() -> str:
    """The first code block under the heading naming `short_job` and `debug`."""
    text = DOC.read_text()
    heading = next(m for m in re.finditer(r"^#+ .*$", text, re.M)
                   if "short_job" in m.group() and "debug" in m.group())
    return re.search(r"```\w*\n(.*?)```", text[heading.end():], re.S).group(1)


def test_short_job_off_in_debug_only(tmp_path):
    (tmp_path / "debug.toml").write_text(policy_block())
    env = {**stack.load_env(), "JOBREPORT_POLICY_DIR": str(tmp_path)}
    twins = {p: stack.submit(stack.StackJob(f"policy-{p}", "alice",
                                            ("-p", p, "-c1", "--mem=200M", "--time=5"),
                                            "sleep 2"))
             for p in ("debug", "gpu")}
    # Ahead of the session's other queued jobs: these take seconds.
    subprocess.run(["scontrol", "top", ",".join(twins.values())], check=False,
                   capture_output=True)
    stack.wait_until_done(list(twins.values()))
    found = {}
    for p, job_id in twins.items():
        out = stack.jobreport("show", job_id, "--format", "json", env=env)
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["partition"] == p and report["coverage"]["policy_version"]
        found[p] = {f["name"] for f in report["findings"]}
    assert "short_job" not in found["debug"] and "short_job" in found["gpu"]
    explain = stack.jobreport("policy", "explain", twins["debug"], env=env)
    assert explain.returncode == 0, explain.stderr
    assert "short_job in partition debug: off" in explain.stdout
    assert "debug.toml:" in explain.stdout
    gpu = stack.jobreport("policy", "explain", twins["gpu"], env=env)
    assert "no override applies" in gpu.stdout
