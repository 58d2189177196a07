"""The report service's image (Dockerfile), built by `scripts/image build` from the wheel and
the runtime lock, run from its own root filesystem as its non-root user against the stack
(podman cannot start a container on these cgroup v1 hosts: docs/deploying.md): after
`jobreport db-upgrade`, its gunicorn serves a job's page and PDF, and `jobreport sync` runs
from the same image as a second command on the same state volume. It holds the runtime
dependencies only."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
import requests

from tests.helpers import stack
from tests.helpers.mail import free_port
from tests.helpers.wait import wait_for
from tests.helpers.web import pdf_of

IMAGE = stack.ROOT / "scripts" / "image"
# Test and lint tools of the dev extra: none may be importable in the image.
DEV_MODULES = ("pytest", "xdist", "hypothesis", "aiosmtpd", "selenium", "ruff", "importlinter",
               "bandit", "pip_audit", "build")
RUNTIME_MODULES = ("flask", "gunicorn", "pymysql", "matplotlib", "pylatex", "apprise", "pynvml",
                   "prometheus_client", "sqlalchemy", "alembic", "webapp", "jobs_exporter",
                   "slurm_exporter", "mgmt")


def in_image(*argv: str, volumes: tuple[str, ...] = (), env_file: Path | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``argv`` run in the image as its USER (scripts/image run)."""
    opts = [f"--volume={v}" for v in volumes]
    if env_file:
        opts.append(f"--env-file={env_file}")
    return subprocess.run([str(IMAGE), "run", *opts, "--", *argv], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image(stack_env) -> None:
    """The image, built (seconds when scripts/dev-stack start built it already)."""
    built = subprocess.run([str(IMAGE), "build"], capture_output=True, text=True, timeout=1200)
    assert built.returncode == 0, built.stderr[-3000:]


def test_image_holds_runtime_dependencies_only(image):
    probe = in_image("python3", "-c", f"""
import importlib.metadata as md, importlib.util as iu, json, os
print(json.dumps({{
    "uid": os.getuid(),
    "missing": [m for m in {RUNTIME_MODULES!r} if iu.find_spec(m) is None],
    "dev": [m for m in {DEV_MODULES!r} if iu.find_spec(m) is not None],
    "dists": sorted(d.metadata["Name"].lower().replace("_", "-") for d in md.distributions()),
}}))""")
    assert probe.returncode == 0, probe.stderr[-2000:]
    found = json.loads(probe.stdout)
    assert found["uid"] != 0, "the image runs as root"
    assert found["missing"] == [] and found["dev"] == []
    # Exactly the runtime lock, the project and the venv's own pip and setuptools.
    locked = {line.split("==")[0] for line in
              (stack.ROOT / "requirements.txt").read_text().splitlines()
              if "==" in line and not line.startswith(" ")}
    assert set(found["dists"]) - {"pip", "setuptools", "jobreport"} == locked
    helped = in_image("jobreport", "--help")
    assert helped.returncode == 0 and "usage: jobreport" in helped.stdout, helped.stderr[-2000:]


@pytest.fixture(scope="module")
def served(image, stack_env, tmp_path_factory):
    """The image's CMD (gunicorn) as its USER on a port of its own, with the stack's settings
    and secrets as a site mounts them; (its URL, the settings file, the volumes, the state
    directory on the host)."""
    uid = int(in_image("id", "-u").stdout)
    gid = int(in_image("id", "-g").stdout)
    where = tmp_path_factory.mktemp("image")
    secrets, state = where / "secrets", where / "state"
    secrets.mkdir()
    state.mkdir()
    os.chown(state, uid, gid)
    for name in ("passwords", "slurmrestd.jwt"):
        shutil.copy(stack.STACK_ROOT / "var" / name, secrets / name)
        os.chown(secrets / name, uid, gid)
        os.chmod(secrets / name, 0o400)
    port = free_port()
    # The stack's settings, but files as the container sees them, its state in /app/var (the
    # image's defaults) and steps from slurmrestd: there is no sacct in the image.
    keep = ("CLUSTER", "PROMETHEUS_URL", "DB_URL", "SCRAPE_INTERVAL", "STAFF", "SECRET_KEY",
            "SESSION_COOKIE_SECURE", "THRESHOLDS", "CARBON_COUNTRY")
    settings = {f"JOBREPORT_{k}": stack_env[f"JOBREPORT_{k}"] for k in keep}
    settings |= {
        "JOBREPORT_BIND": f"127.0.0.1:{port}",
        "JOBREPORT_PASSWORD_FILE": "/run/secrets/passwords",
        "JOBREPORT_SACCT_SOURCE": "slurmrestd",
        "JOBREPORT_SLURMRESTD_URL": "http://127.0.0.1:6820",
        "JOBREPORT_SLURMRESTD_USER": "slurm",
        "JOBREPORT_SLURMRESTD_TOKEN_FILE": "/run/secrets/slurmrestd.jwt",
    }
    env_file = where / "jobreport.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    volumes = (f"{secrets}:/run/secrets:ro", f"{state}:/app/var")
    # As a site installs a release: its databases made (or upgraded) before the services start.
    upgraded = in_image("jobreport", "db-upgrade", volumes=volumes, env_file=env_file)
    assert upgraded.returncode == 0, upgraded.stderr[-3000:]
    log = (where / "gunicorn.log").open("w")
    proc = subprocess.Popen([str(IMAGE), "run", f"--env-file={env_file}",
                             *(f"--volume={v}" for v in volumes)], stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        def healthz() -> list[requests.Response] | None:
            try:
                return [requests.get(f"{base}/healthz", timeout=5)]
            except (requests.ConnectionError, requests.Timeout):  # a worker still booting
                assert proc.poll() is None, (where / "gunicorn.log").read_text()[-3000:]
                return None

        (health,) = wait_for(healthz, 60, "the image's gunicorn answering", every=0.2)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        yield base, env_file, volumes, state
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_image_serves_a_job_and_its_pdf(served, stack_jobs):
    base, *_ = served
    job = stack_jobs["busy"]
    staff = stack.login(base, "staff")
    page = staff.get(f"{base}/jobs/{job}", timeout=60)
    assert page.status_code == 200 and f"Job {job}" in page.text
    pdf = pdf_of(lambda url: staff.get(url, timeout=60), f"{base}/jobs/{job}.pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    text = subprocess.run(["pdftotext", "-", "-"], input=pdf.content, capture_output=True,
                          check=True).stdout.decode()
    assert job in text


def test_image_runs_sync_as_a_second_command(served, stack_jobs):
    """`jobreport sync` from the same image, on the web app's state volume, while it serves."""
    base, env_file, volumes, state = served
    job = stack_jobs["busy"]
    synced = in_image("jobreport", "sync", "--jobid", job, "--no-deliver",
                      volumes=volumes, env_file=env_file, timeout=300)
    assert synced.returncode == 0, synced.stderr[-3000:]
    assert "1 archived" in synced.stdout, synced.stdout
    with sqlite3.connect(state / "archive.sqlite") as db:
        ids = {str(row[0]) for row in db.execute("SELECT job_id FROM archive_jobs")}
    assert job in ids
    assert requests.get(f"{base}/healthz", timeout=5).status_code == 200
