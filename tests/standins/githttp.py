"""A git server over HTTP for tests: git's own `git http-backend` (the CGI program git ships for
smart HTTP) behind a small WSGI bridge, with HTTP Basic authentication as hosting services ask
for a token. Every request is recorded (method, path with its query, user), so a test can check
what reached the server and that no credential travelled in a URL."""

from __future__ import annotations

import base64
import subprocess
import threading
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


class GitHttpServer:
    """Serves the bare repositories under `root` at http://127.0.0.1:PORT/NAME.git to a client
    that sends `user:token` by Basic authentication (any user when `user` is empty); with
    `push=False` the token may read but not push (403, as a read-only deploy token gets)."""

    def __init__(self, root: Path, token: str, user: str = "", push: bool = True):
        self.root, self.token, self.user, self.push = Path(root), token, user, push
        self.requests: list[dict] = []
        self.server = make_server("127.0.0.1", 0, self.app, handler_class=_Quiet)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _user(self, environ: dict) -> str | None:
        """The authenticated user, or None."""
        scheme, _, value = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(value).decode().partition(":")
        except ValueError:
            return None
        ok = password == self.token and (not self.user or user == self.user)
        return user if ok else None

    def app(self, environ, start_response):
        user = self._user(environ)
        query = environ.get("QUERY_STRING", "")
        self.requests.append(
            {
                "method": environ["REQUEST_METHOD"],
                "path": environ.get("PATH_INFO", "") + ("?" + query if query else ""),
                "user": user,
            }
        )
        if user is None:
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"authentication required\n"]
        if not self.push and "git-receive-pack" in environ.get("PATH_INFO", "") + query:
            start_response("403 Forbidden", [("Content-Type", "text/plain")])
            return [b"this token may not push\n"]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        cgi_env = {
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": environ["REQUEST_METHOD"],
            "PATH_INFO": environ.get("PATH_INFO", ""),
            "QUERY_STRING": query,
            "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": user,
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", ""),
            "HTTP_CONTENT_ENCODING": environ.get("HTTP_CONTENT_ENCODING", ""),
            "PATH": "/usr/bin:/bin",
        }
        out = subprocess.run(
            ["git", "http-backend"], input=body, env=cgi_env, capture_output=True, timeout=60
        ).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [payload]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
