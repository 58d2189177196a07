"""Settings of the report service, read once from ``JOBREPORT_*`` environment variables.

Every variable is listed in ``SETTINGS_DOC`` and in the README's table; a test checks
that the two agree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

# name -> (default, one-line description); the README's settings table mirrors this.
SETTINGS_DOC: dict[str, tuple[str, str]] = {
    "JOBREPORT_CLUSTER": ("demo", "Slurm cluster name (selects rows of the accounting view)."),
    "JOBREPORT_PROMETHEUS_URL": ("http://127.0.0.1:9090", "Prometheus-compatible HTTP API."),
    "JOBREPORT_PROMETHEUS_TIMEOUT": ("10", "Seconds before a Prometheus query gives up."),
    "JOBREPORT_SCRAPE_INTERVAL": ("30", "Prometheus scrape interval of the exporters (seconds)."),
    "JOBREPORT_PROMETHEUS_NODE_LABEL": (
        "instance",
        "Label naming the node in jobs_* series (empty: do not filter by node).",
    ),
    "JOBREPORT_DB_URL": (
        "mysql://jobreport:jobreport@127.0.0.1:3306/jobreport",
        "Accounting view, read as the restricted user.",
    ),
    "JOBREPORT_SACCT": ("sacct", "Path of the sacct command."),
    "JOBREPORT_SACCT_TIMEOUT": ("30", "Seconds before a sacct call is abandoned."),
    "JOBREPORT_STAFF": ("", "Comma-separated user names that may see every job."),
    "JOBREPORT_AUTH": ("password", "`password` (built-in login) or `remote-user` (proxy)."),
    "JOBREPORT_PASSWORD_FILE": ("", "File of `user:werkzeug-hash` lines for built-in login."),
    "JOBREPORT_SECRET_KEY": ("", "Flask secret key (sessions, CSRF); required for serve."),
    "JOBREPORT_BIND": ("127.0.0.1:8000", "Address `jobreport serve` listens on."),
    "JOBREPORT_SMTP_HOST": ("127.0.0.1", "SMTP server for report emails."),
    "JOBREPORT_SMTP_PORT": ("25", "SMTP port."),
    "JOBREPORT_SMTP_STARTTLS": ("0", "1 to upgrade the connection with STARTTLS."),
    "JOBREPORT_SMTP_USER": ("", "SMTP login (empty: no auth)."),
    "JOBREPORT_SMTP_PASSWORD": ("", "SMTP password."),
    "JOBREPORT_MAIL_FROM": ("jobreport@localhost", "From address of report emails."),
    "JOBREPORT_MAIL_TO": ("{user}@localhost", "Owner address template; `{user}` is replaced."),
    "JOBREPORT_MAIL_MAP": ("", "Optional file of `user address` lines overriding the template."),
    "JOBREPORT_MAIL_OPT_OUT": ("", "Optional file of user names who get no emails."),
    "JOBREPORT_MAIL_MIN_RUNTIME": ("600", "Batch mail skips jobs shorter than this (seconds)."),
    "JOBREPORT_OUTBOX": ("var/outbox.sqlite", "SQLite file of the durable email outbox."),
    "JOBREPORT_THRESHOLDS": ("", "Overrides like `cpu_efficiency_low=0.5,gpu_idle=0.05`."),
}


# Read by the exporter (exporter/settings.py) and the benchmarks, not by this module.
OTHER_PREFIXES = ("JOBREPORT_EXPORTER_", "JOBREPORT_BENCH_")


class SettingsError(ValueError):
    """An environment variable holds a value we cannot use."""


def _int(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name, SETTINGS_DOC[name][0])
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None


def _float(env: Mapping[str, str], name: str) -> float:
    raw = env.get(name, SETTINGS_DOC[name][0])
    try:
        return float(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a number") from None


def _str(env: Mapping[str, str], name: str) -> str:
    return env.get(name, SETTINGS_DOC[name][0])


def _thresholds(env: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    raw = _str(env, "JOBREPORT_THRESHOLDS")
    for item in filter(None, (p.strip() for p in raw.split(","))):
        key, sep, value = item.partition("=")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SettingsError(f"JOBREPORT_THRESHOLDS: {item!r} is not name=number")
    return out


@dataclass(frozen=True)
class Settings:
    cluster: str = "demo"
    prometheus_url: str = "http://127.0.0.1:9090"
    prometheus_timeout: float = 10.0
    scrape_interval: float = 30.0
    prometheus_node_label: str = "instance"
    db_url: str = "mysql://jobreport:jobreport@127.0.0.1:3306/jobreport"
    sacct: str = "sacct"
    sacct_timeout: float = 30.0
    staff: frozenset[str] = frozenset()
    auth: str = "password"
    password_file: str = ""
    secret_key: str = ""
    bind: str = "127.0.0.1:8000"
    smtp_host: str = "127.0.0.1"
    smtp_port: int = 25
    smtp_starttls: bool = False
    smtp_user: str = ""
    smtp_password: str = ""
    mail_from: str = "jobreport@localhost"
    mail_to: str = "{user}@localhost"
    mail_map: str = ""
    mail_opt_out: str = ""
    mail_min_runtime: float = 600.0
    outbox: str = "var/outbox.sqlite"
    thresholds: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
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
        auth = _str(env, "JOBREPORT_AUTH")
        if auth not in ("password", "remote-user"):
            raise SettingsError(f"JOBREPORT_AUTH={auth!r}: use password or remote-user")
        return cls(
            cluster=_str(env, "JOBREPORT_CLUSTER"),
            prometheus_url=_str(env, "JOBREPORT_PROMETHEUS_URL").rstrip("/"),
            prometheus_timeout=_float(env, "JOBREPORT_PROMETHEUS_TIMEOUT"),
            scrape_interval=_float(env, "JOBREPORT_SCRAPE_INTERVAL"),
            prometheus_node_label=_str(env, "JOBREPORT_PROMETHEUS_NODE_LABEL"),
            db_url=_str(env, "JOBREPORT_DB_URL"),
            sacct=_str(env, "JOBREPORT_SACCT"),
            sacct_timeout=_float(env, "JOBREPORT_SACCT_TIMEOUT"),
            staff=frozenset(
                u.strip() for u in _str(env, "JOBREPORT_STAFF").split(",") if u.strip()
            ),
            auth=auth,
            password_file=_str(env, "JOBREPORT_PASSWORD_FILE"),
            secret_key=_str(env, "JOBREPORT_SECRET_KEY"),
            bind=_str(env, "JOBREPORT_BIND"),
            smtp_host=_str(env, "JOBREPORT_SMTP_HOST"),
            smtp_port=_int(env, "JOBREPORT_SMTP_PORT"),
            smtp_starttls=_str(env, "JOBREPORT_SMTP_STARTTLS") in ("1", "true", "yes"),
            smtp_user=_str(env, "JOBREPORT_SMTP_USER"),
            smtp_password=_str(env, "JOBREPORT_SMTP_PASSWORD"),
            mail_from=_str(env, "JOBREPORT_MAIL_FROM"),
            mail_to=_str(env, "JOBREPORT_MAIL_TO"),
            mail_map=_str(env, "JOBREPORT_MAIL_MAP"),
            mail_opt_out=_str(env, "JOBREPORT_MAIL_OPT_OUT"),
            mail_min_runtime=_float(env, "JOBREPORT_MAIL_MIN_RUNTIME"),
            outbox=_str(env, "JOBREPORT_OUTBOX"),
            thresholds=_thresholds(env),
        )
