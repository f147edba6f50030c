"""A fixture mirror on 127.0.0.1 for the fetch tests: real files of the shared data, served by a
local HTTP server that can drop a connection mid-file or serve altered bytes (no network)."""

from __future__ import annotations

import http.server
import threading
from collections import Counter
from collections.abc import Iterator

import pytest

SERVER_LIFETIME_S = 120  # the server shuts itself down after this, whatever the test does


class Mirror:
    """Files by URL path, plus faults: ``drop_once`` / ``drop_always`` send the headers of the full
    file and then only half of it before closing the connection; ``altered`` replaces the bytes."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.altered: dict[str, bytes] = {}
        self.drop_once: set[str] = set()
        self.drop_always: set[str] = set()
        self.requests: Counter[str] = Counter()
        self.base_url = ""


def _handler(mirror: Mirror) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 10

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self.path.lstrip("/")
            mirror.requests[path] += 1
            body = mirror.altered.get(path, mirror.files.get(path))
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if path in mirror.drop_always or path in mirror.drop_once:
                mirror.drop_once.discard(path)
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> Iterator[Mirror]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    m = Mirror()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(m))
    server.daemon_threads = True
    m.base_url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    watchdog = threading.Timer(SERVER_LIFETIME_S, server.shutdown)
    watchdog.daemon = True
    watchdog.start()
    yield m
    watchdog.cancel()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
