"""`jobreport serve`: the web app on Flask's development server (gunicorn in production)."""

from __future__ import annotations

import argparse

from jobreport_common.bind import parse_bind
from webapp.detectors.policy_in_force import reload_on_sighup
from webapp.settings import Settings


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="address to bind (default from JOBREPORT_BIND)")
    parser.add_argument("--port", type=int, help="port (default from JOBREPORT_BIND)")


def run_serve(args: argparse.Namespace, settings: Settings) -> int:
    """The Flask development server (gunicorn in production)."""
    from webapp.web.app import create_app

    host, port = parse_bind(settings.bind, "127.0.0.1")
    with reload_on_sighup():  # HUP: the site's policy read again (gunicorn: new workers)
        create_app(settings).run(host=args.host or host, port=args.port or port,
                                 threaded=True)
    return 0
