"""`python -m batchline.webui`: serve the built chat UI (clients/web/dist) and its /config.json.

The UI is static files; the one thing it learns from its server is where Envoy is
(`{"api": "http://127.0.0.1:8080"}`), so `make run` and `make up` can move Envoy's port. The
web image serves the same files and the same /config.json with nginx.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import signal
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from batchline import logs

log = logging.getLogger("webui")
DIST = Path(__file__).resolve().parents[2] / "clients" / "web" / "dist"


class Handler(SimpleHTTPRequestHandler):
    config: bytes = b"{}"

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == "/config.json":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("cache-control", "no-store")
            self.send_header("content-length", str(len(self.config)))
            self.end_headers()
            self.wfile.write(self.config)
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


def serve(port: int, api: str, dist: Path = DIST, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server for `dist` that tells the UI Envoy's address `api`; call serve_forever()."""
    if not (dist / "index.html").is_file():
        raise FileNotFoundError(f"{dist}/index.html is missing: build the UI first (make web)")
    handler = type("ConfiguredHandler", (Handler,), {"config": json.dumps({"api": api}).encode()})
    return ThreadingHTTPServer((host, port), functools.partial(handler, directory=str(dist)))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m batchline.webui", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--api", default="http://127.0.0.1:8080", help="Envoy's URL as the browser sees it")
    parser.add_argument("--dist", type=Path, default=DIST)
    args = parser.parse_args()
    logs.configure("webui")
    server = serve(args.port, args.api, args.dist, args.host)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    log.info("chat UI on http://%s:%d, talking to %s", args.host, args.port, args.api)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
