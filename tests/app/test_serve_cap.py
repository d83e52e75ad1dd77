"""`lineage serve` caps its sessions: the server runs in this process on a free loopback port,
and each "app" is a stand-in process that speaks just enough of textual-serve's protocol to
start and to quit when told, so the cap is tested without starting real apps."""
import asyncio
import socket
import sys

import aiohttp
import pytest

pytest.importorskip("textual_serve")
from aiohttp import web

from lineage.cli.serve import MAX_SESSIONS, GuardedServer

# prints textual-serve's ready line, then exits on the quit message (or when stdin closes)
STAND_IN = ("import sys\n"
            "print('__GANGLION__', flush=True)\n"
            "for chunk in iter(lambda: sys.stdin.buffer.read1(65536), b''):\n"
            "    if b'quit' in chunk: break\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _started(max_sessions, tmp_path):
    port = _free_port()
    server = GuardedServer([sys.executable, "-c", STAND_IN], host="127.0.0.1", port=port, root=str(tmp_path),
                           max_sessions=max_sessions)
    runner = web.AppRunner(await server._make_app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return server, runner


def _ws_url(server):
    return f"ws://127.0.0.1:{server.port}/ws/{server.token}?width=80&height=24"


def _headers(server):
    return {"Origin": f"http://127.0.0.1:{server.port}"}


def test_the_default_cap_is_small():
    assert 1 <= MAX_SESSIONS <= 8


def test_sessions_past_the_cap_get_a_busy_page_and_the_log_counts_them(tmp_path, capsys):
    async def go():
        server, runner = await _started(2, tmp_path)
        try:
            async with aiohttp.ClientSession() as s:
                held = [await s.ws_connect(_ws_url(server), headers=_headers(server)) for _ in range(2)]
                assert server.sessions == 2
                # a third socket is refused before its handshake: no third process starts
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await s.ws_connect(_ws_url(server), headers=_headers(server))
                assert refused.value.status == 503
                assert len(server.apps) <= 2 and server.sessions == 2
                # the page says so, with the count, instead of a terminal that never connects
                async with s.get(f"http://127.0.0.1:{server.port}/", params={"token": server.token}) as r:
                    assert r.status == 503
                    page = await r.text()
                assert "busy" in page and "2 sessions running" in page
                # one browser leaves: its slot is free again
                await held[0].close()
                for _ in range(100):
                    if server.sessions < 2:
                        break
                    await asyncio.sleep(0.05)
                assert server.sessions == 1
                again = await s.ws_connect(_ws_url(server), headers=_headers(server))
                assert server.sessions == 2
                for ws in (held[1], again):
                    await ws.close()
                for _ in range(100):
                    if server.sessions == 0:
                        break
                    await asyncio.sleep(0.05)
                assert server.sessions == 0
                # without the token the busy page is not shown (it would tell a stranger the count)
                async with s.get(f"http://127.0.0.1:{server.port}/") as r:
                    assert r.status == 403
        finally:
            await runner.cleanup()
    asyncio.run(go())
    log = capsys.readouterr().out.splitlines()
    assert "lineage serve: a session started (2 of at most 2 sessions running)" in log
    assert "lineage serve: busy: a session was refused (2 of at most 2 sessions running)" in log
    assert "lineage serve: busy: a page was refused (2 of at most 2 sessions running)" in log
    assert log[-1] == "lineage serve: a session ended (0 of at most 2 sessions running)"


def test_many_sockets_at_once_start_no_more_than_the_cap(tmp_path):
    """Twenty handshakes raced together: the check and the count have no await between them."""
    async def go():
        server, runner = await _started(3, tmp_path)
        try:
            async with aiohttp.ClientSession() as s:
                async def one():
                    try:
                        return await s.ws_connect(_ws_url(server), headers=_headers(server))
                    except aiohttp.WSServerHandshakeError as e:
                        return e.status
                got = await asyncio.gather(*(one() for _ in range(20)))
                opened = [g for g in got if not isinstance(g, int)]
                assert len(opened) == 3 and got.count(503) == 17
                assert server.sessions == 3 and len(server.apps) <= 3
                for ws in opened:
                    await ws.close()
        finally:
            await runner.cleanup()
    asyncio.run(go())


def test_max_sessions_below_one_is_one_line(capsys):
    from lineage.cli.main import main
    assert main(["serve", "--max-sessions", "0"]) == 2
    assert capsys.readouterr().err.splitlines() == ["lineage serve: --max-sessions must be at least 1, got 0"]
