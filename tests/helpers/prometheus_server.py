"""A Prometheus of a benchmark's (or a test's) own: recorded series backfilled with
``promtool tsdb create-blocks-from openmetrics`` into a data directory, served on a
loopback port until ``stop``."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import requests


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def backfill(openmetrics: Path, data: Path, max_block: str | None = None) -> None:
    """promtool writes the OpenMetrics file's samples as TSDB blocks into ``data``
    (``max_block``: --max-block-duration, promtool's 2h unless given)."""
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                    *([f"--max-block-duration={max_block}"] if max_block else []),
                    str(openmetrics), str(data)],
                   check=True, capture_output=True, timeout=3600)


def start_prometheus(tmp: Path, data: Path, port: int,
                     admin: bool = False) -> subprocess.Popen:
    """Prometheus on 127.0.0.1:``port`` over ``data`` (30 days kept), scraping nothing, its
    config and log in ``tmp``; once it answers ready (within 120 s)."""
    config = tmp / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 30s\nscrape_configs: []\n")
    with open(tmp / "prometheus.log", "w") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            [
                "prometheus",
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                "--storage.tsdb.retention.time=30d",
                f"--web.listen-address=127.0.0.1:{port}",
                *(["--web.enable-admin-api"] if admin else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited: {(tmp / 'prometheus.log').read_text()[-2000:]}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/-/ready", timeout=1).status_code == 200:
                return proc
        except requests.RequestException:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"prometheus on :{port} not ready after 120 s")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
