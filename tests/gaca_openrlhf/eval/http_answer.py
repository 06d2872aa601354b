"""A real HTTP server for the eval CLI's WebShop health checks (imported by the tests of this folder)."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Server:
    """Answers every GET on 127.0.0.1 with (``status``, ``body``), both changeable between requests; records the
    paths asked for (``paths``) and (port, path) pairs (``hits``)."""

    def __init__(self, status: int = 200, body: str | bytes = b"{}"):
        self.status, self.body, self.hits = status, body, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                owner.hits.append((self.server.server_address[1], self.path))
                data = owner.body.encode() if isinstance(owner.body, str) else owner.body
                self.send_response(owner.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    @property
    def paths(self) -> list[str]:
        return [path for _, path in self.hits]

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()
