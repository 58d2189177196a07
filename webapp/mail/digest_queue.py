"""The weekly digest: per user with archived jobs in the week, one email through the
durable outbox, keyed ``cluster:digest:user:first-day`` so a re-run queues none twice."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import make_msgid
from itertools import islice
from typing import Any

from webapp.archive.digest_rows import DigestRows
from webapp.archive.mail_state import MailState
from webapp.archive.store import Archive
from webapp.archive.week_sums import Digest
from webapp.mail.outbox import Outbox, Rendered, deliver_unless_busy
from webapp.mail.policy import owner_address, read_opt_out
from webapp.mail.sending import Connect, owner_opt_out_url
from webapp.model import JobReport
from webapp.renderers import digest as digest_renderer
from webapp.settings import Settings

WEEK = timedelta(days=7)
QUEUE_BATCH = 200  # digests recorded in the outbox per transaction
# Rendering the emails is most of a week's run (5,000 digests of a large site: ~400 MB of
# text and HTML, ~6 ms each): `jobreport digest` renders them in worker processes, one a
# CPU (at most 4), RENDER_CHUNK digests a task.
RENDER_PROCESSES = max(1, min(4, os.cpu_count() or 1))
RENDER_CHUNK = 20


def last_week(now: datetime) -> tuple[int, int]:
    """[Monday 00:00, next Monday 00:00) UTC of the last full week before ``now``."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    monday = today - timedelta(days=today.weekday())
    return int((monday - WEEK).timestamp()), int(monday.timestamp())


def digest_key(d: Digest) -> str:
    return f"{d.cluster}:digest:{d.user}:{digest_renderer.day(d.since)}"


@dataclass(frozen=True, slots=True)
class DigestLine:
    """What the run says of one digest (``jobreport digest`` prints it): its totals, not
    its jobs, so a run over every user keeps no week in memory."""

    user: str
    to_addr: str
    jobs: int
    cpu_hours: float
    gpu_hours: float
    memory_gib_hours: float
    top_finding: str | None

    @classmethod
    def of(cls, d: Digest, to_addr: str) -> DigestLine:
        return cls(d.user, to_addr, len(d.jobs), d.cpu_hours, d.gpu_hours, d.memory_gib_hours,
                   d.top_finding)


@dataclass
class DigestRun:
    digests: list[DigestLine] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    delivery: Counter[str] = field(default_factory=Counter)


def digests(settings: Settings, archive: Archive, since: int, until: int,
            users: frozenset[str] = frozenset(),
            skipped: Counter[str] | None = None) -> Iterator[Digest]:
    """Each user's digest of the week (only ``users`` when given), one at a time; who was
    skipped, and why, counted in ``skipped``.

    Read from each job's stored line (``webapp.archive.digest_rows``; lines missing for
    jobs archived before there were any are written first), a few hundred users a query,
    each digest dropped once the caller is done with it: a week of a large site (hundreds
    of thousands of jobs) never sits in memory at once, nor do 5,000 digests (keeping them
    made Python's garbage collector walk them all, again and again: a fifth of the run)."""
    skipped = Counter() if skipped is None else skipped
    mail = MailState(archive.db)
    opted = read_opt_out(settings.mail_opt_out) | mail.opted_out(settings.cluster).keys()
    archive.fill_digest_rows(settings.cluster, since, until - 1)
    rows = DigestRows(archive.db)
    wanted = []
    for user in rows.users(settings.cluster, since, until - 1):
        if users and user not in users:
            continue
        if user in opted:
            skipped["opted out"] += 1
            continue
        wanted.append(user)
    yield from rows.digests(settings.cluster, wanted, since, until - 1)


def _render(items: list[tuple[Any, ...]]) -> list[Rendered]:
    """``digest_renderer.render`` of each item's arguments, as the outbox records it (in a
    worker process)."""
    return [Rendered.of(digest_renderer.render(*args)) for args in items]


def rendered(work: Iterable[tuple[Any, tuple[Any, ...]]],
             processes: int = 1) -> Iterator[tuple[Any, Rendered]]:
    """(tag, message) for each (tag, the renderer's arguments) of ``work``, in order:
    rendered here, or by ``processes`` worker processes, at most two tasks a process in
    flight, so the week's digests never wait in memory all at once."""
    if processes <= 1:
        for tag, args in work:
            yield tag, Rendered.of(digest_renderer.render(*args))
        return
    items = iter(work)
    # spawn: the workers inherit no open database connection (SQLite's must not cross a fork)
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque[tuple[list[Any], Future[list[Rendered]]]] = deque()
        while chunk := list(islice(items, RENDER_CHUNK)):
            pending.append(([tag for tag, _ in chunk], pool.submit(_render, [a for _, a in chunk])))
            if len(pending) >= 2 * processes:
                tags, done = pending.popleft()
                yield from zip(tags, done.result(), strict=True)
        while pending:
            tags, done = pending.popleft()
            yield from zip(tags, done.result(), strict=True)


def send_digests(settings: Settings, archive: Archive, outbox: Outbox, connect: Connect,
                 since: int, until: int, users: frozenset[str] = frozenset(),
                 dry_run: bool = False, no_deliver: bool = False,
                 processes: int = 1) -> DigestRun:
    """Queue (and deliver, unless ``no_deliver``) each user's digest of [since, until);
    the emails rendered by ``processes`` processes (`jobreport digest`:
    ``RENDER_PROCESSES``)."""
    run = DigestRun()
    domain = settings.mail_from.rpartition("@")[2] or None
    batch: list[tuple[str, str, str, EmailMessage | Rendered]] = []

    def flush() -> None:
        for queued in outbox.enqueue_many(batch):
            run.counts["queued" if queued else "already queued"] += 1
        batch.clear()

    def work() -> Iterator[tuple[tuple[str, str], tuple[Any, ...]]]:
        for d in digests(settings, archive, since, until, users, run.counts):
            to_addr = owner_address(JobReport(job_id="digest", cluster=d.cluster, user=d.user),
                                    settings)
            if to_addr is None:
                run.counts["no address"] += 1
                continue
            run.digests.append(DigestLine.of(d, to_addr))
            if not dry_run:
                yield (digest_key(d), d.user), (d, to_addr, settings.mail_from,
                                                make_msgid(domain=domain),
                                                owner_opt_out_url(settings, d.cluster, d.user),
                                                settings.policy_dir)

    if dry_run:
        for _ in work():
            pass
        return run
    for (key, user), msg in rendered(work(), processes):
        batch.append((key, f"digest:{user}", "digest", msg))
        if len(batch) >= QUEUE_BATCH:
            flush()
    flush()
    if not no_deliver:
        run.delivery = deliver_unless_busy(outbox, connect)
    return run
