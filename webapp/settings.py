"""Settings of the report service, read once: the system config file, then ``JOBREPORT_*``
environment variables, each of which overrides the file's line of the same name.

Every variable, its default and its meaning are written once, in ``SETTINGS_DOC``: the
dataclass takes its defaults from there and the README's table is generated from it
(``scripts/settings-table``; a test checks the README holds the generated table).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import quote, urlsplit, urlunsplit

from jobreport_net.bind import parse_bind

# name -> (default, one-line description); the README's settings table mirrors this.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "JOBREPORT_CONFIG": (
        "/etc/jobreport/jobreport.conf",
        "System config file of `JOBREPORT_*=value` lines, read first (a missing default file is skipped; empty: none); each environment variable overrides its line.",
    ),
    "JOBREPORT_CLUSTER": ("demo", "Slurm cluster name (selects rows of the accounting view)."),
    "JOBREPORT_CLUSTERS": ("", "Other clusters this web app also serves, comma-separated, each `name` or `name=prometheus-url` (its own Prometheus; without one its reports have no metrics); empty: only JOBREPORT_CLUSTER. With any, job URLs carry the cluster (`/c/<cluster>/jobs/<id>`)."),
    "JOBREPORT_PROMETHEUS_URL": ("http://127.0.0.1:9090", "Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics)."),
    "JOBREPORT_PROMETHEUS_TIMEOUT": ("10", "Seconds before a Prometheus query gives up."),
    "JOBREPORT_PROMETHEUS_USER": ("", "Basic-auth user for Prometheus (the password comes from JOBREPORT_PROMETHEUS_PASSWORD_FILE; never put it in the URL)."),
    "JOBREPORT_PROMETHEUS_PASSWORD_FILE": ("", "File holding the Prometheus basic-auth password."),
    "JOBREPORT_PROMETHEUS_TOKEN_FILE": ("", "File holding a bearer token for Prometheus (re-read when it changes)."),
    "JOBREPORT_PROMETHEUS_CA_BUNDLE": ("", "CA bundle that signs the Prometheus server's certificate (empty: the system's)."),
    "JOBREPORT_PROMETHEUS_CLIENT_CERT": ("", "Client certificate (PEM) for Prometheus behind mutual TLS."),
    "JOBREPORT_PROMETHEUS_CLIENT_KEY": ("", "Private key of the client certificate (empty: it is in the certificate file)."),
    "JOBREPORT_SCRAPE_INTERVAL": ("30", "Prometheus scrape interval of the exporters (seconds); sets rate windows."),
    "JOBREPORT_PROMETHEUS_NODE_LABEL": (
        "instance",
        "Label naming the node in `jobs_*` series (empty: do not filter by node).",
    ),
    "JOBREPORT_DB_URL": (
        "mysql://jobreport:jobreport@127.0.0.1:3306/jobreport",
        "Accounting view, read as the restricted user (leave the password out when JOBREPORT_DB_PASSWORD_FILE holds it).",
    ),
    "JOBREPORT_DB_PASSWORD_FILE": (
        "",
        "File holding the restricted user's password, readable by the service user only; a caller who cannot read it gets reports from what Slurm shows them (see \"Login nodes\").",
    ),
    "JOBREPORT_SACCT": ("sacct", "Path of the sacct command."),
    "JOBREPORT_SACCT_TIMEOUT": ("30", "Seconds before a sacct call is abandoned."),
    "JOBREPORT_SIZING_CACHE_SECONDS": ("300", "Seconds a report's `#SBATCH` block (the owner's history of jobs of that name) is reused, per cluster, user and job name, within one process (at most 256 kept), so a page, its PDF and its JSON ask sacct once; `0`: looked up for every report."),
    "JOBREPORT_SCONTROL": ("scontrol", "Path of the scontrol command (a partition's MaxTime, for `Partition_Limit`)."),
    "JOBREPORT_STAFF": ("", "Comma-separated user names that may see every job."),
    "JOBREPORT_AUTH": ("password", "`password` (built-in login) or `remote-user` (trust the reverse proxy)."),
    "JOBREPORT_PASSWORD_FILE": ("", "File of `user:werkzeug-hash` lines for built-in login."),
    "JOBREPORT_SECRET_KEY": ("", "Flask secret key (sessions, CSRF), at least 32 bytes; required by the web app."),
    "JOBREPORT_SECRET_KEY_FILE": ("", "File holding JOBREPORT_SECRET_KEY (when that is empty), readable by the service user only."),
    "JOBREPORT_SESSION_COOKIE_SECURE": ("1", "`1`: the session cookie is sent over HTTPS only (production sits behind a TLS proxy); `0` only for a plain-http demo."),
    "JOBREPORT_SESSION_LIFETIME": ("43200", "Seconds a login lasts, counted from the login."),
    "JOBREPORT_WEB_STATE": ("var/web-state.sqlite", "SQLite file the web app's workers share: ended sessions and login attempt counts."),
    "JOBREPORT_RATELIMIT_STORAGE": ("", "Flask-Limiter storage URI for login limits (e.g. `redis://host:6379` when several hosts serve the app); empty: the JOBREPORT_WEB_STATE file."),
    "JOBREPORT_LOGIN_LIMIT_USER": ("10 per 15 minutes", "Failed logins allowed per user name from one client address; then every login of that name from that address is refused until the window ends (other addresses are not locked out)."),
    "JOBREPORT_LOGIN_LIMIT_ADDRESS": ("30 per 15 minutes", "Failed logins allowed per client address."),
    "JOBREPORT_TRUSTED_PROXIES": ("0", "Reverse proxies in front of the app whose `X-Forwarded-For` and `X-Forwarded-Proto` are believed (1 behind one nginx)."),
    "JOBREPORT_PDF_BUILDS": ("2", "PDF builds at once per worker process; more answer 503 with Retry-After."),
    "JOBREPORT_PDF_CACHE_MB": ("64", "Memory per worker process for finished PDFs of ended jobs."),
    "JOBREPORT_BIND": ("127.0.0.1:8000", "Address `jobreport serve` listens on."),
    "JOBREPORT_SMTP_HOST": ("127.0.0.1", "SMTP server for report emails."),
    "JOBREPORT_SMTP_PORT": ("25", "SMTP port."),
    "JOBREPORT_SMTP_STARTTLS": ("0", "`1` to upgrade the connection with STARTTLS."),
    "JOBREPORT_SMTP_USER": ("", "SMTP login (empty: no auth)."),
    "JOBREPORT_SMTP_PASSWORD": ("", "SMTP password."),
    "JOBREPORT_SMTP_PASSWORD_FILE": ("", "File holding JOBREPORT_SMTP_PASSWORD (when that is empty), readable by the service user only."),
    "JOBREPORT_MAIL_FROM": ("jobreport@localhost", "From address of report emails."),
    "JOBREPORT_MAIL_TO": ("{user}@localhost", "Owner address template; `{user}` is replaced, e.g. `{user}@example.org`."),
    "JOBREPORT_MAIL_MAP": ("", "Optional file of `user address` lines overriding the template."),
    "JOBREPORT_MAIL_OPT_OUT": ("", "Optional file of user names who get no emails."),
    "JOBREPORT_MAIL_MIN_RUNTIME": ("600", "Report emails skip jobs shorter than this (seconds)."),
    "JOBREPORT_MAIL_MIN_SEVERITY": ("info", "Report emails need at least one finding this severe: `info`, `warning` or `critical`."),
    "JOBREPORT_MAIL_DAILY_CAP": ("5", "Report emails per user per UTC day (0: no cap); the rest are folded into the user's weekly digest."),
    "JOBREPORT_CHAT_URLS": ("", "Chat notices (apprise URLs, e.g. `mmost://host/token?channel=@{user}`, `json://host/path`), separated by spaces or commas, for every owner the report-email policy picks; `{user}` is replaced (plain user names only). Empty: none, unless JOBREPORT_CHAT_MAP names the user."),
    "JOBREPORT_CHAT_MAP": ("", "Optional file of `user URL [URL ...]` lines (apprise URLs) that replace JOBREPORT_CHAT_URLS for that user; owned by root or the service user and writable by nobody else (it names where notices go)."),
    "JOBREPORT_OPT_OUT_LINK_DAYS": ("90", "Days the one-click opt-out link of an email works after it was sent; an older link's page explains and offers sign-in, where users stop or resume their emails."),
    "JOBREPORT_PUBLIC_URL": ("http://127.0.0.1:8000", "The web app's address as users reach it: the base of the opt-out link in every email."),
    "JOBREPORT_OUTBOX": ("var/outbox.sqlite", "SQLite file of the durable email outbox."),
    "JOBREPORT_ARCHIVE_URL": (
        "var/archive.sqlite",
        "Archive of ended jobs: a SQLite path (or `sqlite:///path`), or `mysql://user:pass@host/db` shared by several web hosts.",
    ),
    "JOBREPORT_ARCHIVE_RETENTION_DAYS": ("730", "`jobreport sync` drops archived jobs that ended longer ago than this (0: keep forever)."),
    "JOBREPORT_THRESHOLDS": ("", "Detector threshold overrides, e.g. `cpu_efficiency_low=0.5,gpu_util_low=0.1`."),
    "JOBREPORT_CORE_HOURS_PER_BILLING_UNIT": ("0", "Core-hours of the site's allocations one billing unit-hour is worth (e.g. `1` where billing counts cores); waste is then also shown in core-hours. `0`: not shown."),
    "JOBREPORT_MIN_COVERAGE": ("0.8", "Fraction of a job's run its Prometheus samples must cover (per node, per GPU) for a verdict resting on them to be given; below it the verdict is withheld and the report says so."),
    "JOBREPORT_CONSTANTS_FILE": ("", "TOML file of allocation targets (the one slurm-exporter reads): served at `/api/constants`, drawn on the cluster page; empty: none."),
    "JOBREPORT_WATCH": ("", "`jobreport watch` threshold overrides, e.g. `gpu_idle_seconds=1800,node_idle_seconds=900` (names in the README)."),
    "JOBREPORT_WATCH_POLICY": ("", "TOML enforcement policy of `jobreport watch` (which rule cancels jobs of which partitions/accounts, grace, exemptions); empty: never cancel."),
    "JOBREPORT_SCANCEL": ("scancel", "Path of the scancel command (enforcement only)."),
    "JOBREPORT_STAFF_REPORT": ("", "Staff report thresholds and partitions, e.g. `days=7,cpu_efficiency_low=0.5,large_memory_partitions=bigmem|fat` (names in the README)."),
    "JOBREPORT_STAFF_MAIL_TO": ("", "Comma-separated addresses `jobreport staff-report --email` sends to."),
    "JOBREPORT_WEB_URL": ("", "Public URL of the web app (e.g. `https://jobreport.example.org`): links in emails; empty: no links."),
}


# Read by the exporters (their own settings modules), the benchmarks and the tests.
OTHER_PREFIXES = (
    "JOBREPORT_EXPORTER_", "JOBREPORT_SLURM_EXPORTER_", "JOBREPORT_BENCH_", "JOBREPORT_TEST_",
)


DEFAULT_CONFIG = SETTINGS_DOC["JOBREPORT_CONFIG"][0]


class SettingsError(ValueError):
    """An environment variable holds a value we cannot use."""


def parse_config(text: str, origin: str = "config") -> dict[str, str]:
    """``JOBREPORT_*`` settings from config-file text (systemd EnvironmentFile syntax):

        # comments and blank lines are skipped
        JOBREPORT_CLUSTER=demo
        JOBREPORT_MAIL_TO="{user}@example.org"

    One ``NAME=value`` per line; an optional ``export `` prefix (so the file can also be
    sourced by a shell); one pair of surrounding quotes is removed; nothing is expanded.
    """
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].lstrip()
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not re.fullmatch(r"JOBREPORT_[A-Z0-9_]+", name):
            raise SettingsError(f"{origin}:{number}: expected JOBREPORT_NAME=value")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        out[name] = value
    return out


def layered(env: Mapping[str, str], default_config: str = "") -> dict[str, str]:
    """The config file's settings overridden by ``env``'s. The file is ``env``'s
    JOBREPORT_CONFIG, else ``default_config`` (skipped when missing; a file named
    explicitly must exist). An empty JOBREPORT_CONFIG reads no file."""
    path = env.get("JOBREPORT_CONFIG", default_config)
    if not path:
        return dict(env)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        if "JOBREPORT_CONFIG" not in env:
            return dict(env)
        raise SettingsError(f"JOBREPORT_CONFIG={path!r}: no such file") from None
    except OSError as exc:
        raise SettingsError(f"JOBREPORT_CONFIG={path!r}: {exc.strerror}") from None
    return {**parse_config(text, path), **env}


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


def _raw(name: str, env: Mapping[str, str] | None) -> str:
    var = env_name(name)
    return SETTINGS_DOC[var][0] if env is None else env.get(var, SETTINGS_DOC[var][0])


# Converters: with ``env`` None they read the documented default, so each default is
# written once (in SETTINGS_DOC) and the dataclass and from_env() cannot disagree.
def _str(name: str, env: Mapping[str, str] | None = None) -> str:
    return _raw(name, env)


def _int(name: str, env: Mapping[str, str] | None = None) -> int:
    raw = _raw(name, env)
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{env_name(name)}={raw!r} is not an integer") from None


def _float(name: str, env: Mapping[str, str] | None = None) -> float:
    raw = _raw(name, env)
    try:
        return float(raw)
    except ValueError:
        raise SettingsError(f"{env_name(name)}={raw!r} is not a number") from None


def _bool(name: str, env: Mapping[str, str] | None = None) -> bool:
    return _raw(name, env).strip().lower() in ("1", "true", "yes")


def _names(name: str, env: Mapping[str, str] | None = None) -> frozenset[str]:
    return frozenset(u.strip() for u in _raw(name, env).split(",") if u.strip())


def _thresholds(name: str, env: Mapping[str, str] | None = None) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in filter(None, (p.strip() for p in _raw(name, env).split(","))):
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SettingsError(f"{env_name(name)}: {item!r} is not name=number")
    return out


CLUSTER_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


def _clusters(name: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``other=http://prom-b:9090,third`` -> ``{"other": "http://prom-b:9090", "third": ""}``."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in _raw(name, env).split(","))):
        cluster, _, url = item.partition("=")
        cluster, url = cluster.strip(), url.strip().rstrip("/")
        if not CLUSTER_NAME.fullmatch(cluster):
            raise SettingsError(f"{env_name(name)}: {cluster!r} is not a Slurm cluster name")
        if "@" in urlsplit(url).netloc:
            raise SettingsError(f"{env_name(name)}: the URL of {cluster} holds credentials")
        out[cluster] = url
    return out


@dataclass(frozen=True)
class Settings:
    cluster: str = _str("cluster")
    clusters: dict[str, str] = field(default_factory=lambda: _clusters("clusters"))
    prometheus_url: str = _str("prometheus_url")
    prometheus_timeout: float = _float("prometheus_timeout")
    prometheus_user: str = _str("prometheus_user")
    prometheus_password_file: str = _str("prometheus_password_file")
    prometheus_token_file: str = _str("prometheus_token_file")
    prometheus_ca_bundle: str = _str("prometheus_ca_bundle")
    prometheus_client_cert: str = _str("prometheus_client_cert")
    prometheus_client_key: str = _str("prometheus_client_key")
    scrape_interval: float = _float("scrape_interval")
    prometheus_node_label: str = _str("prometheus_node_label")
    db_url: str = _str("db_url")
    db_password_file: str = _str("db_password_file")
    sacct: str = _str("sacct")
    sacct_timeout: float = _float("sacct_timeout")
    sizing_cache_seconds: float = _float("sizing_cache_seconds")
    scontrol: str = _str("scontrol")
    staff: frozenset[str] = _names("staff")
    auth: str = _str("auth")
    password_file: str = _str("password_file")
    secret_key: str = _str("secret_key")
    secret_key_file: str = _str("secret_key_file")
    session_cookie_secure: bool = _bool("session_cookie_secure")
    session_lifetime: float = _float("session_lifetime")
    web_state: str = _str("web_state")
    ratelimit_storage: str = _str("ratelimit_storage")
    login_limit_user: str = _str("login_limit_user")
    login_limit_address: str = _str("login_limit_address")
    trusted_proxies: int = _int("trusted_proxies")
    pdf_builds: int = _int("pdf_builds")
    pdf_cache_mb: float = _float("pdf_cache_mb")
    bind: str = _str("bind")
    smtp_host: str = _str("smtp_host")
    smtp_port: int = _int("smtp_port")
    smtp_starttls: bool = _bool("smtp_starttls")
    smtp_user: str = _str("smtp_user")
    smtp_password: str = _str("smtp_password")
    smtp_password_file: str = _str("smtp_password_file")
    mail_from: str = _str("mail_from")
    mail_to: str = _str("mail_to")
    mail_map: str = _str("mail_map")
    mail_opt_out: str = _str("mail_opt_out")
    mail_min_runtime: float = _float("mail_min_runtime")
    mail_min_severity: str = _str("mail_min_severity")
    mail_daily_cap: int = _int("mail_daily_cap")
    chat_urls: str = _str("chat_urls")
    chat_map: str = _str("chat_map")
    opt_out_link_days: float = _float("opt_out_link_days")
    public_url: str = _str("public_url")
    outbox: str = _str("outbox")
    archive_url: str = _str("archive_url")
    archive_retention_days: float = _float("archive_retention_days")
    thresholds: dict[str, float] = field(default_factory=lambda: _thresholds("thresholds"))
    core_hours_per_billing_unit: float = _float("core_hours_per_billing_unit")
    min_coverage: float = _float("min_coverage")
    constants_file: str = _str("constants_file")
    watch: dict[str, float] = field(default_factory=lambda: _thresholds("watch"))
    watch_policy: str = _str("watch_policy")
    scancel: str = _str("scancel")
    staff_report: str = _str("staff_report")
    staff_mail_to: str = _str("staff_mail_to")
    web_url: str = _str("web_url")
    # Not a setting: False when JOBREPORT_DB_PASSWORD_FILE exists but this process may not
    # read it (a user on a login node); the CLI then reads what Slurm shows the caller.
    db_readable: bool = True

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
        JOBREPORT_CLUSTERS gives no URL for it: its series would carry other jobs' ids)."""
        if name == self.cluster:
            return self
        if name not in self.clusters:
            raise KeyError(name)
        return replace(self, cluster=name, prometheus_url=self.clusters[name])

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """From ``env`` (default: the process environment, over the system config file
        ``/etc/jobreport/jobreport.conf`` or JOBREPORT_CONFIG). An explicit ``env`` reads
        a config file only when it names one in JOBREPORT_CONFIG."""
        env = layered(os.environ, DEFAULT_CONFIG) if env is None else layered(env)
        # A typo must not silently fall back to a default; other deployables' prefixes pass.
        unknown = sorted(
            k
            for k in env
            if k.startswith("JOBREPORT_")
            and k not in SETTINGS_DOC
            and not k.startswith(OTHER_PREFIXES)
        )
        if unknown:
            raise SettingsError(f"unknown setting(s): {', '.join(unknown)}")
        auth = _str("auth", env)
        if auth not in ("password", "remote-user"):
            raise SettingsError(f"JOBREPORT_AUTH={auth!r}: use password or remote-user")
        node_label = _str("prometheus_node_label", env)
        if node_label and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", node_label):
            raise SettingsError(f"JOBREPORT_PROMETHEUS_NODE_LABEL={node_label!r} is not a "
                                "Prometheus label name")
        bind = _str("bind", env)
        try:
            parse_bind(bind, "127.0.0.1")
        except ValueError as exc:
            raise SettingsError(f"JOBREPORT_BIND: {exc}") from None
        db_url, db_readable = _db_url(_str("db_url", env), _str("db_password_file", env))
        settings = cls(
            cluster=_str("cluster", env),
            clusters=_clusters("clusters", env),
            prometheus_url=_str("prometheus_url", env).rstrip("/"),
            prometheus_timeout=_float("prometheus_timeout", env),
            prometheus_user=_str("prometheus_user", env),
            prometheus_password_file=_str("prometheus_password_file", env),
            prometheus_token_file=_str("prometheus_token_file", env),
            prometheus_ca_bundle=_str("prometheus_ca_bundle", env),
            prometheus_client_cert=_str("prometheus_client_cert", env),
            prometheus_client_key=_str("prometheus_client_key", env),
            scrape_interval=_float("scrape_interval", env),
            prometheus_node_label=node_label,
            db_url=db_url,
            db_password_file=_str("db_password_file", env),
            db_readable=db_readable,
            sacct=_str("sacct", env),
            sacct_timeout=_float("sacct_timeout", env),
            sizing_cache_seconds=_float("sizing_cache_seconds", env),
            scontrol=_str("scontrol", env),
            staff=_names("staff", env),
            auth=auth,
            password_file=_str("password_file", env),
            secret_key=_from_file(_str("secret_key", env), _str("secret_key_file", env),
                                  "JOBREPORT_SECRET_KEY_FILE"),
            secret_key_file=_str("secret_key_file", env),
            session_cookie_secure=_bool("session_cookie_secure", env),
            session_lifetime=_float("session_lifetime", env),
            web_state=_str("web_state", env),
            ratelimit_storage=_str("ratelimit_storage", env),
            login_limit_user=_str("login_limit_user", env),
            login_limit_address=_str("login_limit_address", env),
            trusted_proxies=_int("trusted_proxies", env),
            pdf_builds=_int("pdf_builds", env),
            pdf_cache_mb=_float("pdf_cache_mb", env),
            bind=bind,
            smtp_host=_str("smtp_host", env),
            smtp_port=_int("smtp_port", env),
            smtp_starttls=_bool("smtp_starttls", env),
            smtp_user=_str("smtp_user", env),
            smtp_password=_from_file(_str("smtp_password", env),
                                     _str("smtp_password_file", env),
                                     "JOBREPORT_SMTP_PASSWORD_FILE"),
            smtp_password_file=_str("smtp_password_file", env),
            mail_from=_str("mail_from", env),
            mail_to=_str("mail_to", env),
            mail_map=_str("mail_map", env),
            mail_opt_out=_str("mail_opt_out", env),
            mail_min_runtime=_float("mail_min_runtime", env),
            mail_min_severity=_str("mail_min_severity", env),
            mail_daily_cap=_int("mail_daily_cap", env),
            chat_urls=_str("chat_urls", env),
            chat_map=_str("chat_map", env),
            opt_out_link_days=_float("opt_out_link_days", env),
            public_url=_str("public_url", env).rstrip("/"),
            outbox=_str("outbox", env),
            archive_url=_str("archive_url", env),
            archive_retention_days=_float("archive_retention_days", env),
            thresholds=_thresholds("thresholds", env),
            core_hours_per_billing_unit=_float("core_hours_per_billing_unit", env),
            min_coverage=_float("min_coverage", env),
            constants_file=_str("constants_file", env),
            watch=_thresholds("watch", env),
            watch_policy=_str("watch_policy", env),
            scancel=_str("scancel", env),
            staff_report=_str("staff_report", env),
            staff_mail_to=_str("staff_mail_to", env),
            web_url=_str("web_url", env).rstrip("/"),
        )
        _check_prometheus_client(settings)
        if not 0 <= settings.min_coverage <= 1:
            raise SettingsError("JOBREPORT_MIN_COVERAGE must be between 0 and 1")
        if settings.core_hours_per_billing_unit < 0:
            raise SettingsError("JOBREPORT_CORE_HOURS_PER_BILLING_UNIT must be >= 0")
        if settings.mail_min_severity not in ("info", "warning", "critical"):
            raise SettingsError(f"JOBREPORT_MAIL_MIN_SEVERITY={settings.mail_min_severity!r}:"
                                " use info, warning or critical")
        if settings.sizing_cache_seconds < 0:
            raise SettingsError("JOBREPORT_SIZING_CACHE_SECONDS must be >= 0")
        if settings.opt_out_link_days <= 0:
            raise SettingsError("JOBREPORT_OPT_OUT_LINK_DAYS must be > 0")
        if settings.pdf_builds < 1:
            raise SettingsError("JOBREPORT_PDF_BUILDS must be at least 1")
        return settings


def _from_file(value: str, path: str, var: str) -> str:
    """A secret set directly wins; else the file's, or empty when it is not ours to read."""
    if value or not path:
        return value
    return read_secret(path, var) or ""


def _db_url(url: str, password_file: str) -> tuple[str, bool]:
    """The accounting URL with the password file's password (a URL holding its own keeps
    it), and whether this process may read the view at all."""
    if not password_file or urlsplit(url).password is not None:
        return url, True
    password = read_secret(password_file, "JOBREPORT_DB_PASSWORD_FILE")
    if password is None:
        return url, False
    return with_password(url, password), True


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
