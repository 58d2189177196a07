"""Web benchmark: the app under gunicorn (2 workers), 8 logged-in clients on /jobs/<id>.

    python bench/bench_web.py [--duration 30] [--clients 8] [--workers 2] [--pdf-runs 5]

Without JOBREPORT_BENCH_JOB the app serves a fake service with the test reports (job
4242: two nodes, two GPUs, five plots). With JOBREPORT_BENCH_JOB=<id> it runs the real
``webapp:create_app()`` against the JOBREPORT_* settings of this environment; the bench
only swaps in its own password file, staff user and secret key so it can log in.
Prints throughput, p50/p99 latency and errors, then the PDF's p50 (HTTP and render).
Targets: HTML p50 <= 150 ms, PDF p50 <= 1.5 s.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests
from werkzeug.security import generate_password_hash

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python bench/bench_web.py): import from the checkout
    sys.path.insert(0, str(ROOT))
HTML_TARGET, PDF_TARGET = 0.150, 1.5
USER, PASSWORD = "bench", secrets.token_hex(8)


def fake_app():
    """gunicorn entry point of the fake mode: the app on the test reports."""
    from tests.helpers.reports import default_service
    from webapp import create_app
    from webapp.settings import Settings

    return create_app(Settings.from_env(), default_service())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_BENCH_")}
    pw = Path(tmp) / "passwords"
    pw.write_text(f"{USER}:{generate_password_hash(PASSWORD)}\n")
    env.update(JOBREPORT_AUTH="password", JOBREPORT_PASSWORD_FILE=str(pw),
               JOBREPORT_STAFF=USER, JOBREPORT_SECRET_KEY=secrets.token_hex(32),
               JOBREPORT_SESSION_COOKIE_SECURE="0",  # plain http on loopback
               JOBREPORT_WEB_STATE=str(Path(tmp) / "web-state.sqlite"),
               PYTHONPATH=str(ROOT))
    return env


def start_gunicorn(env: dict[str, str], port: int, workers: int, real: bool):
    target = "webapp:create_app()" if real else "bench.bench_web:fake_app()"
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "-w", str(workers), "-b",
                             f"127.0.0.1:{port}", "--log-level", "warning",
                             "--graceful-timeout", "5", target],
                            cwd=ROOT, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=1).ok:
                return proc
        except requests.RequestException:  # not listening yet, or a worker still booting
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("gunicorn did not start within 30 s")


def session(base: str) -> requests.Session:
    s = requests.Session()
    page = s.get(f"{base}/login", timeout=10).text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    r = s.post(f"{base}/login", data={"username": USER, "password": PASSWORD,
                                      "csrf_token": token, "next": "/"}, timeout=10)
    r.raise_for_status()
    return s


def client(base: str, path: str, stop: float, latencies: list[float], errors: list[str]):
    s = session(base)
    while time.monotonic() < stop:
        started = time.perf_counter()
        try:
            r = s.get(base + path, timeout=30)
            if r.status_code != 200:
                errors.append(str(r.status_code))
                continue
        except requests.RequestException as exc:
            errors.append(type(exc).__name__)
            continue
        latencies.append(time.perf_counter() - started)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def render_p50(job: str, runs: int, real: bool) -> float:
    """In-process pdf.render of one report, p50 over ``runs``."""
    from webapp.renderers import pdf

    if real:
        from webapp.report.service import ReportService
        from webapp.settings import Settings

        env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_BENCH_")}
        report = ReportService(Settings.from_env(env)).build(job)
    else:
        from tests.helpers.reports import sample_report

        report = sample_report(job)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        pdf.render(report)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pdf-runs", type=int, default=5)
    args = parser.parse_args()
    job = os.environ.get("JOBREPORT_BENCH_JOB", "")
    real = bool(job)
    job = job or "4242"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="jobreport-bench-") as tmp:
        proc = start_gunicorn(app_env(tmp), port, args.workers, real)
        try:
            session(base).get(f"{base}/jobs/{job}", timeout=60).raise_for_status()  # warm up
            latencies: list[float] = []
            errors: list[str] = []
            stop = time.monotonic() + args.duration
            threads = [threading.Thread(target=client, args=(base, f"/jobs/{job}", stop,
                                                              latencies, errors))
                       for _ in range(args.clients)]
            started = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - started
            s = session(base)
            pdf_http = []
            for _ in range(args.pdf_runs):
                t0 = time.perf_counter()
                s.get(f"{base}/jobs/{job}.pdf", timeout=60).raise_for_status()
                pdf_http.append(time.perf_counter() - t0)
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    p50, p99 = pct(latencies, 0.50), pct(latencies, 0.99)
    pdf_p50 = statistics.median(pdf_http)
    render = render_p50(job, args.pdf_runs, real)
    mode = f"real job {job}" if real else "fake service, job 4242"
    print(f"/jobs/{job} ({mode}), {args.clients} clients, {args.workers} gunicorn workers, "
          f"{elapsed:.0f} s")
    print(f"  requests {len(latencies)}  throughput {len(latencies) / elapsed:.1f}/s  "
          f"p50 {p50 * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms  errors {len(errors)}"
          + (f" ({', '.join(sorted(set(errors)))})" if errors else ""))
    print(f"  PDF over HTTP p50 {pdf_p50:.2f} s; pdf.render p50 {render:.2f} s "
          f"({args.pdf_runs} runs)")
    ok = p50 <= HTML_TARGET and render <= PDF_TARGET and not errors
    print(f"  targets: HTML p50 <= {HTML_TARGET * 1000:.0f} ms, PDF p50 <= {PDF_TARGET} s: "
          f"{'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
