"""The wheel `python -m build` made (scripts/build-dist) installed as a site installs it, into
a fresh venv: the runtime lock first (hash-checked), then the wheel. Run from outside the
checkout, it carries its templates, so `jobreport show` works on a real job."""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pytest

from tests.helpers.stack import ROOT


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv with the project installed as a wheel (not editable); its bin/."""
    built = subprocess.run([str(ROOT / "scripts" / "build-dist")], capture_output=True,
                           text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = built.stdout.strip()
    where = tmp_path_factory.mktemp("wheel-venv")
    venv.create(where / "venv", with_pip=True)
    pip = [str(where / "venv" / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    for step in (["--require-hashes", "-r", str(ROOT / "requirements.txt")],
                 ["--no-deps", wheel]):
        run = subprocess.run(pip + step, cwd=where, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stderr[-3000:]
    return where / "venv" / "bin"


def _run(bin_dir: Path, cwd: Path, stack_env: dict[str, str], *argv: str):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(stack_env)
    return subprocess.run([str(bin_dir / "jobreport"), *argv], cwd=cwd, env=env,
                          capture_output=True, timeout=300)


def test_installed_package_lives_outside_the_checkout(installed, tmp_path):
    where = subprocess.run(
        [str(installed / "python"), "-c", "import webapp, mgmt; print(webapp.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert "site-packages" in where and not where.startswith(str(ROOT) + os.sep)
    templates = Path(where).parent / "templates"
    assert (templates / "report.html").is_file() and (templates / "email" / "report.txt").is_file()


def test_installed_show_html_and_pdf(installed, tmp_path, stack_env, stack_jobs):
    job = stack_jobs["busy"]
    html = _run(installed, tmp_path, stack_env, "show", job, "--format", "html", "-o", "r.html")
    assert html.returncode == 0, html.stderr.decode()[-2000:]
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!doctype html>") and f"Job {job}" in page
    pdf = _run(installed, tmp_path, stack_env, "show", job, "--format", "pdf", "-o", "r.pdf")
    assert pdf.returncode == 0, pdf.stderr.decode()[-2000:]
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF")
    text = subprocess.run(["pdftotext", str(tmp_path / "r.pdf"), "-"], capture_output=True,
                          text=True, check=True).stdout
    assert job in text


def test_installed_db_upgrade_creates_the_databases_from_the_wheels_revisions(
        installed, tmp_path, stack_env):
    """The revisions ship in the wheel: Alembic reads them as files from site-packages."""
    env = {"JOBREPORT_CONFIG": "", "JOBREPORT_ARCHIVE_URL": str(tmp_path / "a.sqlite"),
           "JOBREPORT_OUTBOX": str(tmp_path / "o.sqlite"),
           "JOBREPORT_WEB_STATE": str(tmp_path / "w.sqlite")}
    done = _run(installed, tmp_path, {**stack_env, **env}, "db-upgrade")
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().count("new (no tables); now at revision") == 3
