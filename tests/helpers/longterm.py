"""A long-term store beside the stack for the tests: VictoriaMetrics on a free loopback
port, fed by remote_write from a Prometheus of the test's own that scrapes the stack's
exporters as the stack's Prometheus does (which is never restarted or reconfigured)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from tests.helpers import stack
from tests.helpers.mail import free_port
from tests.helpers.prometheus_server import stop
from tests.helpers.wait import wait_for

SCRAPE = """global:
  scrape_interval: 5s
  evaluation_interval: 5s
scrape_configs:
  - job_name: jobs
    static_configs:
{targets}  - job_name: slurm
    static_configs:
      - targets: ['127.0.0.1:9089']
remote_write:
  - url: http://127.0.0.1:{vm_port}/api/v1/write
    queue_config: {{batch_send_deadline: 1s}}
"""


def _ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    def ready() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited: {log.read_text()[-2000:]}")
        try:
            return requests.get(url, timeout=1).status_code == 200
        except requests.RequestException:
            return False

    wait_for(ready, timeout, f"{url} ready", every=0.2)


@contextmanager
def prometheus_with_victoriametrics(tmp: Path) -> Iterator[tuple[str, str]]:
    """(Prometheus URL, VictoriaMetrics URL), both stopped (by pid) on exit."""
    vm_port, prom_port = free_port(), free_port()
    procs: list[subprocess.Popen] = []
    try:
        with open(tmp / "vm.log", "w") as log:
            # latencyOffset: VictoriaMetrics hides the last 30 s by default (samples still
            # arriving); the test asks only about ended jobs.
            procs.append(subprocess.Popen(
                ["victoria-metrics", f"-storageDataPath={tmp / 'vm-data'}",
                 f"-httpListenAddr=127.0.0.1:{vm_port}", "-retentionPeriod=1",
                 "-search.latencyOffset=1s", "-search.disableCache"],
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp))
        vm = f"http://127.0.0.1:{vm_port}"
        _ready(f"{vm}/health", procs[-1], tmp / "vm.log")
        (tmp / "prometheus.yml").write_text(
            SCRAPE.format(vm_port=vm_port, targets=stack.exporter_targets_yaml()))
        with open(tmp / "prometheus.log", "w") as log:
            procs.append(subprocess.Popen(
                ["prometheus", f"--config.file={tmp / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp / 'prom-data'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp))
        prom = f"http://127.0.0.1:{prom_port}"
        _ready(f"{prom}/-/ready", procs[-1], tmp / "prometheus.log")
        yield prom, vm
    finally:
        for proc in reversed(procs):
            stop(proc)
