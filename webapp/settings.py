"""Settings of the report service, read once at start: the system config file, then
``JOBREPORT_*`` environment variables, each of which overrides the file's line of the same
name, except the keys that grant privilege (``PRIVILEGED``): for a caller who is not root
those come from the system config file only, where there is one.

Each setting is declared once, as a field of ``Settings`` holding its default, help line
and parser; ``from_env`` and the docs' table (``scripts/settings-table``) follow from
the fields, so a bad value stops the start with the variable's name.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast
from urllib.parse import quote, urlsplit, urlunsplit

from jobreport_common.bind import parse_bind
from jobreport_common.settings import (
    SettingsError,
    boolean,
    choice,
    documented,
    load,
    names,
    ranged,
    setting,
)
from webapp.carbon import country_intensity
from webapp.thresholds import StaffConfig, Thresholds, parse_staff_config, parse_thresholds

__all__ = ["CLUSTER_SETTINGS", "DEFAULT_CONFIG", "PRIVILEGED", "SETTINGS_DOC", "Caller",
           "Settings", "SettingsError", "caller_env", "env_name", "is_privileged", "layered",
           "parse_config", "read_secret"]

log = logging.getLogger(__name__)

DEFAULT_CONFIG = "/etc/jobreport/jobreport.conf"
CONFIG_DOC = (
    DEFAULT_CONFIG,
    "System config file of `JOBREPORT_*=value` lines, read first (a missing default file is skipped; empty: none); each environment variable overrides its line, except JOBREPORT_STAFF, JOBREPORT_SERVICE_USER, JOBREPORT_DB_URL, JOBREPORT_DB_PASSWORD_FILE, JOBREPORT_SACCT, JOBREPORT_CHAT_URLS, JOBREPORT_CHAT_MAP and JOBREPORT_CLUSTER_SETTINGS_DIR, which for a caller who is not root come from the default file alone where it exists (SECURITY.md). A file others may read (mode o+r) holding a URL with a password stops the start.",
)

# Who is staff, which sources a caller may read (the accounting view with the service's
# password, or sacct standing in for it; for the other clusters, their files in
# JOBREPORT_CLUSTER_SETTINGS_DIR) and where chat notices of users' jobs go: for a caller
# who is not root, only the system config file says where there is one; neither the
# caller's environment nor a JOBREPORT_CONFIG it names does.
PRIVILEGED = ("JOBREPORT_STAFF", "JOBREPORT_SERVICE_USER", "JOBREPORT_DB_URL",
              "JOBREPORT_DB_PASSWORD_FILE", "JOBREPORT_SACCT", "JOBREPORT_CHAT_URLS",
              "JOBREPORT_CHAT_MAP", "JOBREPORT_CLUSTER_SETTINGS_DIR")

# URL settings that may carry a database password -> where the password goes instead.
# In a config file every user may read, the password would be every user's: refused.
SECRET_URLS = {
    "JOBREPORT_DB_URL": "JOBREPORT_DB_PASSWORD_FILE",
    "JOBREPORT_ADMIN_COMMENT_DB_URL": "the services' own environment (an EnvironmentFile of mode 0600)",
    "JOBREPORT_ARCHIVE_URL": "the services' own environment (an EnvironmentFile of mode 0600)",
}

# Read by the exporters (their own settings modules), the benchmarks and the tests.
OTHER_PREFIXES = (
    "JOBREPORT_EXPORTER_", "JOBREPORT_SLURM_EXPORTER_", "JOBREPORT_BENCH_", "JOBREPORT_TEST_",
)
# Settings that were folded into others: starting with one says where it went.
RETIRED = {"JOBREPORT_WATCH": "its names are now set in JOBREPORT_THRESHOLDS"}


def parse_config(text: str, origin: str = "config") -> dict[str, str]:
    """``JOBREPORT_*`` settings from config-file text (systemd EnvironmentFile syntax):

        # comments and blank lines are skipped
        JOBREPORT_CLUSTER=demo
        JOBREPORT_MAIL_TO="{user}@example.org"

    One ``NAME=value`` per line; an optional ``export `` prefix (so the file can also be
    sourced by a shell); one pair of surrounding quotes is removed; nothing is expanded.
    """
    out: dict[str, str] = {}
    for line_no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not re.fullmatch(r"JOBREPORT_[A-Z0-9_]+", name):
            raise SettingsError(f"{origin}:{line_no}: expected JOBREPORT_NAME=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[name] = value
    return out


def _read_config(path: str, var: str = "JOBREPORT_CONFIG") -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise SettingsError(f"{var}={path!r}: no such file") from None
    except OSError as exc:
        raise SettingsError(f"{var}={path!r}: {exc.strerror}") from None


def read_config_file(path: str, var: str = "JOBREPORT_CONFIG") -> dict[str, str]:
    """A config file's settings, refused when others may read it and a URL in it holds a
    password (``SECRET_URLS``): the file is world-readable on every login node."""
    lines = parse_config(_read_config(path, var), path)
    leaked = sorted(k for k in SECRET_URLS if urlsplit(lines.get(k, "")).password is not None)
    if leaked and os.stat(path).st_mode & 0o004:
        key = leaked[0]
        raise SettingsError(
            f"{path}: {key} holds a password and the file is readable by every user "
            f"(mode {os.stat(path).st_mode & 0o777:04o}): leave the password out of the URL and "
            f"put it in {SECRET_URLS[key]}")
    return lines


def layered(env: Mapping[str, str], default_config: str = "") -> dict[str, str]:
    """The config file's settings overridden by ``env``'s. The file is ``env``'s
    JOBREPORT_CONFIG, else ``default_config`` (skipped when missing; a file named
    explicitly must exist). An empty JOBREPORT_CONFIG reads no file."""
    path = env.get("JOBREPORT_CONFIG", default_config)
    if not path:
        return dict(env)
    if "JOBREPORT_CONFIG" not in env and not os.path.exists(path):
        return dict(env)
    return {**read_config_file(path), **env}


def caller_env(env: Mapping[str, str], system_config: str, uid: int) -> dict[str, str]:
    """What a process run by ``uid`` with ``env`` reads: ``layered``, except that for a
    caller who is not root, on a host with a system config file, the ``PRIVILEGED`` keys
    are that file's (or their defaults), whatever ``env`` or a config file it names say;
    a value so ignored is logged as a warning. A host without the file (a container
    configured by its environment) has no site policy to defend: ``env`` decides."""
    merged = layered(env, system_config)
    if uid == 0 or not system_config or not os.path.exists(system_config):
        return merged
    system = read_config_file(system_config)
    for key in PRIVILEGED:
        if merged.get(key, system.get(key)) != system.get(key):
            log.warning("%s ignored: for a caller who is not root it comes from %s only",
                        key, system_config or "the system config file")
        merged.pop(key, None)
        if key in system:
            merged[key] = system[key]
    return merged


def read_secret(path: str, var: str) -> str | None:
    """A secret file's first line; None when this process may not read it (an ordinary
    user on a login node). A file that does not exist is a configuration error."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.readline().strip()
    except PermissionError:
        return None
    except OSError as exc:
        raise SettingsError(f"{var}={path!r}: {exc.strerror}") from None


def with_password(url: str, password: str) -> str:
    """``mysql://user@host/db`` with the password put in (URL-quoted)."""
    parts = urlsplit(url)
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def env_name(field_name: str) -> str:
    """``smtp_port`` -> ``JOBREPORT_SMTP_PORT``: every field's variable, by one rule."""
    return "JOBREPORT_" + field_name.upper()


def _url(var: str, raw: str) -> str:
    return raw.rstrip("/")


_non_negative = ranged(at_least=0)
_positive = ranged(above=0)
_fraction = ranged(at_least=0, at_most=1)
_count = ranged(at_least=0, kind=int)
_at_least_one = ranged(at_least=1, kind=int)
_port = ranged(at_least=1, at_most=65535, kind=int)


INTENSITY_SERIES_PREFIX = "promql:"


def parse_intensity_setting(text: str,
                            var: str = "JOBREPORT_CARBON_INTENSITY") -> float | str | None:
    """``""`` -> None; ``"370"`` -> 370.0; ``"promql:grid_g_per_kwh{zone="DE"}"`` -> the
    selector. Anything else raises SettingsError naming ``var``."""
    text = text.strip()
    if not text:
        return None
    if text.startswith(INTENSITY_SERIES_PREFIX):
        selector = text[len(INTENSITY_SERIES_PREFIX):].strip()
        if not selector:
            raise SettingsError(f"{var}: promql: needs a series selector")
        return selector
    return cast(float, _non_negative(var, text))


def _carbon_intensity(var: str, raw: str) -> str:
    parse_intensity_setting(raw, var)
    return raw


def _carbon_country(var: str, raw: str) -> str:
    try:
        country_intensity(raw)
    except KeyError:
        raise SettingsError(
            f"{var}={raw!r} is no country of webapp/carbon_intensity.csv "
            "(an ISO 3166 alpha-3 code or the name it gives, e.g. DEU or Germany)") from None
    return raw


def _label(var: str, raw: str) -> str:
    if raw and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", raw):
        raise SettingsError(f"{var}={raw!r} is not a Prometheus label name")
    return raw


def _bind(var: str, raw: str) -> str:
    try:
        parse_bind(raw, "127.0.0.1")
    except ValueError as exc:
        raise SettingsError(f"{var}: {exc}") from None
    return raw


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(var: str, raw: str) -> tuple[IPNetwork, ...]:
    """``10.0.0.5, 192.168.1.0/24`` -> the networks (an address is a network of one)."""
    out = []
    for item in filter(None, (p.strip() for p in raw.split(","))):
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise SettingsError(f"{var}: {item!r} is not an IP address or network") from None
    return tuple(out)


def _metric_globs(var: str, raw: str) -> frozenset[str]:
    """``slurm_*, up`` -> metric names, each maybe with ``*`` standing for any run."""
    globs = names(var, raw)
    for glob in globs:
        if not re.fullmatch(r"[A-Za-z_:*][A-Za-z0-9_:*]*", glob):
            raise SettingsError(f"{var}: {glob!r} is not a metric name (with * for any run)")
    return globs


CLUSTER_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


def _clusters(var: str, raw: str) -> dict[str, str]:
    """``other=http://prom-b:9090,third`` -> ``{"other": "http://prom-b:9090", "third": ""}``."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in raw.split(","))):
        cluster, _, url = item.partition("=")
        cluster, url = cluster.strip(), url.strip().rstrip("/")
        if not CLUSTER_NAME.fullmatch(cluster):
            raise SettingsError(f"{var}: {cluster!r} is not a Slurm cluster name")
        if "@" in urlsplit(url).netloc:
            raise SettingsError(f"{var}: the URL of {cluster} holds credentials")
        out[cluster] = url
    return out


@dataclass(frozen=True)
class Settings:
    cluster: str = setting(
        "demo",
        "Slurm cluster name (selects rows of the accounting view).")
    clusters: dict[str, str] = setting(
        "",
        "Other clusters this web app also serves, comma-separated, each `name` or `name=prometheus-url` (its own Prometheus; without one its reports have no metrics); empty: only JOBREPORT_CLUSTER. With any, job URLs carry the cluster (`/c/<cluster>/jobs/<id>`).",
        _clusters)
    cluster_settings_dir: str = setting(
        "",
        "Directory of the other clusters' own settings: `<dir>/<name>.conf`, for a cluster `name` of JOBREPORT_CLUSTERS, holds `JOBREPORT_*=value` lines (the system config file's syntax) that replace the main settings for that cluster alone; only the per-cluster keys of \"Per-cluster settings\" may appear there, and a file that names another key, or a bad value, stops the start naming the file and the variable. A cluster without a file: the main settings (and its JOBREPORT_CLUSTERS URL). Empty: none.")
    prometheus_url: str = setting(
        "http://127.0.0.1:9090",
        "Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics).",
        _url)
    prometheus_timeout: float = setting(
        "10",
        "Seconds before a Prometheus query gives up.",
        _positive)
    prometheus_user: str = setting(
        "",
        "Basic-auth user for Prometheus (the password comes from JOBREPORT_PROMETHEUS_PASSWORD_FILE; never put it in the URL).")
    prometheus_password_file: str = setting(
        "",
        "File holding the Prometheus basic-auth password.")
    prometheus_token_file: str = setting(
        "",
        "File holding a bearer token for Prometheus (re-read when it changes).")
    prometheus_ca_bundle: str = setting(
        "",
        "CA bundle that signs the Prometheus server's certificate (empty: the system's).")
    prometheus_client_cert: str = setting(
        "",
        "Client certificate (PEM) for Prometheus behind mutual TLS.")
    prometheus_client_key: str = setting(
        "",
        "Private key of the client certificate (empty: it is in the certificate file).")
    scrape_interval: float = setting(
        "30",
        "Prometheus scrape interval of the exporters (seconds); sets rate windows.",
        _positive)
    prometheus_node_label: str = setting(
        "instance",
        "Label naming the node in `jobs_*` series (empty: do not filter by node).",
        _label)
    prometheus_cluster_label: str = setting(
        "",
        "Label naming the cluster in `jobs_*` series where one Prometheus holds several clusters' (their job ids overlap), e.g. `cluster` set as a scrape target label: every query of `jobs_*` series then also matches `<label>=\"<cluster>\"`, the served cluster's own name (JOBREPORT_CLUSTER, or a JOBREPORT_CLUSTERS name); empty: every `jobs_*` series is this cluster's.",
        _label)
    prometheus_front_proxies: tuple[IPNetwork, ...] = setting(
        "",
        "Addresses or networks (comma-separated, e.g. `10.0.0.5,192.168.1.0/24`) of Grafana or a proxy whose user header is believed: by the Prometheus front (`/prometheus/`, docs/grafana.md) `X-Grafana-User`, else `REMOTE_USER` or `X-Remote-User`; by the rest of the app, the JSON API and the pages, `REMOTE_USER` or `X-Remote-User` (a portal's proxy such as Open OnDemand's Apache, docs/ondemand.md), with password login too. The connection's own peer counts, never `X-Forwarded-For`; from any other address those headers are ignored and only a signed-in session says who asks. Empty: no address.",
        _networks)
    prometheus_front_public: frozenset[str] = setting(
        "slurm_*,up,jobs_scrape_*,jobs_exporter_*",
        "Metric names (`*`: any run of characters) every signed-in user may query through the Prometheus front: the cluster's state and the exporters' health. Any other `jobs_*` selector must pin `jobid` to the user's own jobs, and any other metric is refused; staff may query everything. A site whose slurm.conf `PrivateData` hides users or accounts leaves out `slurm_user_*`, `slurm_account_*`, `slurm_fairshare*`, `slurm_share_*` and `slurm_job_*`.",
        _metric_globs)
    prometheus_front_max_points: int = setting(
        "11000",
        "Most points per series a range query through the Prometheus front may ask for ((end - start) / step; each subquery's range / step too), for every user, staff included: Prometheus' own limit by default.",
        _at_least_one)
    prometheus_front_max_nodes: int = setting(
        "256",
        "Most nodes (selectors, calls, operators, literals) one expression through the Prometheus front may have, for every user, staff included.",
        _at_least_one)
    gpu_metrics: str = setting(
        "jobs",
        "Where GPU figures come from: `jobs` (jobs-exporter's `jobs_gpu_*`), `dcgm` (NVIDIA dcgm-exporter run with `--hpc-job-mapping-dir`, series labelled `hpc_job`; MIG cards left out), `amd` (AMD device-metrics-exporter with its Slurm labels, `job_id`) or `tres` (Slurm's `gres/gpuutil` and `gres/gpumem` usage TRES of each step, from sacct, where no GPU exporter is scraped: one figure per step, no series, known once the job has ended). The report names the source in its audit.",
        choice("jobs", "dcgm", "amd", "tres"))
    db_url: str = setting(
        "mysql://jobreport:jobreport@127.0.0.1:3306/jobreport",
        "Accounting view, read as the restricted user (leave the password out when JOBREPORT_DB_PASSWORD_FILE holds it).")
    db_password_file: str = setting(
        "",
        "File holding the restricted user's password, readable by the service user only (JOBREPORT_SERVICE_USER).")
    sacct: str = setting(
        "sacct",
        "Path of the sacct command.")
    sacct_timeout: float = setting(
        "30",
        "Seconds before a sacct call is abandoned.",
        _positive)
    sizing_cache_seconds: float = setting(
        "300",
        "Seconds a report's `#SBATCH` block (the owner's history of jobs of that name) is reused, per cluster, user and job name, within one process (at most 256 kept), so a page, its PDF and its JSON ask sacct once; `0`: looked up for every report.",
        _non_negative)
    sacct_source: str = setting(
        "sacct",
        "Where reports read jobs and steps: `sacct` (forks the command) or `slurmrestd` (its accounting API, JOBREPORT_SLURMRESTD_URL).",
        choice("sacct", "slurmrestd"))
    slurmrestd_url: str = setting(
        "http://127.0.0.1:6820",
        "slurmrestd: `http://host:port` (JWT auth) or `unix:/path/to/socket` (rest_auth/local).",
        _url)
    slurmrestd_user: str = setting(
        "",
        "User name sent with the JWT (`X-SLURM-USER-NAME`); empty: the token's own.")
    slurmrestd_token_file: str = setting(
        "",
        "File holding the JWT (`scontrol token` output, `SLURM_JWT=` prefix allowed), read on every request; empty: no token (a `unix:` socket).")
    sacctmgr: str = setting(
        "sacctmgr",
        "Path of the sacctmgr command (JOBREPORT_ADMIN_COMMENT=sacctmgr).")
    admin_comment: str = setting(
        "",
        "`jobreport sync` writes each archived job's summary into its Slurm AdminComment in jobstats' `JS1:` format (read by reportseff, Job Defense Shield, jobscope), never over a comment already there: `sacctmgr` (Slurm whose sacctmgr keeps the value's case; 22.05 lowercases it) or `database` (a conditional UPDATE through JOBREPORT_ADMIN_COMMENT_DB_URL); empty: off.",
        choice("", "sacctmgr", "database"))
    admin_comment_db_url: str = setting(
        "",
        "`mysql://user:pass@host/slurm_acct_db` of a MariaDB user granted only SELECT and UPDATE(admin_comment) on `<cluster>_job_table` (JOBREPORT_ADMIN_COMMENT=database).")
    scontrol: str = setting(
        "scontrol",
        "Path of the scontrol command (a partition's MaxTime, for `Partition_Limit`).")
    staff: frozenset[str] = setting(
        "",
        "Comma-separated user names that may see every job.",
        names)
    service_user: str = setting(
        "jobreport",
        "The user the services run as (`User=` of deploy/jobreport-*.service): it and root are the only callers of `jobreport` that read the accounting view and the archive; anybody else gets what Slurm shows them (see \"Login nodes\"), whatever files or passwords they can read.")
    auth: str = setting(
        "password",
        "`password` (built-in login) or `remote-user` (trust the reverse proxy).",
        choice("password", "remote-user"))
    password_file: str = setting(
        "",
        "File of `user:werkzeug-hash` lines for built-in login.")
    secret_key: str = setting(
        "",
        "Flask secret key (sessions, CSRF), at least 32 bytes; required by the web app.")
    secret_key_file: str = setting(
        "",
        "File holding JOBREPORT_SECRET_KEY (when that is empty), readable by the service user only.")
    session_cookie_secure: bool = setting(
        "1",
        "`1`: the session cookie is sent over HTTPS only (production sits behind a TLS proxy); `0` only for a plain-http demo.",
        boolean)
    session_lifetime: float = setting(
        "43200",
        "Seconds a login lasts, counted from the login.",
        _positive)
    web_state: str = setting(
        "var/web-state.sqlite",
        "SQLite file the web app's workers share: ended sessions and login attempt counts.")
    ratelimit_storage: str = setting(
        "",
        "Flask-Limiter storage URI for login limits (e.g. `redis://host:6379` when several hosts serve the app); empty: the JOBREPORT_WEB_STATE file.")
    login_limit_user: str = setting(
        "10 per 15 minutes",
        "Failed logins allowed per user name from one client address; then every login of that name from that address is refused until the window ends (other addresses are not locked out).")
    login_limit_address: str = setting(
        "30 per 15 minutes",
        "Failed logins allowed per client address.")
    trusted_proxies: int = setting(
        "0",
        "Reverse proxies in front of the app whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed (1 behind one nginx).",
        _count)
    pdf_builds: int = setting(
        "1",
        "PDF builds at once on the host, among all processes sharing `JOBREPORT_PDF_CACHE_DIR` (each ~0.7 s of one core); a request that finds none free within 5 s gets 503 with Retry-After.",
        _at_least_one)
    pdf_process: bool = setting(
        "1",
        "`1`: the web app builds PDFs in a process of its own at nice 10 (one per worker, started at the first PDF), so a page request never waits behind a PDF's CPU or Python's lock; `0`: in the request's thread.",
        boolean)
    pdf_cache_dir: str = setting(
        "var/pdf-cache",
        "Directory of finished jobs' PDFs and the build slots' lock files, shared by the web workers and the sync (which renders the same PDF for the email); mode 0700.")
    pdf_cache_mb: float = setting(
        "512",
        "Disk kept for finished jobs' PDFs in `JOBREPORT_PDF_CACHE_DIR` (least recently read removed first).",
        _non_negative)
    bind: str = setting(
        "127.0.0.1:8000",
        "Address `jobreport serve` listens on.",
        _bind)
    smtp_host: str = setting(
        "127.0.0.1",
        "SMTP server for report emails.")
    smtp_port: int = setting(
        "25",
        "SMTP port.",
        _port)
    smtp_starttls: bool = setting(
        "0",
        "`1` to upgrade the connection with STARTTLS.",
        boolean)
    smtp_utf8: bool = setting(
        "0",
        "`1` when the SMTP server offers SMTPUTF8 (RFC 6531): addresses with non-ASCII characters are then accepted where users are mapped to addresses and sent with it; `0`: such an address is refused there, naming it.",
        boolean)
    smtp_user: str = setting(
        "",
        "SMTP login (empty: no auth).")
    smtp_password: str = setting(
        "",
        "SMTP password.")
    smtp_password_file: str = setting(
        "",
        "File holding JOBREPORT_SMTP_PASSWORD (when that is empty), readable by the service user only.")
    mail_from: str = setting(
        "jobreport@localhost",
        "From address of report emails.")
    mail_to: str = setting(
        "{user}@localhost",
        "Owner address template; `{user}` is replaced, e.g. `{user}@example.org`.")
    mail_map: str = setting(
        "",
        "Optional file of `user address` lines overriding the template.")
    mail_opt_out: str = setting(
        "",
        "Optional file of user names who get no emails.")
    mail_min_runtime: float = setting(
        "600",
        "Report emails skip jobs shorter than this (seconds).",
        _non_negative)
    mail_min_severity: str = setting(
        "info",
        "Report emails need at least one finding this severe: `info`, `warning` or `critical`.",
        choice("info", "warning", "critical"))
    mail_daily_cap: int = setting(
        "5",
        "Report emails per user per UTC day (0: no cap); the rest are folded into the user's weekly digest.",
        _count)
    chat_urls: str = setting(
        "",
        "Chat notices (apprise URLs, e.g. `mmost://host/token?channel=@{user}`, `json://host/path`), separated by spaces or commas, for every owner the report-email policy picks; `{user}` is replaced (plain user names only). Empty: none, unless JOBREPORT_CHAT_MAP names the user.")
    chat_map: str = setting(
        "",
        "Optional file of `user URL [URL ...]` lines (apprise URLs) that replace JOBREPORT_CHAT_URLS for that user; owned by root or the service user and writable by nobody else (it names where notices go).")
    opt_out_link_days: float = setting(
        "90",
        "Days the one-click opt-out link of an email works after it was sent; an older link's page explains and offers sign-in, where users stop or resume their emails.",
        _positive)
    public_url: str = setting(
        "http://127.0.0.1:8000",
        "The web app's address as users reach it: the base of the opt-out link in every email.",
        _url)
    outbox: str = setting(
        "var/outbox.sqlite",
        "SQLite file of the durable email outbox.")
    archive_url: str = setting(
        "var/archive.sqlite",
        "Archive of ended jobs: a SQLite path (or `sqlite:///path`), or `mysql://user:pass@host/db` shared by several web hosts.")
    archive_retention_days: float = setting(
        "730",
        "`jobreport sync` of a cluster drops that cluster's archived jobs that ended longer ago than this (0: keep forever); per cluster: a cluster's file may set its own, and clusters sharing one archive keep each other's jobs.",
        _non_negative)
    sync_lookback: float = setting(
        "21600",
        "Seconds before its watermark each `jobreport sync` run looks again for ended jobs, so a job whose end record reached slurmdbd late (slurmdbd down or behind, a busy slurmctld) is still archived and emailed, once (the sync log keeps each job done once); each run re-reads this window's ended jobs, never those before the archive's first run.",
        _non_negative)
    metrics_textfile_dir: str = setting(
        "",
        "Directory of node_exporter's textfile collector: `jobreport sync` writes its state there as Prometheus metrics (`jobreport_sync_*`, one `jobreport_sync_<cluster>.prom` per cluster) after each run, and the outbox's deliveries and `jobreport outbox --status` write `jobreport_outbox.prom` (`jobreport_outbox_*`); empty: none.")
    thresholds: Thresholds = setting(
        "",
        "Threshold overrides of the detectors, `jobreport watch` and the staff report, e.g. `cpu_efficiency_low=0.5,gpu_idle_seconds=1800` (names in the threshold table above).",
        parse_thresholds)
    policy_dir: str = setting(
        "",
        "Directory of the site's policy (`*.toml`, see docs/policy.md): the detectors switched on or off, their severity, thresholds and exemptions per cluster, partition, account, QoS or user, the site's own rules and which running jobs `jobreport watch` may cancel (`[[cancel]]`), and in its `wording/` folder the wording the site owns (the emails' sign-off, the report page's footer); empty: no site policy.")
    core_hours_per_billing_unit: float = setting(
        "0",
        "Core-hours of the site's allocations one billing unit-hour is worth (e.g. `1` where billing counts cores); waste is then also shown in core-hours. `0`: not shown.",
        _non_negative)
    carbon_intensity: str = setting(
        "",
        "Grams of CO2e per kWh for the reports' carbon figure: a number (constant), or `promql:<series selector>` (a series the site feeds with its grid's figure, e.g. hourly; the mean over each job's run is used); empty: the yearly average of JOBREPORT_CARBON_COUNTRY.",
        _carbon_intensity)
    carbon_country: str = setting(
        "World",
        "Country whose yearly average carbon intensity of electricity the reports use when JOBREPORT_CARBON_INTENSITY is empty: an ISO 3166 alpha-3 code or a name of `webapp/carbon_intensity.csv` (Ember and Energy Institute data via Our World in Data, CC BY 4.0; each country's latest year), e.g. `DEU`; `World` is the world average; empty: no CO2e shown unless JOBREPORT_CARBON_INTENSITY is set.",
        _carbon_country)
    queue_note_seconds: float = setting(
        "600",
        "A wait in the queue longer than this (seconds) is a key figure of the report, and an unrecorded scheduler state during it a note; shorter waits are listed only among the details.",
        _non_negative)
    min_coverage: float = setting(
        "0.8",
        "Fraction of a job's run its Prometheus samples must cover (per node, per GPU) for a verdict resting on them to be given; below it the verdict is withheld and the report says so.",
        _fraction)
    constants_file: str = setting(
        "",
        "TOML file of allocation targets (the one slurm-exporter reads): served at `/api/constants`, drawn on the cluster page; empty: none.")
    watch_policy: str = setting(
        "",
        "Deprecated: the `[[cancel]]` tables of JOBREPORT_POLICY_DIR replace it (docs/policy.md) and win when both exist. TOML enforcement policy of `jobreport watch` (which rule cancels jobs of which partitions/accounts, grace, exemptions), read when the policy directory has no `[[cancel]]` table; empty: never cancel.")
    scancel: str = setting(
        "scancel",
        "Path of the scancel command (enforcement only).")
    staff_report: StaffConfig = setting(
        "",
        "Staff report window and partitions, e.g. `days=7,rows=20,large_memory_partitions=bigmem|fat` (its thresholds are in JOBREPORT_THRESHOLDS).",
        parse_staff_config)
    staff_mail_to: str = setting(
        "",
        "Comma-separated addresses `jobreport staff-report --email` sends to.")
    web_url: str = setting(
        "",
        "Public URL of the web app (e.g. `https://jobreport.example.org`): links in emails; empty: no links.",
        _url)
    # Not a setting: whether the caller is root or JOBREPORT_SERVICE_USER (``is_privileged``),
    # decided by who runs the process, never by what it can read: a password leaked into a
    # file or an environment makes nobody privileged. False: the CLI reads what Slurm shows
    # the caller and never opens the view or the archive.
    privileged: bool = True
    # Not a setting: cluster name -> the fields its file in JOBREPORT_CLUSTER_SETTINGS_DIR
    # sets (parsed, checked at start), which ``for_cluster`` lays over these settings.
    cluster_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def cluster_names(self) -> tuple[str, ...]:
        """Every cluster served, this deployment's own (JOBREPORT_CLUSTER) first."""
        return (self.cluster, *(c for c in self.clusters if c != self.cluster))

    @property
    def multi_cluster(self) -> bool:
        """Job ids are unique only per cluster: with several, URLs name the cluster."""
        return len(self.cluster_names) > 1

    def for_cluster(self, name: str) -> Settings:
        """These settings aimed at another served cluster: its own Prometheus (none when
        JOBREPORT_CLUSTERS gives no URL for it: its series would carry other jobs' ids),
        then what its file in JOBREPORT_CLUSTER_SETTINGS_DIR sets (``CLUSTER_SETTINGS``)."""
        if name == self.cluster:
            return self
        if name not in self.clusters:
            raise KeyError(name)
        return replace(self, **{"cluster": name, "prometheus_url": self.clusters[name],
                                **self.cluster_overrides.get(name, {})})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None,
                 caller: Caller | None = None) -> Settings:
        """From ``env`` (default: the process environment over the system config file
        ``/etc/jobreport/jobreport.conf`` or JOBREPORT_CONFIG, the privileged keys from
        the system file alone unless root runs it). An explicit ``env`` reads a config
        file only when it names one in JOBREPORT_CONFIG. ``caller`` (default: this
        process's effective user) decides ``privileged``."""
        env = (caller_env(os.environ, DEFAULT_CONFIG, os.getuid()) if env is None
               else layered(env))
        retired = sorted(k for k in env if k in RETIRED)
        if retired:
            raise SettingsError("; ".join(f"{k}: {RETIRED[k]}" for k in retired))
        env = {k: v for k, v in env.items() if k != "JOBREPORT_CONFIG"}
        settings = cls._built(env)
        settings = replace(settings, privileged=is_privileged(caller or Caller.of_process(),
                                                              settings.service_user))
        overrides = _cluster_overrides(settings, env)
        return replace(settings, cluster_overrides=overrides) if overrides else settings

    @classmethod
    def _built(cls, env: Mapping[str, str]) -> Settings:
        """Every setting parsed from ``env`` (the config file already laid under it), the
        secrets read from their files, the combinations checked."""
        values = load(cls, "JOBREPORT_", env, OTHER_PREFIXES)
        values["db_url"] = _db_url(values["db_url"], values["db_password_file"])
        values["secret_key"] = _from_file(values["secret_key"], values["secret_key_file"],
                                          "JOBREPORT_SECRET_KEY_FILE")
        values["smtp_password"] = _from_file(values["smtp_password"],
                                             values["smtp_password_file"],
                                             "JOBREPORT_SMTP_PASSWORD_FILE")
        settings = cls(**values)
        _check_prometheus_client(settings)
        if settings.admin_comment == "database" and not settings.admin_comment_db_url:
            raise SettingsError("JOBREPORT_ADMIN_COMMENT=database needs "
                                "JOBREPORT_ADMIN_COMMENT_DB_URL")
        return settings


# The settings a cluster of JOBREPORT_CLUSTERS may set for itself, in its file in
# JOBREPORT_CLUSTER_SETTINGS_DIR: where its metrics, accounting and Slurm commands are,
# how they are reached and how its series are labelled, and how long the shared archive
# keeps its jobs (its sync prunes its own rows only). Everything else (who is staff,
# mail, the web app, thresholds) is the deployment's, the same for every cluster.
CLUSTER_SETTINGS = (
    "prometheus_url", "prometheus_timeout", "prometheus_user", "prometheus_password_file",
    "prometheus_token_file", "prometheus_ca_bundle", "prometheus_client_cert",
    "prometheus_client_key", "prometheus_node_label", "prometheus_cluster_label",
    "gpu_metrics", "scrape_interval", "db_url", "db_password_file", "sacct", "sacct_source",
    "sacct_timeout",
    "slurmrestd_url", "slurmrestd_user", "slurmrestd_token_file", "scontrol", "sacctmgr",
    "admin_comment", "admin_comment_db_url", "archive_retention_days",
)
# Fields computed from others: recomputed for a cluster whose file sets any of those.
_DERIVED_FROM = {"db_url": ("db_url", "db_password_file")}


def _cluster_overrides(settings: Settings, env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Cluster name -> the fields its ``<JOBREPORT_CLUSTER_SETTINGS_DIR>/<name>.conf``
    sets, for each cluster of JOBREPORT_CLUSTERS that has a file there (JOBREPORT_CLUSTER's
    own settings are the main ones: a file named after it is not read). Each file is laid
    over ``env`` and built as the main settings are (the same parsers and checks); a key
    that is not in ``CLUSTER_SETTINGS`` or a bad value raises SettingsError naming the
    file and the variable."""
    folder = settings.cluster_settings_dir
    if not folder:
        return {}
    if not os.path.isdir(folder):
        raise SettingsError(f"JOBREPORT_CLUSTER_SETTINGS_DIR={folder!r}: no such directory")
    allowed = {env_name(f): f for f in CLUSTER_SETTINGS}
    out: dict[str, dict[str, Any]] = {}
    for name, url in settings.clusters.items():
        path = os.path.join(folder, f"{name}.conf")
        if name == settings.cluster or not os.path.exists(path):
            continue
        lines = read_config_file(path, "JOBREPORT_CLUSTER_SETTINGS_DIR")
        for key in sorted(lines):
            if key not in SETTINGS_DOC and not key.startswith(OTHER_PREFIXES):
                raise SettingsError(f"{path}: unknown setting {key}")
            if key not in allowed:
                raise SettingsError(
                    f"{path}: {key} is not a per-cluster setting (a cluster's file sets "
                    f"only {', '.join(allowed)})")
        try:
            own = Settings._built({**env, "JOBREPORT_CLUSTER": name,
                                   "JOBREPORT_PROMETHEUS_URL": url, **lines})
        except SettingsError as exc:
            raise SettingsError(f"{path}: {exc}") from None
        named = {allowed[k] for k in lines}
        named |= {f for f, sources in _DERIVED_FROM.items() if named & set(sources)}
        out[name] = {f: getattr(own, f) for f in sorted(named)}
    return out


# name -> (default, one-line description): the table of docs/settings.md.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "JOBREPORT_CONFIG": CONFIG_DOC, **documented(Settings, "JOBREPORT_"),
}


def _from_file(value: str, path: str, var: str) -> str:
    """A secret set directly wins; else the file's, or empty when it is not ours to read."""
    if value or not path:
        return value
    return read_secret(path, var) or ""


def _db_url(url: str, password_file: str) -> str:
    """The accounting URL with the password file's password (a URL holding its own keeps
    it; a file this process may not read leaves the URL without one)."""
    if not password_file or urlsplit(url).password is not None:
        return url
    password = read_secret(password_file, "JOBREPORT_DB_PASSWORD_FILE")
    return url if password is None else with_password(url, password)


@dataclass(frozen=True)
class Caller:
    """Who runs this process: its effective uid and that uid's user name ("" when the
    passwd database has none, as for an arbitrary uid in a container)."""

    euid: int
    name: str

    @classmethod
    def of_process(cls) -> Caller:
        euid = os.geteuid()
        try:
            return cls(euid, pwd.getpwuid(euid).pw_name)
        except KeyError:
            return cls(euid, "")


def is_privileged(caller: Caller, service_user: str) -> bool:
    """Root and the service's own user read the view and the archive from the CLI; every
    other caller is an ordinary user, whatever they can read (a password in a file or
    their environment is no proof of who they are)."""
    return caller.euid == 0 or (bool(service_user) and caller.name == service_user)


def _check_prometheus_client(s: Settings) -> None:
    """Credentials come from files, never from the URL (it is shown in outage messages)."""
    if "@" in urlsplit(s.prometheus_url).netloc:
        raise SettingsError(
            "JOBREPORT_PROMETHEUS_URL holds credentials: put the user in "
            "JOBREPORT_PROMETHEUS_USER and the password in JOBREPORT_PROMETHEUS_PASSWORD_FILE "
            "(or a token in JOBREPORT_PROMETHEUS_TOKEN_FILE)")
    if s.prometheus_user and s.prometheus_token_file:
        raise SettingsError("JOBREPORT_PROMETHEUS_USER and JOBREPORT_PROMETHEUS_TOKEN_FILE: "
                            "use basic auth or a bearer token, not both")
    if bool(s.prometheus_user) != bool(s.prometheus_password_file):
        raise SettingsError("JOBREPORT_PROMETHEUS_USER and JOBREPORT_PROMETHEUS_PASSWORD_FILE "
                            "go together")
    if s.prometheus_client_key and not s.prometheus_client_cert:
        raise SettingsError("JOBREPORT_PROMETHEUS_CLIENT_KEY needs JOBREPORT_PROMETHEUS_CLIENT_CERT")
    for name in ("password_file", "token_file", "ca_bundle", "client_cert", "client_key"):
        path = getattr(s, f"prometheus_{name}")
        if path and not os.access(path, os.R_OK):
            raise SettingsError(f"{env_name('prometheus_' + name)}={path!r} is not a readable file")
