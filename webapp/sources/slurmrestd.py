"""Jobs and their steps from slurmrestd instead of a forked ``sacct``
(JOBREPORT_SACCT_SOURCE=slurmrestd): the same ``SacctReader`` interface, the same records.

Reached at ``http://host:6820`` with a JWT (``scontrol token``; AuthAltTypes=auth/jwt in
slurm.conf and slurmdbd.conf), read from a file on every request so a renewed token is
picked up, or at ``unix:/path/to/socket`` (rest_auth/local: the socket's peer is the user).

Each release serves a few versions of the accounting API (22.05: v0.0.38; 24.11: v0.0.40
to v0.0.42; 26.05: v0.0.42 to v0.0.45). The source asks ``/openapi/v3`` once which it
serves and speaks the newest of those it reads (``APIS``); one that no longer answers
(slurmrestd upgraded since) is asked again on the next call.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from webapp.model import JobId, JobNotFound, SacctJob, SourceUnavailable
from webapp.settings import Settings
from webapp.sources.gpu_metrics import TRES
from webapp.sources.sacct import find_array, pick_record
from webapp.sources.slurmrestd_jobs import admin_comment as _admin_comment
from webapp.sources.slurmrestd_jobs import display_id as _display
from webapp.sources.slurmrestd_jobs import parse_jobs

# The accounting APIs this source reads, newest first: one parser reads them all
# (webapp.sources.slurmrestd_jobs), each checked on real answers (tests/test_slurmrestd*.py).
APIS = ("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.38")
Transport = Callable[[str, Mapping[str, str]], tuple[int, bytes]]
_SLURMDB_PATH = re.compile(r"/slurmdb/(v[0-9]+\.[0-9]+\.[0-9]+)/")


def _version(api: str) -> tuple[int, ...]:
    return tuple(int(n) for n in api[1:].split("."))


def pick_api(paths: Iterable[str]) -> str | None:
    """The newest accounting API of ``APIS`` among an OpenAPI document's paths; None when
    it lists none of them (a newer one it lists and this source does not know is passed
    over for the newest it does).

        /slurmdb/v0.0.42/job/{job_id}
        /slurmdb/v0.0.42/jobs/
    """
    listed = {m.group(1) for p in paths if (m := _SLURMDB_PATH.match(p))}
    known = [api for api in APIS if api in listed]
    return max(known, key=_version) if known else None


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (slurmrestd's ``unix:`` listener)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


def http_transport(url: str, timeout: float) -> Transport:
    """GET ``path`` at ``url`` (``http://host:port`` or ``unix:/path``): (status, body)."""
    parts = urlsplit(url)

    def get(path: str, headers: Mapping[str, str]) -> tuple[int, bytes]:
        if parts.scheme == "unix":
            conn: http.client.HTTPConnection = _UnixConnection(parts.path, timeout)
        elif parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.netloc, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(parts.netloc, timeout=timeout)
        try:
            conn.request("GET", path, headers=dict(headers))
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    return get


class SlurmrestdSource:
    """Jobs and array tasks as slurmrestd's accounting endpoints report them."""

    name = "slurmrestd"

    def __init__(self, url: str, user: str = "", token_file: str = "", timeout: float = 30.0,
                 cluster: str | None = None, transport: Transport | None = None,
                 gpu_tres: bool = False) -> None:
        self.url = url
        self.gpu_tres = gpu_tres  # JOBREPORT_GPU_METRICS=tres: steps' usage TRES too
        self.user = user
        self.token_file = token_file
        self.cluster = cluster
        self._get = transport or http_transport(url, timeout)
        self._api: str | None = None  # the version spoken, once /openapi/v3 said

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token_file:
            try:
                with open(self.token_file, encoding="utf-8") as fh:
                    token = fh.read().strip().removeprefix("SLURM_JWT=")
            except OSError as exc:
                raise SourceUnavailable(self.name, f"token file: {exc.strerror}") from None
            headers["X-SLURM-USER-TOKEN"] = token
            if self.user:
                headers["X-SLURM-USER-NAME"] = self.user
        return headers

    def _answer(self, target: str) -> tuple[int, Any]:
        """(HTTP status, the JSON answer or None) of GET ``target``; SourceUnavailable
        when nothing answered or the credentials were refused."""
        try:
            status, body = self._get(target, self._headers())
        except (OSError, http.client.HTTPException) as exc:
            raise SourceUnavailable(self.name, str(exc) or type(exc).__name__) from None
        if status in (401, 403):
            raise SourceUnavailable(self.name, f"HTTP {status}: authentication refused")
        try:
            return status, json.loads(body)
        except ValueError:
            return status, None

    def api(self) -> str:
        """The accounting API spoken (``v0.0.42``): the newest of ``APIS`` that
        ``/openapi/v3`` lists, asked once."""
        if self._api is None:
            status, doc = self._answer("/openapi/v3")
            if not isinstance(doc, dict) or not isinstance(doc.get("paths"), dict):
                raise SourceUnavailable(self.name, f"HTTP {status}: no OpenAPI document")
            api = pick_api(doc["paths"])
            if api is None:
                raise SourceUnavailable(
                    self.name, "serves none of the accounting APIs read here "
                    f"({', '.join(APIS)})")
            self._api = api
        return self._api

    def _payload(self, path: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The JSON answer to GET ``path`` of the accounting API (a job unknown: no jobs);
        SourceUnavailable when there is none."""
        if self.cluster:
            params = {**(params or {}), "cluster": self.cluster}
        api = self.api()
        status, payload = self._answer(f"/slurmdb/{api}{path}"
                                       + (f"?{urlencode(params)}" if params else ""))
        if status == 404 and not isinstance(payload, dict):
            self._api = None  # the path itself is gone: slurmrestd was upgraded since
            raise SourceUnavailable(self.name, f"HTTP 404: {api} no longer served")
        if status == 404:
            return {"jobs": []}
        if not isinstance(payload, dict):
            raise SourceUnavailable(self.name, f"HTTP {status}: not a JSON answer")
        return payload

    def _job_rows(self, job_id: str) -> list[tuple[str, SacctJob]]:
        return parse_jobs(self._payload(f"/job/{quote(job_id, safe='')}"), self.gpu_tres)

    def job(self, job_id: JobId | str) -> SacctJob:
        """The job ``123``, array task ``123_4`` or het component ``123+1``."""
        jid = str(JobId.of(job_id))
        found = pick_record(jid, self._job_rows(jid), alone=True)
        if found is None:
            raise JobNotFound(jid)
        return found

    def admin_comment(self, job_id: JobId | str) -> str | None:
        """The job's AdminComment (where jobstats keeps its summary)."""
        jid = str(JobId.of(job_id))
        payload = self._payload(f"/job/{quote(jid, safe='')}")
        for job in payload.get("jobs") or ():
            if jid in (str(job.get("job_id")), _display(job)):
                return _admin_comment(job)
        return None

    def jobs(self, job_ids: Iterable[str]) -> dict[str, SacctJob]:
        """Many jobs, one request each (the job endpoint takes one id)."""
        out: dict[str, SacctJob] = {}
        for jid in (str(JobId.of(j)) for j in job_ids):
            found = pick_record(jid, self._job_rows(jid), alone=True)
            if found is not None:
                out[jid] = found
        return out

    def array(self, job_id: JobId | str) -> tuple[SacctJob, ...]:
        """Every task of the array job ``123`` (or of the array ``123_4`` belongs to)."""
        return find_array(job_id, lambda jid: (j for _, j in self._job_rows(jid)))

    def recent(self, since: datetime, user: str | None = None,
               account: str | None = None) -> tuple[SacctJob, ...]:
        """One user's (or one account's) jobs that ran at or after ``since``."""
        if self.api() == "v0.0.38":
            # It filters by time only (it knows no user field), in local time as sacct's
            # --starttime reads it (Unix seconds are refused); the rest is done below.
            params = {"start_time": since.astimezone().strftime("%Y-%m-%dT%H:%M:%S")}
        else:
            # Unix seconds (a local time is refused: HTTP 400 on 24.11, 500 on 26.05)
            params = {"start_time": str(int(since.timestamp()))}
            params.update({"users": user} if user is not None else {"account": str(account)})
        jobs = (job for _, job in parse_jobs(self._payload("/jobs", params)))
        if user is not None:
            return tuple(j for j in jobs if j.user == user)
        return tuple(j for j in jobs if j.account == account)


def slurmrestd_from(settings: Settings) -> SlurmrestdSource:
    """The source JOBREPORT_SLURMRESTD_* describe."""
    return SlurmrestdSource(settings.slurmrestd_url, user=settings.slurmrestd_user,
                            token_file=settings.slurmrestd_token_file,
                            timeout=settings.sacct_timeout, cluster=settings.cluster,
                            gpu_tres=settings.gpu_metrics == TRES.name)
