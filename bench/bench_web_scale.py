"""The web app under 50 people at once over a large site's week (not a test; needs no
stack, no root).

Fills a fresh SQLite archive with ``--jobs`` jobs of ``--users`` users
(``scale_archive``: every job's staff row, what "my jobs" pages; and the archived report
of each job of the ``--clients`` people logged in, what their report pages and PDFs are
rebuilt from), with the sync's watermark at the newest job. The accounting view is the
real ``AccountingSource`` SQL on an SQLite table (``tests/helpers/view_sqlite.py``) of
those people's jobs, plus two running jobs each (they lead "my jobs" page 1). Prometheus
holds nothing of these jobs (a gap; the reports come from the archive), sacct lists none.

Then gunicorn (each of ``--servers``: workers, threads and PDF builds; this checkout's code)
serves the app on a free loopback port and ``--clients`` threads each log in as their
own user and, for ``--duration`` seconds (at most ``--max-requests`` each), ask with a
think time of ``--think`` seconds (uniform 0.5x-1.5x): 10 % a PDF of one of their 5
newest jobs, else HTML: "my jobs" page 1 (30 %), a later page or another sort (30 %), a
report page of one of their jobs (30 %).
Prints p50/p95/p99 per kind and every error. Targets: HTML p95 <= 500 ms, no error.

    .venv/bin/python bench/bench_web_scale.py [--jobs 700000] [--clients 50] [--duration 120]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import requests
from werkzeug.security import generate_password_hash

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python bench/bench_web_scale.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers import scale_archive  # noqa: E402

PASSWORD = secrets.token_hex(8)
RUNNING = 2  # running jobs of each client in the view
HTML_P95_TARGET = 0.5
# BENCH_ACCESS_LOG=FILE: gunicorn's access log there, each request's time in the server
# (what a slow request spent inside, against what the client waited).
ACCESS_LOG = ([f"--access-logfile={os.environ['BENCH_ACCESS_LOG']}",
               "--access-logformat=%(t)s %(U)s %(s)s %(L)s"]
              if os.environ.get("BENCH_ACCESS_LOG") else [])


def view_rows(jobs: list, running_from: int) -> list[dict]:
    """The view's rows of the generated jobs (a captured row's format, these figures),
    and ``RUNNING`` running jobs per user numbered from ``running_from``."""
    from webapp.sources.accounting import JOB_STATES

    base = next(r for r in json.loads((ROOT / "fixtures/accounting/local-jobs-view-rows.json")
                                      .read_text()) if r["job_id"] == 1240)
    code = {name: c for c, name in JOB_STATES.items()}
    rows, users = [], sorted({j.user for j in jobs})
    for j in jobs:
        tres = (f"1={j.cpus},2={(j.memory_requested or 0) // 2**20},4={len(j.nodes)}"
                + (f",1001={j.gpus}" if j.gpus else ""))
        rows.append({**base, "cluster": scale_archive.CLUSTER, "job_id": int(j.job_id),
                     "user": j.user, "account": j.account, "partition": j.partition,
                     "job_name": f"job-{j.job_id}", "state": code[j.state],
                     "submit_time": int(j.submit), "start_time": int(j.start),
                     "end_time": int(j.end), "cpus": j.cpus,
                     "timelimit": int((j.time_limit or 600) // 60),
                     "nodelist": ",".join(j.nodes), "tres_alloc": tres, "tres_req": tres})
    now = int(time.time())
    for i, user in enumerate(users):
        for k in range(RUNNING):
            rows.append({**rows[0], "job_id": running_from + i * RUNNING + k, "user": user,
                         "state": code["RUNNING"], "submit_time": now - 600,
                         "start_time": now - 590, "end_time": 0, "job_name": "running"})
    return rows


def app():  # noqa: ANN201 - gunicorn's entry point: bench.bench_web_scale:app()
    """The app on the bench's archive and view (the view's rows: the file BENCH_VIEW)."""
    from tests.helpers.view_sqlite import SqliteView
    from webapp import create_app
    from webapp.archive.store import Archive
    from webapp.report.service import ReportService
    from webapp.settings import Settings
    from webapp.sources.accounting import AccountingSource
    from webapp.sources.no_metrics import NoMetrics
    from webapp.sources.sacct import SacctSource

    cluster = scale_archive.CLUSTER
    settings = Settings.from_env()
    view = SqliteView(json.loads(Path(os.environ["BENCH_VIEW"]).read_text()))
    metrics = NoMetrics(cluster)
    service = ReportService(
        settings, accounting=AccountingSource("mysql://unused", cluster, connect=lambda: view),
        sacct=SacctSource("sacct", cluster=cluster, runner=lambda argv: ""),
        prometheus=metrics, cluster=NoQueue(), archive=Archive(settings.archive_url))
    return create_app(settings, service)


class NoQueue:
    """No slurm-exporter series either: the queue context is a gap."""

    name = "cluster"

    def queue(self, *args: object):  # noqa: ANN201
        from webapp.model import SourceUnavailable

        raise SourceUnavailable("cluster", "no slurm-exporter series")


def fill(tmp: Path, n: int, users: int, clients: int,
         heavy: int = 2000) -> tuple[dict[str, list[str]], Path]:
    """The archive and the view's rows; each client's job ids, newest last (``user0000``
    has ``heavy`` jobs)."""
    from webapp.archive.store import Archive

    until = int(time.time()) - 60
    archive = tmp / "archive.sqlite"
    scale_archive.fill(str(archive), n, users, until=until, heavy=heavy)
    chosen = {"user0000", *(f"user{i:04d}" for i in range(1, clients))}
    templates = scale_archive._templates()
    mine = [j for j in scale_archive.staff_jobs(n, users, until=until, heavy=heavy)
            if j.user in chosen]
    with Archive(str(archive)) as a:
        with a.db.transaction():
            for j in mine:
                a.put(scale_archive.archived_report(j, templates[j.gpus > 0]))
        a.advance(scale_archive.CLUSTER, "archive", until)
    view = tmp / "view.json"
    view.write_text(json.dumps(view_rows(mine, 9_000_000)))
    per_user: dict[str, list[str]] = defaultdict(list)
    for j in mine:
        per_user[j.user].append(j.job_id)
    return per_user, view


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp: Path, port: int, workers: int, threads: int, users: list[str],
          view: Path, pdf_builds: int, pdf_cache: Path):  # noqa: ANN201
    pw = tmp / "passwords"
    hashed = generate_password_hash(PASSWORD)
    pw.write_text("".join(f"{u}:{hashed}\n" for u in users))
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    env.update(JOBREPORT_AUTH="password", JOBREPORT_PASSWORD_FILE=str(pw),
               JOBREPORT_SECRET_KEY=secrets.token_hex(32), JOBREPORT_CLUSTER="bench",
               JOBREPORT_SESSION_COOKIE_SECURE="0", JOBREPORT_PROMETHEUS_URL="",
               JOBREPORT_ARCHIVE_URL=str(tmp / "archive.sqlite"),
               JOBREPORT_WEB_STATE=str(tmp / "web-state.sqlite"),
               JOBREPORT_OUTBOX=str(tmp / "outbox.sqlite"),
               JOBREPORT_PDF_CACHE_DIR=str(pdf_cache),
               JOBREPORT_PDF_BUILDS=str(pdf_builds),
               BENCH_VIEW=str(view), PYTHONPATH=str(ROOT))
    kind = ["-k", "gthread", "--threads", str(threads)] if threads else []
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", str(workers), *kind,
                             "-b", f"127.0.0.1:{port}", "--log-level", "warning",
                             "--timeout", "60", *ACCESS_LOG, "bench.bench_web_scale:app()"],
                            cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).ok:
                return proc
        except requests.RequestException:  # not listening yet, or a worker still booting
            time.sleep(0.2)
    proc.kill()
    proc.wait()
    raise SystemExit("gunicorn did not start within 60 s")


def login(base: str, user: str) -> requests.Session:
    s = requests.Session()
    page = s.get(f"{base}/login", timeout=30).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    r = s.post(f"{base}/login", data={"username": user, "password": PASSWORD,
                                      "csrf_token": token}, timeout=30)
    if r.status_code != 200 or "/login" in r.url:
        raise SystemExit(f"cannot log in as {user}: {r.status_code}")
    return s


SORTS = ("cpu_eff&order=asc", "cpu_waste", "mem_eff", "elapsed", "gpu_util")


def pick(rnd: random.Random, jobs: list[str], pages: int,
         pdfs: float = 0.10) -> tuple[str, str]:
    """(kind, path) of one request: ``pdfs`` of them a PDF, the rest HTML in the ratio
    3 : 3 : 3 (my jobs page 1, another page or sort, a report page)."""
    x = rnd.random()
    if x < pdfs:
        return "pdf", f"/jobs/{rnd.choice(jobs[-5:])}.pdf"
    x = (x - pdfs) / (1 - pdfs) * 0.9 + 0.1
    if x < 0.40:
        return "my jobs p1", "/"
    if x < 0.70:
        return "my jobs other", f"/?sort={rnd.choice(SORTS)}&page={rnd.randint(1, pages)}"
    return "report", f"/jobs/{rnd.choice(jobs)}"


def client(n: int, base: str, user: str, jobs: list[str], stop: float, think: float,
           max_requests: int, out: list[tuple[str, float, int, str]],
           lock: threading.Lock, pdfs: float = 0.10) -> None:
    rnd = random.Random(n)
    time.sleep(rnd.uniform(0, think))  # people do not all arrive in the same second
    s = login(base, user)
    pages = max(1, (len(jobs) + 49) // 50)
    for _ in range(max_requests):
        if time.monotonic() >= stop:
            break
        kind, path = pick(rnd, jobs, pages, pdfs)
        began = time.perf_counter()
        try:
            r = s.get(base + path, timeout=120)
            while r.status_code == 202 and time.perf_counter() - began < 120:
                # Being built: the page reloads itself after Retry-After, as a browser would.
                with lock:
                    out.append(("pdf 202", time.perf_counter() - began, 202, ""))
                time.sleep(float(r.headers.get("Retry-After", "3")))
                r = s.get(base + path, timeout=120)
            status, why = r.status_code, "" if r.status_code == 200 else r.text[:200]
        except requests.RequestException as exc:
            status, why = 0, type(exc).__name__
        with lock:
            out.append((kind, time.perf_counter() - began, status, why))
        time.sleep(think * rnd.uniform(0.5, 1.5))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def load(args: argparse.Namespace, tmp: Path, per_user: dict, view: Path, workers: int,
         threads: int, pdf_builds: int) -> bool:
    """One server, ``--clients`` people for ``--duration`` s: print the figures; met?"""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out: list[tuple[str, float, int, str]] = []
    lock = threading.Lock()
    pdf_cache = Path(tempfile.mkdtemp(prefix="pdf-cache-", dir=tmp))
    self0, children0 = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    proc = start(tmp, port, workers, threads, sorted(per_user), view, pdf_builds, pdf_cache)
    try:
        load0 = os.getloadavg()
        stop = time.monotonic() + args.duration
        people = [threading.Thread(target=client, args=(
            i, base, user, per_user[user], stop, args.think, args.max_requests, out, lock,
            args.pdfs))
            for i, user in enumerate(sorted(per_user))]
        began = time.monotonic()
        for th in people:
            th.start()
        for th in people:
            th.join()
        took = time.monotonic() - began
    finally:
        proc.terminate()
        proc.wait(30)
    self1, children1 = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                         resource.RUSAGE_CHILDREN))
    server = sum(getattr(children1, f) - getattr(children0, f) for f in ("ru_utime", "ru_stime"))
    clients = sum(getattr(self1, f) - getattr(self0, f) for f in ("ru_utime", "ru_stime"))
    by_kind: dict[str, list[float]] = defaultdict(list)
    errors = Counter()
    reloads = 0
    for kind, secs, status, why in out:
        if status == 200:
            by_kind[kind].append(secs)
        elif status == 202:
            reloads += 1
        else:
            errors[f"{kind} {status} {why[:80]}"] += 1
    html = [s for k, v in by_kind.items() if k != "pdf" for s in v]
    print(f"{len(people)} people, {workers} gunicorn workers"
          f"{f' of {threads} threads' if threads else ' (sync)'}, JOBREPORT_PDF_BUILDS="
          f"{pdf_builds}, {took:.0f} s, think {args.think} s; {len(out) - reloads} requests "
          f"({(len(out) - reloads) / took:.1f}/s); load average {load0[0]:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after")
    print(f"  CPU: the server {server:.0f} s ({server / took:.2f} cores: workers, PDF builders "
          f"and pdflatex), the {len(people)} people's client threads {clients:.0f} s "
          f"({clients / took:.2f} cores)")
    for kind in ("my jobs p1", "my jobs other", "report", "pdf"):
        v = by_kind.get(kind, [])
        print(f"  {kind:14} n={len(v):5}  p50 {pct(v, .5) * 1000:7.0f} ms  p95 "
              f"{pct(v, .95) * 1000:7.0f} ms  p99 {pct(v, .99) * 1000:7.0f} ms")
    print(f"  (a PDF's time is until the PDF arrived: {reloads} answers 202 'being built' "
          f"reloaded on the way)")
    print(f"  {'all HTML':14} n={len(html):5}  p50 {pct(html, .5) * 1000:7.0f} ms  p95 "
          f"{pct(html, .95) * 1000:7.0f} ms  (target p95 <= {HTML_P95_TARGET * 1000:.0f} ms)")
    print(f"  errors: {sum(errors.values())}" + "".join(f"\n    {n} x {e}"
                                                         for e, n in errors.items()))
    ok = bool(html) and pct(html, .95) <= HTML_P95_TARGET and not errors
    print(f"  HTML median {statistics.median(html) * 1000:.0f} ms; targets "
          f"{'met' if ok else 'NOT met'}", flush=True)
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=700_000)
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--servers", default="4:0:1",
                    help="comma-separated WORKERS:THREADS:PDF_BUILDS, one load run each on "
                    "the same archive (THREADS 0: sync workers, else gthread; PDF_BUILDS: "
                    "JOBREPORT_PDF_BUILDS, the host's); each run starts with no kept PDF")
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--max-requests", type=int, default=200)
    ap.add_argument("--think", type=float, default=2.0)
    ap.add_argument("--pdfs", type=float, default=0.10, help="share of requests for a PDF")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="jobreport-web-scale-") as name:
        tmp = Path(name)
        t = time.perf_counter()
        per_user, view = fill(tmp, args.jobs, args.users, args.clients)
        print(f"{args.jobs:,} jobs of {args.users:,} users, the reports of "
              f"{sum(map(len, per_user.values())):,} of them archived: "
              f"{time.perf_counter() - t:.0f} s", flush=True)
        for server in args.servers.split(","):
            workers, threads, builds = (int(x) for x in server.split(":"))
            ok = load(args, tmp, per_user, view, workers, threads, builds) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
