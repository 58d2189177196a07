"""Shared fixtures: the real local stack and the integration jobs, once per session."""

from __future__ import annotations

import functools
import os
import shutil
import time
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from tests.helpers import stack
from tests.helpers.mail import FAKE_PDF, Recorder, free_port

# Tests name their settings: the machine's /etc/jobreport/jobreport.conf (which the stack
# installs) must not leak into them. A test of the config file names its own.
os.environ.setdefault("JOBREPORT_CONFIG", "")


# What a unit test may need beyond Python, marked `@pytest.mark.needs("pdflatex")`: where it
# is missing the test is skipped with the reason, so `pytest -m "not stack"` passes for a
# newcomer without root or these tools. Never in CI (CI=true), which installs all of them
# (scripts/dev-stack): there a missing one fails the test.
NEEDS = {
    "pdflatex": (("pdflatex", "pdftotext"),
                 "pdflatex and pdftotext (apt install texlive-latex-base lmodern poppler-utils)"),
    "chromium": (("chromium", "chromedriver"),
                 "Chromium and chromedriver (apt install chromium chromium-driver)"),
    "root": ((), "root (the real cgroup tree, other processes' /proc)"),
}
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
STACK_DIRS = tuple(str(Path(__file__).parent / d) + os.sep for d in ("stack", "vm"))


@functools.cache
def _missing(what: str) -> str | None:
    """Why ``what`` cannot run here (None: it can)."""
    commands, reason = NEEDS[what]
    if what == "root":
        return None if os.geteuid() == 0 else reason
    return None if all(shutil.which(c) for c in commands) else reason


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"needs(*what): needs one of {sorted(NEEDS)} beyond "
                            "Python; skipped with the reason where missing, never in CI")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from tests.helpers import vm

    # Whatever needs the real stack is marked `stack`, so `-m "not stack"` runs without it:
    # every test of tests/stack/ and tests/vm/ (a wheel built and installed from the index
    # too). A test elsewhere that asks for the stack is in the wrong folder.
    misplaced = [item.nodeid for item in items
                 if "stack_env" in getattr(item, "fixturenames", ())
                 and not str(item.path).startswith(STACK_DIRS)]
    if misplaced:
        raise pytest.UsageError("tests that need the stack belong in tests/stack/: "
                                + ", ".join(misplaced))
    for item in items:
        if str(item.path).startswith(STACK_DIRS):
            item.add_marker(pytest.mark.stack)
        for mark in item.iter_markers("needs"):
            missing = [m for m in map(_missing, mark.args) if m]
            if missing and not IN_CI:
                item.add_marker(pytest.mark.skip(reason="needs " + " and ".join(missing)))
    # Modules whole, in this order: stack modules with jobs of their own, the unit tests,
    # then the modules that read the session's jobs, which the cluster ran meanwhile.
    # Within a group a module that sets ``LONG_POLE = True`` (minutes of its own outage)
    # goes first: handed out last, it ran alone at the end (test_mail: 140-167 s of the
    # last group's 550-660 s, the run's last minute at one busy core).
    # A module that disturbs a VM cluster (tests/vm/conftest.py) waits for the others
    # reading the VMs: those go first, then the disturbing ones by cluster. Their locks
    # let the two clusters' run side by side; a module of one test still takes the next
    # one with it on its worker (``OneModuleAhead``), so v26's may wait behind v24's
    # (runs dd, de; docs/testing.md).
    def group(module: str) -> tuple[int, bool, bool, str]:
        mine = [i for i in items if i.module.__name__ == module]
        mod = mine[0].module
        long_pole = getattr(mod, "LONG_POLE", False)
        disturbs = vm.disturbs(mod)
        cluster = getattr(mod, "CLUSTER", "") if disturbs else ""
        if any("stack_jobs" in i.fixturenames for i in mine):
            return 2, not long_pole, disturbs, cluster
        return (0 if any("stack_env" in i.fixturenames for i in mine) else 1), \
            not long_pole, disturbs, cluster
    groups = {m: group(m) for m in {i.module.__name__ for i in items}}
    items.sort(key=lambda i: groups[i.module.__name__])


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """``--dist loadfile`` handing a worker its next module only once it starts its current
    module's last test (a worker runs a test when it holds the next one, so no later).
    xdist's own hands it out with two tests still to run: a module of one test then took
    the next one with it, and the three VM fault tests (~100-250 s each) ran one after
    another on one worker while others were free."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling
    from xdist.workermanage import WorkerController

    class OneModuleAhead(LoadFileScheduling):
        def _reschedule(self, node: WorkerController) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    return OneModuleAhead(config, log)


VM_DIR = str(Path(__file__).parent / "vm") + os.sep
_vm_tests = False  # whether this session runs VM tests (after -m/-k deselection)


def pytest_collection_finish(session: pytest.Session) -> None:
    global _vm_tests
    _vm_tests = any(str(i.path).startswith(VM_DIR) for i in session.items)


def _vm_batch_after(stack_ids: list[str]) -> None:
    """The session's VM jobs submitted once the stack's session batch has ended, by one
    worker in the background: the emulated guests' busy loops (~300 CPU-seconds of this
    machine's) then run while the stack's own tests wait for jobs and outages, not after
    them beside the VM tests (measured: the machine 45-99 % busy from the batch's end
    to the first VM module, 99 % after it). ``vm_env`` submits at once (the same ids:
    ``once_per_session``) if a VM module comes first; any failure is left to it."""
    import fcntl

    from tests.helpers import vm

    lock_path = stack.STACK_ROOT / "var" / "vm" / "early-batch.lock"
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # one worker of the session
            stack.wait_until_done(stack_ids, timeout=1800)
            vm.session_batch()
    except Exception:  # noqa: BLE001, S110 - vm_env does it again, and fails loudly
        pass


@pytest.fixture(scope="session")
def stack_env(tmp_path_factory) -> dict[str, str]:
    """Start (or find running) the real stack; its JOBREPORT_* settings, with an archive
    and outbox of the session's own: the stack's sync loop archives every ended job into
    its archive, and a report falls back to that archive when a test takes Prometheus
    away (what a test of the fallback sets up itself).

    Integration tests never skip: without root or the stack they fail, loudly.
    """
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (they start Slurm, MariaDB, Prometheus)")
    stack.start_stack()  # idempotent: seconds when everything is up, restarts what is down
    # The session's jobs start now, on every node, whichever stack test comes first; the
    # tests that read them wait for them (``stack_jobs``) and the others run meanwhile.
    # Parallel workers (pytest -n) share one batch.
    _submitted.update(stack.session_batch())
    if _vm_tests:
        import threading

        threading.Thread(target=_vm_batch_after, args=(list(_submitted.values()),),
                         name="vm-batch", daemon=True).start()
    own = tmp_path_factory.mktemp("stack-session")
    return {**stack.load_env(), "JOBREPORT_ARCHIVE_URL": str(own / "archive.sqlite"),
            "JOBREPORT_OUTBOX": str(own / "outbox.sqlite")}


_submitted: dict[str, str] = {}  # the session batch: name -> job id


@pytest.fixture(scope="session")
def stack_jobs(stack_env: dict[str, str]) -> dict[str, str]:
    """Every job of ``stack.STACK_JOBS`` (submitted with the stack's start): name -> job
    id, once all ended and scraped after their end (their last samples are in: two reads
    of a job's figures, one after the other, read the same samples)."""
    stack.wait_until_done(list(_submitted.values()))
    stack.wait_for_scrape_after(stack_env["JOBREPORT_PROMETHEUS_URL"], time.time() + 1)
    return dict(_submitted)


@pytest.fixture(scope="session")
def settings(stack_env: dict[str, str]):
    from webapp.settings import Settings

    return Settings.from_env(stack_env)


@pytest.fixture(scope="session")
def service(settings):
    from webapp.report.service import ReportService

    return ReportService(settings)


@pytest.fixture
def web_settings(tmp_path):
    """The web tests' settings: password login for alice, bob, carol and staffer (staff;
    tests/helpers/web.py), state under the test's own directory. A module testing other
    settings overrides this fixture; ``app`` and ``client`` follow."""
    from tests.helpers.web import password_settings

    return password_settings(tmp_path)


@pytest.fixture
def web_service():
    """The report service the web tests' app serves: the fake one's sample reports."""
    from tests.helpers.reports import default_service

    return default_service()


@pytest.fixture
def app(web_settings, web_service):
    """The web app on ``web_settings`` and ``web_service``."""
    from tests.helpers.web import make_app

    return make_app(web_settings, web_service)


@pytest.fixture
def client(app):
    """A Flask test client of ``app``, signed out."""
    return app.test_client()


@pytest.fixture(scope="module")
def driver():
    """Headless Chromium (JavaScript off) with a throw-away profile."""
    import tempfile

    from tests.helpers.browser import chromium

    with tempfile.TemporaryDirectory(prefix="jobreport-chromium-") as profile:
        drv = chromium(profile)
        try:
            yield drv
        finally:
            drv.quit()


@pytest.fixture
def smtp():
    """A real SMTP server (aiosmtpd) on a free loopback port: (recorder, port)."""
    recorder = Recorder()
    controller = Controller(recorder, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield recorder, controller.port
    recorder.release.set()
    controller.stop()


@pytest.fixture
def fast_pdf(monkeypatch):
    """Batch tests check delivery, not LaTeX: attach a small constant PDF."""
    monkeypatch.setattr("webapp.renderers.pdf.render", lambda report, footer="": FAKE_PDF)


@pytest.fixture(autouse=True)
def _own_pdf_store(tmp_path_factory, monkeypatch):
    """Settings built in a test with the default PDF directory (``var/pdf-cache``, the demo
    stack's own) keep their PDFs and plots in one of the test's instead: a test's fake PDF
    must never be served to another test, or by the stack's web app."""
    import dataclasses

    from webapp.renderers import pdf_store
    from webapp.settings import Settings

    default = Settings.__dataclass_fields__["pdf_cache_dir"].default
    real = pdf_store.pdf_store
    own: list = []

    def per_test(settings, wait=5.0):  # noqa: ANN001, ANN202
        if settings.pdf_cache_dir == default:
            if not own:
                own.append(str(tmp_path_factory.mktemp("pdf-cache")))
            settings = dataclasses.replace(settings, pdf_cache_dir=own[0])
        return real(settings, wait)

    for where in ("webapp.renderers.pdf_store", "webapp.web.app", "webapp.mail.sending"):
        monkeypatch.setattr(f"{where}.pdf_store", per_test)


@pytest.fixture(scope="session")
def vm_env(stack_env: dict[str, str]) -> dict[str, str]:
    """The VM clusters (v24, v26) up beside the stack, the session's VM jobs submitted on
    both; the stack's settings with those that serve them too (var/clusters.env:
    JOBREPORT_CLUSTERS, each cluster's sources, the all-clusters web app's address)."""
    from tests.helpers import vm

    vm.start()
    _vm_submitted.update(vm.session_batch())
    return {**stack_env, **stack.load_env(stack.STACK_ROOT / "var" / "clusters.env")}


_vm_submitted: dict[str, dict[str, str]] = {}


@pytest.fixture(scope="session")
def vm_jobs(vm_env: dict[str, str]) -> dict[str, dict[str, str]]:
    """cluster -> name -> job id of ``vm.VM_JOBS``, once all ended on both clusters."""
    from tests.helpers import vm

    for cluster, ids in _vm_submitted.items():
        vm.wait_until_done(cluster, list(ids.values()))
    return {c: dict(ids) for c, ids in _vm_submitted.items()}
