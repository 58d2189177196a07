"""The weekly digests at small scale, from archived reports made by the scale generator
(``bench/scale_archive.fill_reports``): read one user at a time without the series a
digest does not use, they equal the digests built from every full record of the week, GPU
waste included; so ``bench/bench_digest.py``'s generator and query cannot rot."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

from tests.helpers import scale_archive
from webapp.archive.store import Archive
from webapp.archive.week_sums import build_digest
from webapp.mail.digest_queue import digests
from webapp.settings import Settings

UNTIL = 1_800_000_000
SINCE = UNTIL - 7 * 86400


def rounded(value):
    """``value`` with every float at 12 significant digits: the database writes a JSON
    number it extracted with 15 (SQLite's json_array), Python's json with 17."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, tuple | list):
        return [rounded(v) for v in value]
    if dataclasses.is_dataclass(value):
        return [rounded(getattr(value, f.name)) for f in dataclasses.fields(value)]
    return value


def test_digests_read_per_user_equal_those_of_the_whole_week(tmp_path):
    url = str(tmp_path / "archive.sqlite")
    assert scale_archive.fill_reports(url, 1600, 30, progress=False, until=UNTIL,
                                      heavy=200) == 1600
    settings = Settings.from_env({"JOBREPORT_CLUSTER": scale_archive.CLUSTER,
                                  "JOBREPORT_ARCHIVE_URL": url,
                                  "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")})
    with Archive(url) as archive:
        skipped = Counter()
        got = list(digests(settings, archive, SINCE, UNTIL + 1, skipped=skipped))
        per_user = defaultdict(list)
        for job in archive.jobs(scale_archive.CLUSTER, SINCE, UNTIL):
            assert job.series.keys() >= {"cpu_cores"}  # the full record, as stored
            per_user[job.user].append(job)
    want = [build_digest(scale_archive.CLUSTER, u, SINCE, UNTIL + 1, jobs)
            for u, jobs in sorted(per_user.items())]
    assert not skipped and len(got) == len(want) == 30
    assert rounded(got) == rounded(want)
    heavy = next(d for d in got if d.user == "user0000")
    assert len(heavy.jobs) == 200 and heavy.top_finding is not None
    assert sum(d.gpu_hours for d in got) > 0  # GPU jobs' series were read, and used
    assert sum(d.energy_kwh or 0 for d in got) > 0


def _queries(archive, settings) -> tuple[list, int]:
    """The week's digests, and how many statements the archive ran for them."""
    ran = []
    query, execute = archive.db.query, archive.db.execute

    def counted(run):
        def wrapper(sql, params=()):
            ran.append(sql)
            return run(sql, params)
        return wrapper

    archive.db.query, archive.db.execute = counted(query), counted(execute)
    try:
        return list(digests(settings, archive, SINCE, UNTIL + 1)), len(ran)
    finally:
        archive.db.query, archive.db.execute = query, execute


def test_the_digests_queries_do_not_grow_with_the_users(tmp_path):
    """A week's digests cost the same few statements for 5 users or 60 (a few hundred
    users a query): a return to a query per user (5,000 of them each week) fails here."""
    counts = {}
    for users in (5, 60):
        url = str(tmp_path / f"archive-{users}.sqlite")
        scale_archive.fill_reports(url, users * 8, users, progress=False, until=UNTIL,
                                   heavy=users)
        settings = Settings.from_env({"JOBREPORT_CLUSTER": scale_archive.CLUSTER,
                                      "JOBREPORT_ARCHIVE_URL": url,
                                      "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")})
        with Archive(url) as archive:
            got, counts[users] = _queries(archive, settings)
        assert len(got) == users and any(d.top_message for d in got)
    assert counts[5] == counts[60] <= 8, counts


def test_jobs_archived_before_their_digest_line_get_it_from_the_record(tmp_path):
    """An archive from before the digest's lines (or a crash between a record and its
    line): the first digest over the week writes them from the records, then reads them;
    the digests are those of the full records, folded emails included."""
    from webapp.archive.mail_state import FOLDED, MailState

    url = str(tmp_path / "archive.sqlite")
    scale_archive.fill_reports(url, 300, 12, progress=False, until=UNTIL, heavy=40)
    settings = Settings.from_env({"JOBREPORT_CLUSTER": scale_archive.CLUSTER,
                                  "JOBREPORT_ARCHIVE_URL": url,
                                  "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite")})
    with Archive(url) as archive:
        records = list(archive.jobs(scale_archive.CLUSTER, SINCE, UNTIL))
        folded = {(j.job_id, j.submit_time) for j in records[::7]}
        mail = MailState(archive.db)
        for j in records[::7]:
            mail.decide(scale_archive.CLUSTER, j.job_id, j.submit_time, j.user, "2027-01-08",
                        FOLDED)
        archive.db.execute("DELETE FROM archive_digest_jobs WHERE job_id > ?", ("5000100",))
        got, ran = _queries(archive, settings)
        assert archive.db.query("SELECT COUNT(*) FROM archive_digest_jobs")[0][0] == 300
        again, ran_again = _queries(archive, settings)
    per_user = defaultdict(list)
    for job in records:
        per_user[job.user].append(job)
    want = [build_digest(scale_archive.CLUSTER, u, SINCE, UNTIL + 1, jobs, folded)
            for u, jobs in sorted(per_user.items())]
    assert rounded(got) == rounded(want) == rounded(again)
    assert sum(d.folded for d in got) == len(folded) > 0
    assert ran_again < ran  # the lines were written once


def test_digests_rendered_by_worker_processes_are_those_rendered_here(tmp_path, monkeypatch):
    """`jobreport digest` renders the week's emails in worker processes: the outbox gets
    the same messages, in the same order, as from rendering them one by one here."""
    import re

    from webapp.mail import digest_queue as weekly
    from webapp.mail.outbox import Outbox

    url = str(tmp_path / "archive.sqlite")
    scale_archive.fill_reports(url, 200, 25, progress=False, until=UNTIL, heavy=40)
    settings = Settings.from_env({"JOBREPORT_CLUSTER": scale_archive.CLUSTER,
                                  "JOBREPORT_ARCHIVE_URL": url,
                                  "JOBREPORT_OUTBOX": str(tmp_path / "outbox.sqlite"),
                                  "JOBREPORT_MAIL_FROM": "hpc@example.org"})
    monkeypatch.setattr(weekly, "RENDER_CHUNK", 3)  # several tasks, more than in flight
    monkeypatch.setattr(weekly, "QUEUE_BATCH", 7)
    stamp = re.compile(rb"^(Date|Message-ID): .*$|=+\d+==", re.MULTILINE)  # each message's
    got = {}
    for processes in (1, 2):
        outbox = Outbox(str(tmp_path / f"outbox-{processes}.sqlite"))
        with Archive(url) as archive:
            run = weekly.send_digests(settings, archive, outbox, None, SINCE, UNTIL + 1,
                                      no_deliver=True, processes=processes)
        got[processes] = [(r[0], r[1], r[2], stamp.sub(b"", r[3])) for r in outbox.db.execute(
            "SELECT key, from_addr, to_addr, message FROM outbox ORDER BY id")]
        outbox.close()
        assert run.counts["queued"] == len(got[processes]) == 25
    assert got[1] == got[2]
