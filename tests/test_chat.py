"""Chat notices through apprise to a real JSON webhook server on loopback: the notice's text
(verdict, findings, link; job text made visible; within the size limit), each job notified
once across sync runs and a send by hand, a notice retried after the server was down and
delivered once, nothing for an opted-out user, the daily cap folding notices like emails,
and the URLs: the per-user map over the site's, a map anyone could change refused."""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest

from tests.helpers.mail import email_args, free_port, mail_settings
from tests.helpers.reports import HEADER_PAYLOAD, FakeService, sample_report
from tests.helpers.sync import email_step
from tests.helpers.webhook import Webhook
from webapp.archive.mail_state import MailState
from webapp.archive.store import Archive
from webapp.cli import mail as mail_cli
from webapp.mail.chat import ChatMapUnsafe, deliver_chat, owner_chat_urls, parse_chat_map
from webapp.mail.outbox import BACKOFF_BASE, Outbox
from webapp.mail.owner import file_opt_outs
from webapp.mail.sending import smtp_connect
from webapp.model import Finding, Severity
from webapp.renderers import chat as chat_renderer
from webapp.renderers import wording
from webapp.settings import Settings, caller_env
from webapp.sync.run import Syncer, _deliver


@pytest.fixture
def webhook():
    hook = Webhook(free_port())
    hook.up()
    yield hook
    hook.down()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _sync(settings: Settings, service: FakeService, job_ids: list[str],
          clock: Clock | None = None) -> tuple[Counter, Counter]:
    """The sync's email step for these jobs, then its delivery: (outcomes, chat counts)."""
    syncer = Syncer(settings, service=service, archive=Archive(settings.archive_url))
    outbox = Outbox(settings.outbox, clock=clock) if clock else Outbox(settings.outbox)
    try:
        outcomes = email_step(syncer, service.reports, job_ids, outbox, file_opt_outs(settings))
        _, chat = _deliver(outbox, smtp_connect(settings), syncer.notify)
    finally:
        outbox.close()
        syncer.close()
    return outcomes, chat


def _chat_rows(settings: Settings, statuses: tuple[str, ...] = ("pending", "sending", "failed",
                                                                 "sent")) -> list:
    outbox = Outbox(settings.outbox)
    try:
        return [r for r in outbox.rows(statuses) if r.kind == "chat"]
    finally:
        outbox.close()


def _per_job(hook: Webhook) -> Counter:
    return Counter(re.match(r"Job (\S+) ", body["title"]).group(1) for _, body in hook.posts)


# -- the notice ------------------------------------------------------------------------------

def test_notice_has_verdict_findings_and_link_with_job_text_visible():
    report = sample_report("6001", name=HEADER_PAYLOAD)
    notice = chat_renderer.render(report, "https://jr.example.org/jobs/6001")
    # The email's subject as the title, the report's headline verdict first in the body.
    assert notice.title == ("Job 6001 (x\\r\\nBcc: evil@example.org) on demo: "
                            f"{wording.verdict(report)}")
    assert notice.body.startswith(wording.headline(report) + "\n\n[CRITICAL] ")
    assert "\n" not in notice.title and "\r" not in notice.body
    for f in report.findings:
        assert f"[{f.severity.value.upper()}] {f.message}" in notice.body
        assert f"  What to do: {f.advice}" in notice.body
    assert notice.body.endswith("\n\nFull report: https://jr.example.org/jobs/6001")
    assert chat_renderer.job_path("b", "7_1", True) == "/c/b/jobs/7_1"


def test_notice_stays_within_the_chat_limit_and_keeps_the_link():
    many = tuple(Finding(f"f{i}", Severity.WARNING, "m\u2028" * 300, "a" * 500)
                 for i in range(40))
    notice = chat_renderer.render(sample_report("6002", findings=many), "https://x.org/jobs/6002")
    assert len(notice.body.encode()) <= chat_renderer.NOTICE_MAX_BYTES
    assert "\u2028" not in notice.body and "m\\u2028m" in notice.body
    assert re.search(r"\.\.\. and \d+ more findings on the page\.", notice.body)
    assert notice.body.endswith("Full report: https://x.org/jobs/6002")


# -- once per job, retries, opt-outs, the cap ------------------------------------------------

def test_each_job_notified_once_across_two_syncs_and_a_send_by_hand(smtp, webhook, tmp_path,
                                                                    fast_pdf, capsys):
    recorder, port = smtp
    settings = mail_settings(tmp_path, port, mail_daily_cap=0, chat_urls=webhook.url(),
                             public_url="https://jr.example.org")
    service = FakeService({j: sample_report(j, "alice") for j in ("8001", "8002")})
    assert mail_cli.run_email(email_args("8001"), settings, service) == 0  # by hand first
    assert _per_job(webhook) == {"8001": 1}
    assert _sync(settings, service, ["8001", "8002"])[1] == Counter({"sent": 1})
    assert _sync(settings, service, ["8001", "8002"])[1] == Counter()  # nothing new
    assert mail_cli.run_email(email_args("8002"), settings, service) == 0
    assert "already sent" in capsys.readouterr().out
    assert _per_job(webhook) == {"8001": 1, "8002": 1}
    assert sorted(recorder.jobs()) == ["8001", "8002"]  # the emails went as before, once
    body = webhook.posts[1][1]["message"]
    assert body.endswith("Full report: https://jr.example.org/jobs/8002"), body


def test_server_down_is_retried_later_and_delivered_once(smtp, webhook, tmp_path, fast_pdf):
    _, port = smtp
    settings = mail_settings(tmp_path, port, chat_urls=webhook.url())
    service = FakeService({j: sample_report(j, "alice") for j in ("8101", "8102")})
    clock = Clock(1_790_000_000.0)
    webhook.down()
    outcomes, chat = _sync(settings, service, ["8101", "8102"], clock)
    assert outcomes == Counter({"queued": 2}) and chat == Counter({"deferred": 2})
    first, second = _chat_rows(settings)
    assert [(r.status, r.attempts, r.to_addr) for r in (first, second)] == [
        ("pending", 1, "chat:alice")] * 2
    assert "json://" not in first.last_error  # no URL (token) in listings
    # One refused connection per URL and run: the second notice was not tried.
    assert second.last_error == "not tried: it failed earlier in this run"
    webhook.up()
    assert _sync(settings, service, ["8101", "8102"], clock)[1] == Counter()  # backing off
    assert webhook.posts == []
    clock.now += BACKOFF_BASE
    assert _sync(settings, service, ["8101", "8102"], clock)[1] == Counter({"sent": 2})
    clock.now += 7 * BACKOFF_BASE
    assert _sync(settings, service, ["8101", "8102"], clock)[1] == Counter()
    assert _per_job(webhook) == {"8101": 1, "8102": 1}


def test_no_notice_for_an_opted_out_user_and_the_cap_folds_like_email(smtp, webhook, tmp_path,
                                                                      fast_pdf):
    recorder, port = smtp
    (tmp_path / "optout").write_text("carol\n")
    settings = mail_settings(tmp_path, port, mail_opt_out=str(tmp_path / "optout"),
                             mail_daily_cap=1, chat_urls=webhook.url("{user}"))
    reports = [sample_report("9001", "carol"), sample_report("9002", "dave"),
               sample_report("9003", "alice"), sample_report("9004", "alice")]
    service = FakeService({r.job_id: r for r in reports})
    with Archive(settings.archive_url) as archive:
        MailState(archive.db).opt_out("demo", "dave", "link")  # by the email's link
    outcomes, chat = _sync(settings, service, list(service.reports))
    assert outcomes == Counter({"skipped: user opted out": 2, "queued": 1,
                                "folded into digest": 1})
    assert chat == Counter({"sent": 1})
    assert [(p, b["title"][:8]) for p, b in webhook.posts] == [("/alice", "Job 9003")]
    assert [r.job_id for r in _chat_rows(settings)] == ["9003"]  # none queued for the others
    assert recorder.jobs() == ["9003"]


# -- where notices go ------------------------------------------------------------------------

def test_the_users_map_line_replaces_the_sites_urls(smtp, webhook, tmp_path, fast_pdf):
    _, port = smtp
    chat_map = tmp_path / "chat-map"
    chat_map.write_text(f"# user URLs\nbob {webhook.url('bob-a')}, {webhook.url('bob-b')}\n")
    chat_map.chmod(0o644)
    settings = mail_settings(tmp_path, port, chat_urls=webhook.url("site"),
                             chat_map=str(chat_map))
    service = FakeService({"7001": sample_report("7001", "bob"),
                           "7002": sample_report("7002", "alice")})
    assert _sync(settings, service, ["7001", "7002"])[1] == Counter({"sent": 3})
    assert sorted(p for p, _ in webhook.posts) == ["/bob-a", "/bob-b", "/site"]
    # A notice per URL, each with its own row: one URL down retries only that one.
    assert len({r.key for r in _chat_rows(settings)}) == 3


def test_a_map_others_could_change_is_refused(tmp_path):
    chat_map = tmp_path / "chat-map"
    chat_map.write_text("bob json://127.0.0.1:1/evil\n")
    chat_map.chmod(0o664)
    settings = Settings(chat_map=str(chat_map), chat_urls="json://127.0.0.1:1/site")
    with pytest.raises(ChatMapUnsafe, match="JOBREPORT_CHAT_MAP"):
        owner_chat_urls("bob", settings)
    chat_map.chmod(0o644)
    assert owner_chat_urls("bob", settings) == ("json://127.0.0.1:1/evil",)
    if os.geteuid() == 0:  # owned by another user: refused even when not writable
        os.chown(chat_map, 65534, 65534)
        with pytest.raises(ChatMapUnsafe):
            owner_chat_urls("bob", settings)


def test_site_urls_take_plain_user_names_only():
    settings = Settings(chat_urls="json://h/{user} , ntfy://h/all")
    assert owner_chat_urls("alice", settings) == ("json://h/alice", "ntfy://h/all")
    assert owner_chat_urls("x/../admin", settings) == ("ntfy://h/all",)
    assert owner_chat_urls(None, settings) == ()
    assert parse_chat_map("a json://x ntfy://y # c\nlonely\n") == {"a": ("json://x", "ntfy://y")}


def test_a_url_apprise_cannot_use_fails_for_good_and_emails_still_go(tmp_path):
    outbox = Outbox(str(tmp_path / "outbox.sqlite"))
    try:
        outbox.enqueue_notice("demo:1:0:chat:x", "1", "chat:alice",
                              b'{"url": "nosuch://x", "title": "t", "body": "b"}')
        with outbox.lock():
            assert deliver_chat(outbox) == Counter({"failed": 1})
        (row,) = outbox.rows(("failed",))
        assert row.last_error == "apprise cannot use this URL"
    finally:
        outbox.close()


def test_by_hand_with_an_unsafe_map_says_so_and_sends_nothing(smtp, webhook, tmp_path,
                                                             fast_pdf, capsys):
    recorder, port = smtp
    chat_map = tmp_path / "chat-map"
    chat_map.write_text(f"alice {webhook.url('evil')}\n")
    chat_map.chmod(0o666)
    settings = mail_settings(tmp_path, port, chat_map=str(chat_map))
    service = FakeService({"7101": sample_report("7101", "alice")})
    assert mail_cli.run_email(email_args("7101"), settings, service) == 1
    assert "JOBREPORT_CHAT_MAP" in capsys.readouterr().err
    assert recorder.messages == [] and webhook.posts == []


def test_a_callers_environment_cannot_redirect_notices(tmp_path):
    system = tmp_path / "jobreport.conf"
    system.write_text("JOBREPORT_CHAT_URLS=ntfy://ntfy.example.org/jobs-{user}\n")
    env = {"JOBREPORT_CHAT_URLS": "json://attacker.example/x",
           "JOBREPORT_CHAT_MAP": str(tmp_path / "mine")}
    got = caller_env(env, str(system), uid=1000)
    assert got["JOBREPORT_CHAT_URLS"] == "ntfy://ntfy.example.org/jobs-{user}"
    assert "JOBREPORT_CHAT_MAP" not in got  # not in the system file: its default
    assert caller_env(env, str(system), uid=0)["JOBREPORT_CHAT_URLS"] == \
        "json://attacker.example/x"  # root, testing a setting
