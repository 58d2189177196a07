"""A real JSON webhook server on loopback (http.server in a thread): what apprise's
``json://127.0.0.1:PORT/path`` URL posts to. It can be taken down and brought back on the
same port, so a test sees a refused connection, not a stand-in error."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """Records every POST as (path, JSON body); ``up()`` / ``down()`` start and stop it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.posts: list[tuple[str, dict]] = []
        self._server: ThreadingHTTPServer | None = None

    def url(self, path: str = "hook") -> str:
        """The apprise URL of ``path`` on this server."""
        return f"json://127.0.0.1:{self.port}/{path}"

    def up(self) -> None:
        posts = self.posts

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass  # quiet test output

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def messages(self, path: str | None = None) -> list[str]:
        """The ``message`` field of each post (to ``/path`` only when given)."""
        return [body["message"] for p, body in self.posts if path is None or p == f"/{path}"]
