"""``create_app``: the Flask app from settings, with its blueprints and hooks."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask, g
from werkzeug.middleware.proxy_fix import ProxyFix

from webapp.migrations import check_all, locations
from webapp.renderers.pdf_store import pdf_store
from webapp.renderers.templates import TEMPLATES, install_filters
from webapp.report.service import ReportService
from webapp.settings import Settings, SettingsError
from webapp.sources.slurm_config import SlurmConfigSource
from webapp.web import (
    api,
    auth,
    cluster,
    errors,
    history,
    job_lists,
    prometheus_front,
    ratelimit,
    staff,
    unsubscribe,
    views,
)
from webapp.web.pdfs import PdfBuilds
from webapp.web.reports import ReportCache
from webapp.web.security import security_headers
from webapp.web.state import WebState

MIN_SECRET_BYTES = 32
NEW_SECRET = "python3 -c 'import secrets; print(secrets.token_hex(32))'"


def check_secret_key(secret: str) -> None:
    """A short key can be guessed offline from one cookie, and then any session forged."""
    if not secret:
        raise SettingsError("JOBREPORT_SECRET_KEY is empty: set it to a long random string "
                            f"(e.g. {NEW_SECRET}) before starting the web app; it signs the "
                            "session cookies")
    if len(secret.encode()) < MIN_SECRET_BYTES:
        raise SettingsError(f"JOBREPORT_SECRET_KEY is {len(secret.encode())} bytes: it must be "
                            f"at least {MIN_SECRET_BYTES} random bytes (e.g. {NEW_SECRET}), "
                            "or a stolen cookie lets anybody guess it and sign in as anyone")


def create_app(settings: Settings | None = None, service: ReportService | None = None) -> Flask:
    """The web app: settings from JOBREPORT_* unless given; the report service is built
    on first use unless given (tests pass a fake)."""
    settings = Settings.from_env() if settings is None else settings
    check_secret_key(settings.secret_key)
    check_all(locations(settings))  # an older schema stops the start: `jobreport db-upgrade`
    app = Flask("webapp", template_folder=str(TEMPLATES), static_folder=None)
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.session_cookie_secure,
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session_lifetime),
        JOBREPORT_SETTINGS=settings,
    )
    if settings.trusted_proxies:
        n = settings.trusted_proxies
        # Flask's documented way to trust a proxy's headers; mypy sees a method replaced.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=n, x_proto=n)  # type: ignore[method-assign]
    app.extensions["jobreport.service"] = service
    app.extensions["jobreport.constants"] = cluster.constants_at_start(settings)
    app.extensions["jobreport.reports"] = ReportCache()
    app.extensions["jobreport.pdfs"] = PdfBuilds(pdf_store(settings), settings.pdf_process)
    app.extensions["jobreport.state"] = WebState(settings.web_state)
    app.extensions["jobreport.slurm_config"] = SlurmConfigSource(
        settings.scontrol, timeout=settings.sacct_timeout)
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
    install_filters(app.jinja_env)
    app.jinja_env.globals.update(csrf_token=auth.csrf_token, auth_mode=settings.auth,
                                 job_url=views.job_url, is_staff=auth.is_staff)
    app.context_processor(lambda: {"user": g.get("user")})
    app.context_processor(staff.policy_note)
    app.before_request(auth.load_user)
    app.after_request(security_headers)
    app.register_blueprint(auth.bp)
    app.register_blueprint(views.bp)
    ratelimit.install(app, settings)
    app.register_blueprint(cluster.bp)
    app.register_blueprint(staff.bp)
    app.register_blueprint(history.bp)
    app.register_blueprint(job_lists.bp)
    app.register_blueprint(unsubscribe.bp)
    app.register_blueprint(prometheus_front.bp)
    app.register_blueprint(api.bp)
    errors.register(app)
    return app
