"""Email soak: N queued emails delivered through a real SMTP server (aiosmtpd on loopback)
that is killed and restarted twice, by a delivery process that is itself killed once.

Every message the server accepts is appended to a file (fsync'd before the 250 reply),
so the count at the server survives its own restarts. The outbox promises that nothing
is lost and that a duplicate is possible only when the sender dies between the server's
250 and its own commit; the soak prints both counts.

    .venv/bin/python bench/soak_email.py [--emails 1000]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path

from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python bench/soak_email.py): import from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webapp.mail.outbox import Outbox  # noqa: E402

SERVER = r"""
import os, sys, time
from aiosmtpd.controller import Controller
log = open(sys.argv[2], "a")
class Keep:
    async def handle_DATA(self, server, session, envelope):
        mid = next((l for l in envelope.original_content.split(b"\r\n")
                    if l.lower().startswith(b"message-id:")), b"?")
        log.write(mid.decode() + "\n"); log.flush(); os.fsync(log.fileno())
        return "250 2.0.0 kept"
c = Controller(Keep(), hostname="127.0.0.1", port=int(sys.argv[1])); c.start()
print("ready", flush=True)
while True: time.sleep(3600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(log)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def accepted(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def message(i: int) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "jobreport@example.org"
    msg["To"] = f"user{i % 50}@example.org"
    msg["Subject"] = f"Job {i}: 1 finding"
    msg["Message-ID"] = make_msgid(idstring=f"soak{i}", domain="example.org")
    msg.set_content(f"report of job {i}\n" + "x" * 2000)
    return msg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--emails", type=int, default=1000)
    ap.add_argument("--worst-timing", action="store_true",
                    help="kill the server the moment it has stored a message, before its 250 "
                    "reaches the sender (the one window where a duplicate is possible)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    n = args.emails
    with tempfile.TemporaryDirectory(prefix="soak-email-") as tmp:
        outbox_path, log = Path(tmp) / "outbox.sqlite", Path(tmp) / "accepted.log"
        box = Outbox(str(outbox_path))
        for i in range(n):
            box.enqueue(f"{i}:ended", str(i), "ended", message(i))
        box.close()
        port = free_port()
        env = {**os.environ, "JOBREPORT_OUTBOX": str(outbox_path),
               "JOBREPORT_SMTP_HOST": "127.0.0.1", "JOBREPORT_SMTP_PORT": str(port)}
        env = {k: v for k, v in env.items() if not k.startswith("JOBREPORT_") or k in (
            "JOBREPORT_OUTBOX", "JOBREPORT_SMTP_HOST", "JOBREPORT_SMTP_PORT")}
        jobreport = str(Path(sys.executable).parent / "jobreport")
        server = start_server(port, log)
        server_kills_at, batch_kill_at = [n * 3 // 10, n * 6 // 10], n // 2
        events: Counter = Counter()
        t0 = time.monotonic()
        bar = tqdm(total=n, unit="email", desc="delivered")
        try:
            while True:
                batch = subprocess.Popen([jobreport, "outbox", "--retry"], env=env,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                while batch.poll() is None:
                    got = len(accepted(log))
                    bar.update(got - bar.n)
                    if server_kills_at and got >= server_kills_at[0]:
                        server_kills_at.pop(0)
                        if not args.worst_timing:
                            time.sleep(rng.uniform(0.0, 0.2))  # mid-conversation, anywhere
                        server.send_signal(signal.SIGKILL)
                        server.wait()
                        events["smtp server killed"] += 1
                        time.sleep(1.0)
                        server = start_server(port, log)
                    if batch_kill_at is not None and got >= batch_kill_at:
                        batch_kill_at = None
                        if not args.worst_timing:
                            time.sleep(rng.uniform(0.0, 0.2))
                        batch.send_signal(signal.SIGKILL)
                        events["batch killed"] += 1
                    time.sleep(0.02)
                events["batch runs"] += 1
                box = Outbox(str(outbox_path))
                left = box.rows(("pending", "sending"))
                failed = box.rows(("failed",))
                box.close()
                if not left or failed:
                    break
                time.sleep(0.3)  # the server may still be coming back
        finally:
            bar.update(len(accepted(log)) - bar.n)
            bar.close()
            server.send_signal(signal.SIGKILL)
            server.wait()
        seconds = time.monotonic() - t0
        ids = accepted(log)
        counts = Counter(ids)
        unique = len(counts)
        dupes = sum(c - 1 for c in counts.values() if c > 1)
        print(f"{n} emails queued; {dict(events)}")
        print(f"accepted at the server: {len(ids)} ({unique} distinct, {dupes} duplicate), "
              f"lost: {n - unique}, failed rows: {len(failed)}, in {seconds:.1f} s")
        return 0 if unique == n and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
