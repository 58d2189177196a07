"""The weekly digests at small scale, from archived reports made by the scale generator
(``bench/scale_archive.fill_reports``): read one user at a time without the series a
digest does not use, they equal the digests built from every full record of the week, GPU
waste included; so ``bench/bench_digest.py``'s generator and query cannot rot."""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict

from bench import scale_archive
from webapp.archive.digest import build_digest
from webapp.archive.store import Archive
from webapp.mail.digest import digests
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
