"""`lineage serve`: the app in a browser, protected as local servers that run code must be.

textual-serve starts one app process per WebSocket. Anyone who can open that socket drives
the app, and through its Open command reads files, so (as Jupyter does):

- the request's Host must be a name this server answers to (loopback names, the bound
  address, --allow-origin hosts), which defeats DNS rebinding;
- a browser's Origin must be this same server (or one named by --allow-origin), so a page
  elsewhere cannot open the socket in the user's browser;
- a token, printed once in the URL, is needed for the page and the socket (the page sets a
  same-site cookie so a reload works);
- the app process is started from an argument list, never a shell line, runs with
  LINEAGE_SERVE_ROOT so its Open reads only under the root (lineage/cli/served.py), and dies with
  the server;
- terminal sizes asked for by the browser are clamped;
- at most --max-sessions app processes run at once (each playing app holds about 350 MB;
  50 browsers once started 50 of them): the rest get a page saying the server is busy, and
  every start, end and refusal is a log line with the count.
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import os
import re
import secrets
import signal
import sys
from html import escape
from urllib.parse import urlsplit

from aiohttp import WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from .served import MAX_SESSIONS, ROOT_ENV

MAX_COLS, MAX_ROWS = 500, 200          # a 4K screen at a small font; a 20000 x 20000 ask is refused
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(netloc: str) -> str:
    """'Localhost:8000' -> 'localhost'; '[::1]:8000' -> '::1'."""
    try:
        return (urlsplit("//" + netloc).hostname or "").lower()
    except ValueError:
        return ""


def own_page(html: str, title: str) -> str:
    """textual-serve's page with a <title> (it has none) and without its stylesheet from
    fonts.googleapis.com: a served app works offline and tells nobody else it was opened; the
    page's font list falls back to the machine's monospace font."""
    html = re.sub(r'<link[^>]*href="https://fonts\.googleapis\.com[^"]*"[^>]*>', "", html)
    return html.replace("<head>", f"<head>\n    <title>{escape(title)}</title>", 1)


def clamp_size(width, height) -> tuple[int, int]:
    w = to_int(str(width), 80)
    h = to_int(str(height), 24)
    return max(1, min(w, MAX_COLS)), max(1, min(h, MAX_ROWS))


def _die_with_parent() -> None:
    """In the app process before exec: ask Linux to kill it when the server dies, even by
    SIGKILL, so no app is left running (or spinning) without its server. SIGKILL, because the
    app catches SIGTERM (an orphaned app was seen spinning at 78% CPU with SIGTERM pending)."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _AppProcess(AppService):
    """textual-serve's app service, started from an argument list instead of a shell line
    (a file name like `t$(touch x).yaml` must stay a file name)."""

    def __init__(self, argv: list[str], extra_env: dict[str, str], **kw):
        super().__init__(" ".join(argv), **kw)
        self.argv, self.extra_env = argv, extra_env

    async def _open_app_process(self, width: int = 80, height: int = 24):
        env = self._build_environment(width=width, height=height) | self.extra_env
        preexec = _die_with_parent if sys.platform.startswith("linux") else None
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=env, preexec_fn=preexec)
        self._stdin = process.stdin
        return process

    def kill(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()

    async def end(self, grace: float) -> None:
        """SIGTERM (the app quits as on `q`: its session publishes the frames it kept), then
        SIGKILL if it has not gone within `grace` seconds."""
        process = self._process
        if process is None or process.returncode is not None:
            return
        try:
            process.terminate()
            await asyncio.wait_for(process.wait(), timeout=grace)
        except (asyncio.TimeoutError, ProcessLookupError):
            self.kill()


class GuardedServer(Server):
    def __init__(self, argv: list[str], *, host: str, port: int, root: str, token: str | None = None,
                 allow_origins: tuple[str, ...] = (), max_sessions: int = MAX_SESSIONS):
        super().__init__(" ".join(argv), host=host, port=port, title="lineage")
        self.argv, self.root = argv, root
        self.token = token or secrets.token_urlsafe(24)
        self.cookie = f"lineage-token-{port}"
        self.allow_origins = {o.rstrip("/").lower() for o in allow_origins}
        self.hosts = set(LOOPBACK_NAMES) | {host.lower()} | {_hostname(urlsplit(o).netloc) for o in self.allow_origins}
        self.apps: set[_AppProcess] = set()
        self.max_sessions = max(1, int(max_sessions))
        # counted from the handshake on, not from when the app is up: the check and the count
        # happen with no await between them, so 50 sockets at once cannot all pass the check
        self.sessions = 0

    @property
    def url(self) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        shown = f"[{shown}]" if ":" in shown else shown
        return f"http://{shown}:{self.port}/?token={self.token}"

    # -- checks, on every request -------------------------------------------------------
    def _token_ok(self, request: web.Request) -> bool:
        given = request.match_info.get("token") or request.query.get("token") or request.cookies.get(self.cookie) or ""
        return hmac.compare_digest(given.encode(), self.token.encode())

    def refusal(self, request: web.Request) -> str | None:
        """Why this request is refused, or None."""
        if _hostname(request.host) not in self.hosts:
            return f"Host {request.host!r} is not a name this server answers to"
        origin = request.headers.get("Origin")
        if origin is not None:            # browsers always send it on a WebSocket; other clients need the token
            o = origin.rstrip("/").lower()
            if o not in self.allow_origins and o != f"{request.scheme}://{request.host}".lower():
                return f"Origin {origin!r} is not this server (lineage serve --allow-origin adds one)"
        if not request.path.startswith("/static/") and not self._token_ok(request):
            return "a token is needed: open the URL that lineage serve printed"
        return None

    @web.middleware
    async def _guard(self, request: web.Request, handler):
        why = self.refusal(request)
        if why is not None:
            raise web.HTTPForbidden(text=f"lineage serve: {why}\n")
        response = await handler(request)
        if request.path == "/" and request.query.get("token"):
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict")
        response.headers["X-Frame-Options"] = "DENY"     # no clickjacking through a frame
        response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        return response

    async def _make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard])
        import aiohttp_jinja2
        import jinja2
        aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(self.templates_path))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws/{token}", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, name="static"),     # no directory listings
        ])
        app.on_startup.append(self.on_startup)
        app.on_shutdown.append(self.on_shutdown)
        return app

    # -- sessions ---------------------------------------------------------------------
    def _log(self, event: str) -> None:
        try:       # a terminal closed under the server must not leave a session counted forever
            print(f"lineage serve: {event} ({self.sessions} of at most {self.max_sessions} sessions running)",
                  flush=True)
        except (OSError, ValueError):
            pass

    @property
    def busy(self) -> bool:
        return self.sessions >= self.max_sessions

    def busy_page(self) -> web.Response:
        n = self.sessions
        body = (f"<!doctype html>\n<html><head><title>lineage: busy</title></head><body>\n"
                f"<h1>lineage serve is busy</h1>\n"
                f"<p>{n} session{'s' if n != 1 else ''} running, the most this server allows "
                f"(lineage serve --max-sessions {self.max_sessions}). Close another tab, or try again later.</p>\n"
                f"</body></html>\n")
        return web.Response(status=503, text=body, content_type="text/html", headers={"Retry-After": "30"})

    # -- pages ------------------------------------------------------------------------
    async def handle_index(self, request: web.Request) -> web.Response:
        if self.busy:
            self._log("busy: a page was refused")
            return self.busy_page()
        # URLs follow the Host the browser used, so `ssh -L 9000:localhost:8000` works
        import aiohttp_jinja2
        base = f"{request.scheme}://{request.host}"
        ws = ("wss" if request.scheme == "https" else "ws") + f"://{request.host}/ws/{self.token}"
        context = {"font_size": max(6, min(to_int(request.query.get("fontsize", "16"), 16), 48)),
                   "app_websocket_url": ws, "config": {"static": {"url": f"{base}/static/"}},
                   "application": {"name": self.title}}
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.text = own_page(response.text, self.title)
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=1 << 20)
        width, height = clamp_size(request.query.get("width", "80"), request.query.get("height", "24"))
        if self.busy:                     # refused before the handshake: no process, no socket
            self._log("busy: a session was refused")
            return self.busy_page()
        self.sessions += 1
        self._log("a session started")
        service = None
        try:
            await websocket.prepare(request)
            service = _AppProcess(self.argv, {ROOT_ENV: self.root}, write_bytes=websocket.send_bytes,
                                  write_str=websocket.send_str, close=websocket.close,
                                  download_manager=self.download_manager, debug=False)
            self.apps.add(service)
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        finally:
            try:                # counted free even if ending the app is itself cancelled
                if service is not None:
                    await self._end(service)
            finally:
                self.sessions -= 1
                self._log("a session ended")
        return websocket

    async def _end(self, service: _AppProcess) -> None:
        """Ask the app to quit; if it has not within a few seconds, kill it (a browser that
        left must not leave its app running)."""
        try:
            await asyncio.wait_for(service.stop(), timeout=5)
        except Exception:  # noqa: BLE001  a timeout, or stop() failing on a process already gone
            service.kill()
        self.apps.discard(service)

    async def _process_messages(self, websocket: web.WebSocketResponse, service: AppService) -> None:
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
                kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            except (ValueError, TypeError, KeyError, IndexError):
                continue                       # a malformed message is dropped, not a crash
            if kind == "stdin" and isinstance(data, str):
                await service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                await service.set_terminal_size(*clamp_size(data.get("width"), data.get("height")))
            elif kind == "ping":
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()

    async def on_startup(self, app: web.Application) -> None:
        print(f"lineage serve: open {self.url}", flush=True)
        print(f"  files: the bundled scenarios and those under {self.root}", flush=True)
        print(f"  over SSH: ssh -L {self.port}:localhost:{self.port} HOST, then open the URL above on your machine",
              flush=True)
        print(f"  sessions: at most {self.max_sessions} at once (--max-sessions N); Ctrl+C to stop", flush=True)

    async def on_shutdown(self, app: web.Application) -> None:
        # SIGTERM / Ctrl+C: every app quits cleanly if it can, and none outlives the server
        await asyncio.gather(*(service.end(3.0) for service in list(self.apps)), return_exceptions=True)

    def initialize_logging(self) -> None:
        """textual-serve logs tracebacks with their local variables; keep warnings only."""
        import logging
        logging.basicConfig(level="WARNING", format="lineage serve: %(message)s")


def serve(argv: list[str], host: str, port: int, root: str, allow_origins: tuple[str, ...] = (),
          max_sessions: int = MAX_SESSIONS) -> int:
    server = GuardedServer(argv, host=host, port=port, root=root, allow_origins=allow_origins,
                           max_sessions=max_sessions)
    if not is_loopback(host):
        print(f"lineage serve: WARNING: listening on {host}, not loopback: anyone who can reach this machine "
              "and learns the token can drive the app. Prefer the default and ssh -L.", file=sys.stderr, flush=True)
    server.serve()
    return 0
