"""docs/policy.md's other two worked examples on the stack, on the session's own jobs:
an exempt account (the doc's `benchmark`, here bob's `teaching`: the stack has no
benchmarking account) and the site rule on GPU memory (its hour shortened to 10 s: the
stack's jobs run seconds)."""

from __future__ import annotations

import json
import re

from tests.helpers import stack

DOC = stack.ROOT / "docs" / "policy.md"


def block_under(*words: str) -> str:
    """The first code block under the first heading naming every one of ``words``."""
    text = DOC.read_text()
    heading = next(m for m in re.finditer(r"^#+ .*$", text, re.M)
                   if all(w in m.group() for w in words))
    return re.search(r"```\w*\n(.*?)```", text[heading.end():], re.S).group(1)


def findings(job_id: str, env: dict[str, str]) -> dict[str, dict]:
    out = stack.jobreport("show", job_id, "--format", "json", env=env)
    assert out.returncode == 0, out.stderr
    return {f["name"]: f for f in json.loads(out.stdout)["findings"]}


def test_an_exempt_account_has_no_cpu_efficiency_finding(stack_jobs, tmp_path):
    policy = block_under("exempt", "account").replace('"benchmark"', '"teaching"')
    assert 'excluded_accounts = ["teaching"]' in policy
    (tmp_path / "exempt.toml").write_text(policy)
    idle = stack_jobs["idle"]  # bob's, account teaching: `sleep 30` on one core
    assert "cpu_efficiency_low" in findings(idle, stack.load_env())
    env = {**stack.load_env(), "JOBREPORT_POLICY_DIR": str(tmp_path)}
    assert "cpu_efficiency_low" not in findings(idle, env)
    explain = stack.jobreport("policy", "explain", idle, env=env)
    assert explain.returncode == 0, explain.stderr
    assert "exempt.toml:" in explain.stdout and "teaching" in explain.stdout, explain.stdout


def test_the_site_rule_on_gpu_memory_flags_the_idle_card_only(stack_jobs, tmp_path):
    rule = block_under("site rule", "GPU memory")
    assert "elapsed_seconds > 3600" in rule
    (tmp_path / "gpu-memory.toml").write_text(rule.replace("elapsed_seconds > 3600",
                                                           "elapsed_seconds > 10"))
    env = {**stack.load_env(), "JOBREPORT_POLICY_DIR": str(tmp_path)}
    check = stack.jobreport("policy", "check", str(tmp_path), env=env)
    assert check.returncode == 0, check.stdout + check.stderr
    gpu = findings(stack_jobs["gpu-untouched"], env)  # a whole card; the replay holds ~1 GB
    assert gpu["gpu_memory_fits_smaller_card"]["severity"] == "info"
    assert re.search(r"held at most \d+\.\d GB of memory for 0\.0 hours",
                     gpu["gpu_memory_fits_smaller_card"]["message"])
    # Partition debug, no GPU: out of the rule's scope and condition.
    assert "gpu_memory_fits_smaller_card" not in findings(stack_jobs["busy"], env)
