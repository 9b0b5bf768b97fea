"""Serving the viewer: bind (``--port 0``: a free port), print the URL with its token as the first line, open the
browser unless told not to, and run uvicorn until Ctrl-C."""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on (host, port); port 0 lets the OS choose a free one."""
    from scijudge.errors import InputError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror or exc})", field="port") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_of(host: str, port: int, token: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(app: Any, token: str, *, host: str = "127.0.0.1", port: int = 0, open_browser: bool = True,
          out: TextIO | None = None, err: TextIO | None = None, background: Callable[[], None] | None = None) -> None:
    """Serve ``app`` until interrupted; the first line written to ``out`` is ``scijudge view: URL``. ``background``
    runs in a thread meanwhile (the slow part of start-up); if it raises, the server stops and its error is raised."""
    import uvicorn

    out = out or sys.stdout
    err = err or sys.stderr
    sock = bind(host, port)
    url = url_of(host, sock.getsockname()[1], token)
    out.write(f"scijudge view: {url}\n")
    out.flush()
    if not is_loopback(host):
        err.write(f"warning: serving on {host}, reachable from other machines; anyone with the URL's token can read "
                  "the stores and write labels\n")
        err.flush()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    if open_browser:
        import webbrowser

        def opened() -> None:
            import time

            while not server.started and not server.should_exit:
                time.sleep(0.05)
            if server.started:
                webbrowser.open(url)

        threading.Thread(target=opened, daemon=True).start()
    failed: list[BaseException] = []
    if background is not None:
        def work() -> None:
            try:
                background()
            except BaseException as exc:
                failed.append(exc)
                server.should_exit = True

        threading.Thread(target=work, daemon=True, name="scijudge-view-warm").start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if failed:
        raise failed[0]
