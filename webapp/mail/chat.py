"""Chat notices: another delivery channel of the report-email decision.

When the policy (``webapp.mail.owner``) sends a job's report to its owner, one notice per
chat URL of the owner is queued in the same durable outbox, kind ``chat``, keyed
``cluster:job:submit:chat:<URL digest>``: a second sync run or a send by hand finds it
queued, and a URL added later gets its own row. apprise delivers them (Slack, Matrix,
Mattermost, Teams, Telegram, ntfy, JSON webhooks); a failed post goes back to pending with
the outbox's backoff, an URL apprise cannot read fails for good.

The URLs: the owner's line in JOBREPORT_CHAT_MAP, else JOBREPORT_CHAT_URLS with ``{user}``
filled. The map names where notices go, so a file that anyone but root or the service
user could change is refused.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from webapp.mail.outbox import CHAT, Outbox, Row
from webapp.mail.policy import USER_RE
from webapp.model import JobReport
from webapp.renderers import chat as chat_renderer
from webapp.renderers.chat import Notice
from webapp.settings import Settings

log = logging.getLogger(__name__)
_SEPARATORS = re.compile(r"[\s,]+")


class ChatMapUnsafe(ValueError):
    """JOBREPORT_CHAT_MAP may be changed by someone other than root or the service user."""


class ChatRefused(RuntimeError):
    """A notice that will never go through (apprise cannot use the URL): failed for good."""


class ChatUnavailable(RuntimeError):
    """The chat service did not take the notice this time: retried later."""


Notify = Callable[[str, Notice], None]


def split_urls(text: str) -> tuple[str, ...]:
    """``json://a/x, mmost://b/t`` -> both URLs (apprise's own separators)."""
    return tuple(u for u in _SEPARATORS.split(text.strip()) if u)


def parse_chat_map(text: str) -> dict[str, tuple[str, ...]]:
    """User -> URLs from the map's lines ('#' starts a comment):

        alice  json://hooks.example.org/alice  ntfy://ntfy.example.org/alice-jobs
        bob    mmost://chat.example.org/token?channel=@bob
    """
    out: dict[str, tuple[str, ...]] = {}
    for line in text.splitlines():
        parts = split_urls(line.split("#", 1)[0])
        if len(parts) >= 2:
            out[parts[0]] = parts[1:]
    return out


def read_chat_map(path: str) -> dict[str, tuple[str, ...]]:
    """The map file, refused (ChatMapUnsafe) unless root or this process's user owns it
    and neither its group nor others may write it."""
    info = os.stat(path)
    if info.st_uid not in (0, os.geteuid()) or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ChatMapUnsafe(f"JOBREPORT_CHAT_MAP={path!r} must be owned by root or the "
                            "service user and writable by nobody else")
    return parse_chat_map(Path(path).read_text(encoding="utf-8"))


def owner_chat_urls(user: str | None, settings: Settings) -> tuple[str, ...]:
    """The user's line in JOBREPORT_CHAT_MAP, else JOBREPORT_CHAT_URLS with ``{user}``
    filled (only for a plain user name: a hostile one cannot reach another channel)."""
    if not user:
        return ()
    if settings.chat_map:
        mapped = read_chat_map(settings.chat_map).get(user)
        if mapped:
            return mapped
    urls = split_urls(settings.chat_urls)
    if any("{user}" in u for u in urls) and not USER_RE.match(user):
        log.warning("user name %r is not usable in a chat URL", user)
        return tuple(u for u in urls if "{user}" not in u)
    return tuple(u.replace("{user}", user) for u in urls)


def chat_key(cluster: str, job_id: str, submit_time: int, url: str) -> str:
    """One row per (job, URL): a digest, since a URL may hold a token the key must not."""
    digest = hashlib.sha256(url.encode()).hexdigest()[:16]
    return f"{cluster}:{job_id}:{submit_time}:{CHAT}:{digest}"


def page_url(settings: Settings, report: JobReport) -> str:
    path = chat_renderer.job_path(report.cluster, report.job_id, settings.multi_cluster)
    return settings.public_url.rstrip("/") + path


def queue_owner_chat(report: JobReport, job_id: str, submit_time: int, settings: Settings,
                     outbox: Outbox) -> int:
    """Queue the job's notice for each of its owner's URLs; how many were new."""
    urls = owner_chat_urls(report.user, settings)
    if not urls:
        return 0
    notice = chat_renderer.render(report, page_url(settings, report))
    queued = 0
    for url in urls:
        data = json.dumps({"url": url, "title": notice.title, "body": notice.body})
        queued += outbox.enqueue_notice(chat_key(settings.cluster, job_id, submit_time, url),
                                        job_id, f"chat:{report.user}", data.encode())
    return queued


def apprise_notify(url: str, notice: Notice) -> None:
    """Post one notice through apprise; ChatRefused or ChatUnavailable when it fails."""
    try:  # here: an optional dependency, and a tenth of a second other commands need not pay
        import apprise
    except ImportError:
        raise ChatUnavailable("apprise is not installed (pip install 'jobreport[chat]')") from None

    sender = apprise.Apprise()
    if not sender.add(url):
        raise ChatRefused("apprise cannot use this URL")
    if not sender.notify(body=notice.body, title=notice.title,
                         body_format=apprise.NotifyFormat.TEXT):
        raise ChatUnavailable("the chat service did not take the notice")


def _notice(row: Row) -> tuple[str, Notice]:
    data = json.loads(row.message)
    return data["url"], Notice(data["title"], data["body"])


def deliver_chat(outbox: Outbox, notify: Notify = apprise_notify) -> Counter[str]:
    """Post every due notice; call while holding ``outbox.lock()``. Counts of sent,
    deferred (retried with the outbox's backoff) and failed (for good). A URL that failed
    once is not tried again in the same run: a service that is down costs one timeout."""
    stats: Counter[str] = Counter()
    down: set[str] = set()
    while (row := outbox.claim_next(chat=True)) is not None:
        url, notice = _notice(row)
        try:
            if url in down:
                raise ChatUnavailable("not tried: it failed earlier in this run")
            notify(url, notice)
        except ChatRefused as exc:
            log.error("chat notice %s refused: %s", row.key, exc)  # the key: no token in it
            outbox.mark_failed(row, str(exc))
            stats["failed"] += 1
            continue
        except (ChatUnavailable, OSError) as exc:
            log.warning("chat notice %s deferred: %s", row.key, exc)
            down.add(url)
            outbox.mark_retry(row, str(exc))
            stats["deferred"] += 1
            continue
        outbox.mark_sent(row)
        stats["sent"] += 1
    return stats
