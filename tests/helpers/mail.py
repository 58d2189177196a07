"""Email test support: a recording SMTP handler, settings, argument builders."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from email import message_from_bytes
from email.policy import default

from webapp.cli.mail import add_email_arguments, add_outbox_arguments
from webapp.settings import Settings

FAKE_PDF = b"%PDF-1.4\n% test attachment\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Recorder:
    """SMTP handler that keeps every accepted message; can refuse or hold messages."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], bytes]] = []
        self.refuse = False  # answer 451 (a temporary outage)
        self.hold_after: int | None = None  # hold the message after this many deliveries
        self.held = threading.Event()
        self.release = threading.Event()

    async def handle_DATA(self, server, session, envelope):
        if self.hold_after is not None and len(self.messages) == self.hold_after:
            self.hold_after = None
            self.held.set()
            while not self.release.is_set():
                await asyncio.sleep(0.02)
            return "451 4.3.0 client went away"  # never counted as delivered
        if self.refuse:
            return "451 4.3.2 try again later"
        self.messages.append((list(envelope.rcpt_tos), envelope.original_content))
        return "250 2.0.0 queued"

    def message_ids(self) -> list[str]:
        return [message_from_bytes(raw, policy=default)["Message-ID"] for _, raw in self.messages]

    def jobs(self) -> list[str]:
        return [message_from_bytes(raw, policy=default)["X-Jobreport-Job"]
                for _, raw in self.messages]


def mail_settings(tmp_path, port: int, **changes) -> Settings:
    base = Settings(smtp_host="127.0.0.1", smtp_port=port, mail_from="jobreport@example.org",
                    mail_to="{user}@example.org", outbox=str(tmp_path / "var" / "outbox.sqlite"),
                    archive_url=str(tmp_path / "var" / "archive.sqlite"), mail_min_runtime=600)
    return replace(base, **changes)


def email_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_email_arguments(parser)
    return parser.parse_args(argv)


def outbox_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_outbox_arguments(parser)
    return parser.parse_args(argv)


def kill_while_held(proc: subprocess.Popen, recorder: Recorder, timeout: float,
                    why: Callable[[], str]) -> None:
    """SIGKILL the sending process while the server holds a message in DATA."""
    try:
        assert recorder.held.wait(timeout), why()
        os.kill(proc.pid, signal.SIGKILL)  # the sender dies waiting for the 250
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
