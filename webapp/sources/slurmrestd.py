"""Jobs and their steps from slurmrestd instead of a forked ``sacct``
(JOBREPORT_SACCT_SOURCE=slurmrestd): the same ``SacctReader`` interface, the same records.

Reached at ``http://host:6820`` with a JWT (``scontrol token``; AuthAltTypes=auth/jwt in
slurm.conf and slurmdbd.conf), read from a file on every request so a renewed token is
picked up, or at ``unix:/path/to/socket`` (rest_auth/local: the socket's peer is the user).
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from webapp.model import JobId, JobNotFound, SacctJob, SourceUnavailable
from webapp.settings import Settings
from webapp.sources.sacct import array_tasks, pick_record, task_number
from webapp.sources.slurmrestd_jobs import display_id as _display
from webapp.sources.slurmrestd_jobs import parse_jobs

API = "/slurmdb/v0.0.38"
Transport = Callable[[str, Mapping[str, str]], tuple[int, bytes]]


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
                 cluster: str | None = None, transport: Transport | None = None) -> None:
        self.url = url
        self.user = user
        self.token_file = token_file
        self.cluster = cluster
        self._get = transport or http_transport(url, timeout)

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

    def _query(self, path: str, params: Mapping[str, str] | None = None
               ) -> list[tuple[str, SacctJob]]:
        if self.cluster:
            params = {**(params or {}), "cluster": self.cluster}
        return parse_jobs(self._payload(API + path + (f"?{urlencode(params)}" if params
                                                      else "")))

    def _payload(self, target: str) -> dict[str, Any]:
        """The JSON answer to GET ``target``; SourceUnavailable when there is none."""
        try:
            status, body = self._get(target, self._headers())
        except (OSError, http.client.HTTPException) as exc:
            raise SourceUnavailable(self.name, str(exc) or type(exc).__name__) from None
        if status in (401, 403):
            raise SourceUnavailable(self.name, f"HTTP {status}: authentication refused")
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise SourceUnavailable(self.name, f"HTTP {status}: not a JSON answer")
        return payload

    def _job_rows(self, job_id: str) -> list[tuple[str, SacctJob]]:
        return self._query(f"/job/{quote(job_id, safe='')}")

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
        target = f"{API}/job/{quote(jid, safe='')}"
        payload = self._payload(target + (f"?{urlencode({'cluster': self.cluster})}"
                                          if self.cluster else ""))
        for job in payload.get("jobs") or ():
            if jid in (str(job.get("job_id")), _display(job)):
                return ((job.get("comment") or {}).get("administrator")) or ""
        return None

    def jobs(self, job_ids: Iterable[str]) -> dict[str, SacctJob]:
        """Many jobs, one request each (v0.0.38 takes one id per request)."""
        out: dict[str, SacctJob] = {}
        for jid in (str(JobId.of(j)) for j in job_ids):
            found = pick_record(jid, self._job_rows(jid), alone=True)
            if found is not None:
                out[jid] = found
        return out

    def array(self, job_id: JobId | str) -> tuple[SacctJob, ...]:
        """Every task of the array job ``123`` (or of the array ``123_4`` belongs to)."""
        master = str(JobId.of(job_id).job)
        rows = [j for _, j in self._job_rows(master)]
        tasks = array_tasks(master, rows)
        if not tasks:
            arrays = {j.job_id.partition("_")[0] for j in rows if "_" in j.job_id}
            if len(arrays) == 1:
                master = arrays.pop()
                tasks = array_tasks(master, (j for _, j in self._job_rows(master)))
        if not tasks:
            raise JobNotFound(str(job_id))
        # sacct lists tasks by index; slurmdbd answers by numeric id (the array's own last)
        return tuple(sorted(tasks, key=task_number))

    def recent(self, since: datetime, user: str | None = None,
               account: str | None = None) -> tuple[SacctJob, ...]:
        """One user's (or one account's) jobs that ran at or after ``since``. v0.0.38
        filters by time only (it knows no user field): the rest is done here."""
        # Local time, as sacct's --starttime reads it (Unix seconds are refused).
        params = {"start_time": since.astimezone().strftime("%Y-%m-%dT%H:%M:%S")}
        jobs = (job for _, job in self._query("/jobs", params))
        if user is not None:
            return tuple(j for j in jobs if j.user == user)
        return tuple(j for j in jobs if j.account == account)

def slurmrestd_from(settings: Settings) -> SlurmrestdSource:
    """The source JOBREPORT_SLURMRESTD_* describe."""
    return SlurmrestdSource(settings.slurmrestd_url, user=settings.slurmrestd_user,
                            token_file=settings.slurmrestd_token_file,
                            timeout=settings.sacct_timeout, cluster=settings.cluster)
