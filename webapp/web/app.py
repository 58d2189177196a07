"""``create_app``: the Flask app from settings, with its blueprints and hooks."""

from __future__ import annotations

from flask import Flask, g

from webapp.renderers.templates import TEMPLATES, install_filters
from webapp.report.service import ReportService
from webapp.settings import Settings, SettingsError
from webapp.web import auth, cluster, errors, views
from webapp.web.reports import ReportCache
from webapp.web.security import security_headers


def create_app(settings: Settings | None = None, service: ReportService | None = None) -> Flask:
    """The web app: settings from JOBREPORT_* unless given; the report service is built
    on first use unless given (tests pass a fake)."""
    settings = Settings.from_env() if settings is None else settings
    if not settings.secret_key:
        raise SettingsError("JOBREPORT_SECRET_KEY is empty: set it to a long random string "
                            "(e.g. python3 -c 'import secrets; print(secrets.token_hex(32))') "
                            "before starting the web app; it signs the session cookies")
    app = Flask("webapp", template_folder=str(TEMPLATES), static_folder=None)
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        JOBREPORT_SETTINGS=settings,
    )
    app.extensions["jobreport.service"] = service
    app.extensions["jobreport.reports"] = ReportCache()
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
    install_filters(app.jinja_env)
    app.jinja_env.globals.update(csrf_token=auth.csrf_token, auth_mode=settings.auth)
    app.context_processor(lambda: {"user": g.get("user")})
    app.before_request(auth.load_user)
    app.after_request(security_headers)
    app.register_blueprint(auth.bp)
    app.register_blueprint(views.bp)
    app.register_blueprint(cluster.bp)
    errors.register(app)
    return app
