#!/usr/bin/env python3
"""Faults under load: clients on the web app while MariaDB, Prometheus and sacct fail.

Starts its own gunicorn (this checkout's code, a free loopback port, the stack's
settings from var/jobreport.env with ``JOBREPORT_SACCT`` pointing at a wrapper that can
be switched to fail). ``--clients`` signed-in clients (half staff, half job owners) ask
for the HTML, JSON and PDF reports of real ended stack jobs for ``--seconds`` while:

- MariaDB is stopped and started again (as scripts/dev-stack starts it),
- Prometheus is stopped and started again (likewise),
- ``sacct`` fails (the wrapper exits 1).

Expected: no 500 at all; while a fault lasts, each answer either names it as a gap or
is a 503 with Retry-After (when accounting is needed to authorize or build the report);
after the fault ends the app recovers by itself within one retry interval. Prints one
line per fault and exits 1 when an expectation fails. Run as root on the dev stack.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import requests
from tqdm import tqdm
from werkzeug.security import generate_password_hash

ROOT = Path(__file__).resolve().parents[1]
STACK = Path(os.environ.get("JOBREPORT_BENCH_STACK_ROOT") or ROOT)
STATE = STACK / "var" / "dev-stack"
PASSWORD = secrets.token_urlsafe(12)
FORMATS = (("html", 0.5), ("json", 0.35), ("pdf", 0.15))
RETRY_INTERVAL = 60.0  # the Retry-After the app sends for an accounting outage
GAP_NOTE = re.compile(r'<p class="note gap"[^>]*>([^<]*)</p>')


@dataclass
class Answer:
    t: float
    client: int
    fmt: str
    status: int
    retry_after: str | None
    gaps: tuple[str, ...]  # sources named as gaps (JSON) or the notes' text (HTML)
    seconds: float


@dataclass
class Fault:
    name: str
    start: float = 0.0
    end: float = 0.0
    answers: list[Answer] = field(default_factory=list)


def read_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[7:].partition("=")
            env[key] = value
    return env


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ended_jobs(per_user: int = 3) -> dict[str, list[str]]:
    """Recent completed plain jobs of alice and bob: user -> job ids."""
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-a", "-S", "now-7days",
                          "--format=JobID,User,State"], check=True, capture_output=True,
                         text=True).stdout
    jobs: dict[str, list[str]] = {"alice": [], "bob": []}
    for line in reversed(out.splitlines()):
        job, user, state = (line.split("|") + ["", ""])[:3]
        if (user in jobs and job.isdigit() and state == "COMPLETED"
                and len(jobs[user]) < per_user):
            jobs[user].append(job)
    if not all(jobs.values()):
        raise SystemExit("no completed jobs of alice and bob in sacct: run scripts/demo first")
    return jobs


def start_app(tmp: Path, port: int, sacct: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBREPORT_")}
    env.update(read_env(STACK / "var" / "jobreport.env"))
    (tmp / "passwords").write_text("".join(
        f"{u}:{generate_password_hash(PASSWORD)}\n" for u in ("staff", "alice", "bob")))
    env.update(JOBREPORT_PASSWORD_FILE=str(tmp / "passwords"),
               JOBREPORT_SECRET_KEY=secrets.token_hex(32),
               JOBREPORT_SESSION_COOKIE_SECURE="0",  # plain http on loopback
               JOBREPORT_WEB_STATE=str(tmp / "web-state.sqlite"),
               JOBREPORT_OUTBOX=str(tmp / "outbox.sqlite"),
               JOBREPORT_BIND=f"127.0.0.1:{port}", JOBREPORT_SACCT=str(sacct),
               JOBREPORT_PDF_BUILDS="1", JOBREPORT_PROMETHEUS_TIMEOUT="5",
               JOBREPORT_SACCT_TIMEOUT="10")
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "gunicorn"), "-w", "2", "-k",
                             "gthread", "--threads", "4", "--timeout", "60", "-b",
                             f"127.0.0.1:{port}", "--log-level", "warning",
                             "--error-logfile", str(tmp / "gunicorn.log"),
                             "webapp:create_app()"], cwd=ROOT, env=env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).ok:
                return proc
        except requests.RequestException:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"gunicorn did not start; see {tmp / 'gunicorn.log'}")


def sacct_wrapper(tmp: Path, real: str) -> tuple[Path, Path]:
    """A sacct that fails while the flag file exists, else runs the real one."""
    flag, wrapper = tmp / "sacct-fails", tmp / "sacct"
    wrapper.write_text(f"#!/bin/sh\nif [ -e '{flag}' ]; then\n"
                       "  echo 'sacct: error: Problem talking to the database' >&2; exit 1\n"
                       f"fi\nexec {real} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper, flag


def login(base: str, user: str) -> requests.Session:
    s = requests.Session()
    page = s.get(f"{base}/login", timeout=30).text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    r = s.post(f"{base}/login", data={"username": user, "password": PASSWORD,
                                      "csrf_token": csrf}, timeout=30)
    if "/login" in r.url:
        raise SystemExit(f"cannot log in as {user}")
    return s


def client_loop(n: int, base: str, user: str, jobs: list[str], t0: float, stop: float,
                answers: list[Answer], lock: threading.Lock) -> None:
    rnd = random.Random(n)
    s = login(base, user)
    while time.monotonic() < stop:
        fmt = rnd.choices([f for f, _ in FORMATS], [w for _, w in FORMATS])[0]
        job = rnd.choice(jobs)
        url = f"{base}/jobs/{job}" + ("" if fmt == "html" else f".{fmt}")
        began = time.monotonic()
        try:
            r = s.get(url, timeout=90)
            status, retry, body = r.status_code, r.headers.get("Retry-After"), r.content
        except requests.RequestException as exc:
            status, retry, body = 0, None, str(exc).encode()
        gaps: tuple[str, ...] = ()
        if status == 200 and fmt == "json":
            gaps = tuple(g["source"] for g in json.loads(body).get("gaps", []))
        elif status == 200 and fmt == "html":
            gaps = tuple(GAP_NOTE.findall(body.decode("utf-8", "replace")))
        with lock:
            answers.append(Answer(began - t0, n, fmt, status, retry, gaps,
                                  time.monotonic() - began))
        time.sleep(0.2)  # think time: bounded load on a small host


def wait_for(what: str, check, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


def pid_of(name: str) -> int:
    return int((STATE / f"{name}.pid").read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop_daemon(name: str) -> None:
    pid = pid_of(name)
    os.kill(pid, signal.SIGTERM)
    wait_for(f"{name} to stop", lambda: not alive(pid))


def mariadb_up() -> bool:
    return subprocess.run(["mysqladmin", "ping"], capture_output=True).returncode == 0


def start_mariadb() -> None:
    """As scripts/dev-stack starts it."""
    subprocess.run(["start-stop-daemon", "--start", "--background", "--make-pidfile",
                    "--pidfile", str(STATE / "mariadbd.pid"), "--exec", "/usr/sbin/mariadbd",
                    "--", "--user=mysql", "--bind-address=127.0.0.1"], check=True)
    wait_for("mariadb", mariadb_up)


def prometheus_ready() -> bool:
    try:
        return requests.get("http://127.0.0.1:9090/-/ready", timeout=1).ok
    except requests.RequestException:
        return False


def start_prometheus() -> None:
    """As scripts/dev-stack starts it (its log appended to, not truncated)."""
    var = STACK / "var"
    with open(var / "prometheus" / "prometheus.log", "ab") as log:
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={var}/prometheus/prometheus.yml",
             f"--storage.tsdb.path={var}/prometheus/data", "--storage.tsdb.retention.time=30d",
             "--web.listen-address=127.0.0.1:9090", "--web.enable-admin-api"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    (STATE / "prometheus.pid").write_text(f"{proc.pid}\n")
    wait_for("prometheus", prometheus_ready)


def run_faults(t0: float, seconds: float, flag: Path, faults: list[Fault]) -> None:
    """MariaDB, then Prometheus, then sacct: each down for a few seconds, in turn."""
    plan = ((0.12, "mariadb"), (0.42, "prometheus"), (0.70, "sacct"))
    outage = max(4.0, seconds * 0.1)
    for at, name in plan:
        time.sleep(max(0.0, t0 + at * seconds - time.monotonic()))
        fault = Fault(name, start=time.monotonic() - t0)
        if name == "mariadb":
            stop_daemon("mariadbd")
            time.sleep(outage)
            start_mariadb()
        elif name == "prometheus":
            stop_daemon("prometheus")
            time.sleep(outage)
            start_prometheus()
        else:
            flag.touch()
            time.sleep(outage)
            flag.unlink()
        fault.end = time.monotonic() - t0
        faults.append(fault)


def judge(fault: Fault, answers: list[Answer], next_start: float) -> dict:
    """What the clients saw from the fault's start until the next fault (or the end)."""
    seen = [a for a in answers if fault.start <= a.t < next_start]
    names = {"mariadb": ("accounting", "database"), "prometheus": ("prometheus", "Prometheus"),
             "sacct": ("sacct",)}[fault.name]

    def shows(a: Answer) -> bool:
        named = any(any(n in g for n in names) for g in a.gaps)
        return named or (a.status == 503 and a.retry_after is not None)

    # Answers asked and given while it lasted (PDFs name gaps too, but are not parsed here).
    during = [a for a in seen if a.fmt != "pdf" and a.t >= fault.start + 1
              and a.t + a.seconds <= fault.end + 0.5]
    showing = [a for a in seen if shows(a)]
    last = max((a.t + a.seconds for a in showing), default=fault.end)
    return {
        "fault": fault.name, "start_s": round(fault.start, 1), "end_s": round(fault.end, 1),
        "answers": len(seen), "statuses": dict(Counter(a.status for a in seen)),
        "during": len(during), "named_or_503": sum(shows(a) for a in during),
        "recovered_after_s": round(max(0.0, last - fault.end), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients (8)")
    parser.add_argument("--seconds", type=float, default=60, help="length of the run (60)")
    parser.add_argument("--no-faults", action="store_true", help="load only, nothing fails")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        parser.error("run as root: it restarts the stack's MariaDB and Prometheus")

    jobs = ended_jobs()
    env = read_env(STACK / "var" / "jobreport.env")
    with tempfile.TemporaryDirectory(prefix="soak-web-") as tmpdir:
        tmp = Path(tmpdir)
        wrapper, flag = sacct_wrapper(tmp, env.get("JOBREPORT_SACCT", "sacct"))
        port = free_port()
        app = start_app(tmp, port, wrapper)
        base = f"http://127.0.0.1:{port}"
        answers: list[Answer] = []
        faults: list[Fault] = []
        lock = threading.Lock()
        try:
            t0 = time.monotonic()
            stop = t0 + args.seconds
            users = [("staff", jobs["alice"] + jobs["bob"]) if i % 2 == 0 else
                     (("alice", jobs["alice"]) if i % 4 == 1 else ("bob", jobs["bob"]))
                     for i in range(args.clients)]
            threads = [threading.Thread(target=client_loop, daemon=True,
                                        args=(i, base, u, j, t0, stop, answers, lock))
                       for i, (u, j) in enumerate(users)]
            if not args.no_faults:
                threads.append(threading.Thread(target=run_faults, daemon=True,
                                                args=(t0, args.seconds, flag, faults)))
            for t in threads:
                t.start()
            with tqdm(total=int(args.seconds), unit="s", desc="soak") as bar:
                while time.monotonic() < stop:
                    time.sleep(1)
                    bar.update(1)
                    with lock:
                        bar.set_postfix(answers=len(answers),
                                        e500=sum(a.status >= 500 and a.status != 503
                                                 for a in answers))
            for t in threads:
                t.join(120)
        finally:
            flag.unlink(missing_ok=True)
            if not mariadb_up():
                start_mariadb()
            if not prometheus_ready():
                start_prometheus()
            app.terminate()
            app.wait(30)
    return report(answers, faults, args)


def report(answers: list[Answer], faults: list[Fault], args: argparse.Namespace) -> int:
    statuses = Counter(a.status for a in answers)
    fails = sum(1 for a in answers if a.status >= 500 and a.status != 503) + statuses[0]
    no_retry = sum(1 for a in answers if a.status == 503 and not a.retry_after)
    by_fmt = Counter(a.fmt for a in answers)
    print(f"{len(answers)} answers in {args.seconds:.0f} s from {args.clients} clients "
          f"({', '.join(f'{n} {f}' for f, n in sorted(by_fmt.items()))}); statuses "
          f"{dict(sorted(statuses.items()))}; 500s and errors: {fails}; 503 without "
          f"Retry-After: {no_retry}")
    figures = []
    bounds = [f.start for f in faults[1:]] + [args.seconds + 1] if faults else []
    for fault, nxt in zip(faults, bounds, strict=True):
        fig = judge(fault, answers, nxt)
        figures.append(fig)
        print(f"{fig['fault']:<10} down {fig['start_s']:>5}-{fig['end_s']:<5} s: "
              f"{fig['named_or_503']}/{fig['during']} answers during it named it (gap) or "
              f"were 503+Retry-After; statuses {fig['statuses']}; last sign of it "
              f"{fig['recovered_after_s']} s after it ended")
    ok = fails == 0 and no_retry == 0 and all(
        f["recovered_after_s"] <= RETRY_INTERVAL for f in figures)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"answers": len(answers), "statuses": dict(statuses), "errors": fails,
             "faults": figures}, indent=2))
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
