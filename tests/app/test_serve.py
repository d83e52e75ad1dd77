"""`lineage serve` as an attacker and a user would meet it: a real server on a free loopback
port, real WebSockets, a real app process behind them."""
import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import pytest

from lineage.cli.serve import MAX_COLS, MAX_ROWS, clamp_size, is_loopback
from lineage.cli.served import ROOT_ENV, refusal, shown_problems

ROOT = Path(__file__).resolve().parents[2]
ODD = "t$(touch${IFS}PWNED) x.yaml"      # a shell would run the $(...) and split at the space


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Every descendant of pid, read from /proc."""
    parents = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def _alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("served")
    (cwd / ODD).write_text((ROOT / "lineage" / "scenarios" / "recall.yaml").read_text())
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "lineage.cli.main", "serve", ODD, "--port", str(port)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    line = proc.stdout.readline()
    m = re.search(r"\?token=(\S+)", line)
    assert m, f"no URL printed: {line!r}"
    lines = [proc.stdout.readline() for _ in range(3)]
    for _ in range(300):           # the URL is printed at start-up, just before the port listens
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    yield {"proc": proc, "port": port, "token": m.group(1), "cwd": cwd, "said": [line, *lines]}
    if proc.poll() is None:
        proc.kill()


def test_the_ssh_hint_forwards_the_port_the_server_listens_on(server):
    port = server["port"]
    [hint] = [line for line in server["said"] if "ssh -L" in line]
    assert f"ssh -L {port}:localhost:{port} " in hint


def _ws(server, token=None, host=None, origin="same"):
    port = server["port"]
    headers = {}
    if host is not None:
        headers["Host"] = host
    if origin == "same":
        headers["Origin"] = f"http://127.0.0.1:{port}"
    elif origin is not None:
        headers["Origin"] = origin
    return f"ws://127.0.0.1:{port}/ws/{token or server['token']}?width=100&height=30", headers


async def _handshake_status(url, headers) -> int:
    async with aiohttp.ClientSession() as s:
        try:
            async with s.ws_connect(url, headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as e:
            return e.status


def test_foreign_origin_host_or_token_is_refused(server):
    cases = [dict(origin="http://evil.example"),                          # a page elsewhere
             dict(origin="http://evil.example", host="evil.example"),     # DNS rebinding
             dict(host=f"evil.example:{server['port']}", origin=None),
             dict(origin=f"http://localhost:{server['port'] + 1}"),       # another local site
             dict(token="wrong-token")]
    for case in cases:
        url, headers = _ws(server, **case)
        assert asyncio.run(_handshake_status(url, headers)) == 403, case


def test_page_needs_the_token(server):
    async def go():
        base = f"http://127.0.0.1:{server['port']}/"
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:   # unsafe: an IP host
            async with s.get(base) as r:
                assert r.status == 403
            async with s.get(base, params={"token": server["token"]}) as r:
                assert r.status == 200
                page = await r.text()
                assert f"/ws/{server['token']}" in page and r.headers["X-Frame-Options"] == "DENY"
                assert "<title>lineage</title>" in page and "googleapis" not in page       # works offline
            async with s.get(base) as r:          # the cookie set above lets a reload in
                assert r.status == 200
    asyncio.run(go())


def test_same_origin_with_token_runs_the_app_and_no_shell(server):
    """The odd file name opens as a file (the app's first screen arrives) and runs nothing;
    a 20000 x 20000 resize is clamped; SIGTERM leaves no process behind."""
    async def go():
        url, headers = _ws(server)
        got = b""
        async with aiohttp.ClientSession() as s:
            async with s.ws_connect(url, headers=headers) as ws:
                await ws.send_json(["resize", {"width": 20000, "height": 20000}])
                deadline = time.monotonic() + 60
                while len(got) < 20000 and time.monotonic() < deadline:
                    msg = await ws.receive(timeout=deadline - time.monotonic())
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        got += msg.data
                    elif msg.type == aiohttp.WSMsgType.TEXT:
                        got += msg.data.encode()
                    else:
                        break
                apps = _children(server["proc"].pid)
                assert apps, "no app process was started"
                assert max(_rss_mb(p) for p in apps if _alive(p)) < 1024
                return got, apps
    got, apps = asyncio.run(go())
    assert len(got) >= 20000, got[-500:]
    deadline = time.monotonic() + 20              # the browser left: its app process ends with it
    while any(_alive(p) for p in apps) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in apps), "an app process outlived its connection"
    assert not (server["cwd"] / "PWNED").exists() and not (ROOT / "PWNED").exists()
    # a connection is open again while the server is told to stop
    async def hold():
        url, headers = _ws(server)
        async with aiohttp.ClientSession() as s:
            async with s.ws_connect(url, headers=headers) as ws:
                await ws.receive(timeout=30)
                kids = _children(server["proc"].pid)
                server["proc"].send_signal(signal.SIGTERM)
                return kids
    kids = asyncio.run(hold())
    server["proc"].wait(timeout=20)
    deadline = time.monotonic() + 10
    while any(_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kids and not any(_alive(k) for k in kids)


def test_sizes_are_clamped():
    assert clamp_size(20000, 20000) == (MAX_COLS, MAX_ROWS)
    assert clamp_size("-5", "x") == (1, 24)
    assert clamp_size(100, 30) == (100, 30)
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")


def test_served_open_refuses_without_reading(tmp_path, monkeypatch):
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    inside = tmp_path / "mine.yaml"
    inside.write_text("version: 1\n")
    assert refusal(str(inside)) is None
    assert refusal(str(ROOT / "lineage" / "scenarios" / "tour.yaml")) is None        # bundled
    assert "outside" in refusal("/etc/passwd")
    (tmp_path / "link.yaml").symlink_to("/etc/passwd")
    assert "outside" in refusal(str(tmp_path / "link.yaml"))
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert "FIFO" in refusal(str(fifo))           # stat, not open: a FIFO would block an open
    (tmp_path / "dev").symlink_to("/dev/zero")
    monkeypatch.setenv(ROOT_ENV, "/")
    assert "character device" in refusal("/dev/zero")
    assert "directory" in refusal(str(tmp_path))
    monkeypatch.delenv(ROOT_ENV)
    assert refusal("/etc/passwd") is None          # in a terminal the user may open what they like


def test_served_errors_quote_no_content(monkeypatch):
    lines = ["creds.yaml:1:1: api_key: unknown key 'api_key' (value 'sk-LEAKED-123')"]
    assert shown_problems(lines, "creds.yaml") == lines
    monkeypatch.setenv(ROOT_ENV, "/tmp")
    shown = shown_problems(lines, "creds.yaml")
    assert shown[0] == "creds.yaml:1:1: a problem here" and not any("LEAKED" in s or "api_key" in s for s in shown)


def test_served_app_open_outside_root_reads_nothing(tmp_path, monkeypatch):
    """Through the app's own Open: refused by name, the reader is never called, the app carries on."""
    import lineage.playback.session
    from lineage.app.app import LineageApp
    from lineage.app.screens.error import ErrorScreen

    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    opened = []
    real = lineage.playback.session.open_path
    monkeypatch.setattr(lineage.playback.session, "open_path", lambda p, **kw: opened.append(p) or real(p, **kw))

    async def go():
        app = LineageApp(str(ROOT / "lineage" / "scenarios" / "recall.yaml"))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(600):
                await pilot.pause(0.05)
                if app.cursor is not None:
                    break
            app.open("/etc/passwd")
            await pilot.pause(0.2)
            assert isinstance(app.screen, ErrorScreen)
            assert any("outside" in line for line in app.screen.lines)
            assert app.cursor is not None           # still showing what it had
    asyncio.run(go())
    assert "/etc/passwd" not in opened and opened


# issue 51, item 3: a scenario under the root named checkpoints anywhere on the machine
OUTSIDE = {
    "model.pretrained": "model: {pretrained: ../ckpt}\ninput: {ids: [1, 2, 3]}\n",
    "weights.checkpoint": "model: {preset: tiny-softmax}\nweights: {checkpoint: ../w.safetensors}\ninput: {ids: [1, 2, 3]}\n",
    "models[1].checkpoint": "models:\n  - {preset: tiny-softmax}\n  - {preset: tiny-softmax, checkpoint: /tmp/../etc/w.safetensors}\ninput: {ids: [1, 2, 3]}\n",
    "model.device_map": "model: {pretrained: ckpt, device_map: ../map.json}\ninput: {ids: [1, 2, 3]}\n",
    "input.file": "model: {preset: tiny-softmax}\ninput: {file: ../secret.txt}\n",
}


@pytest.fixture
def outside_root(tmp_path, monkeypatch):
    """A served root holding scenarios, a checkpoint folder, weights and text beside it (outside),
    and every read of a checkpoint's config.json counted."""
    import lineage.families
    root = tmp_path / "root"
    for d in (tmp_path / "ckpt", root / "ckpt"):
        d.mkdir(parents=True)
        (d / "config.json").write_text('{"model_type": "gpt2"}')
    (tmp_path / "w.safetensors").write_bytes(b"x")
    (tmp_path / "map.json").write_text("{}")
    (tmp_path / "secret.txt").write_text("a secret")
    reads = []
    real = lineage.families.read_model_config
    monkeypatch.setattr(lineage.families, "read_model_config", lambda p, *a, **kw: reads.append(p) or real(p, *a, **kw))
    return root, reads


@pytest.mark.parametrize("field", OUTSIDE)
def test_a_served_scenario_names_nothing_outside_the_root(field, outside_root, monkeypatch):
    """Refused by field before anything it names is read (no config.json, no header, no text)."""
    from lineage.scenario import load
    from lineage.scenario.problems import ScenarioError
    from lineage.scenario.served_paths import REFUSED
    root, reads = outside_root
    path = root / "s.yaml"
    path.write_text("version: 1\ntitle: t\n" + OUTSIDE[field])
    monkeypatch.setenv(ROOT_ENV, str(root))
    with pytest.raises(ScenarioError) as e:
        load(path)
    assert [f"{p.path}: {p.message}" for p in e.value.problems] == [f"{field}: {REFUSED}"]
    assert reads == []
    # the served user sees that one line as it is: it quotes nothing of the file
    lines = [str(p) for p in e.value.problems]
    assert shown_problems(lines, str(path)) == lines


def test_bundled_weights_stay_open_to_a_served_scenario(tmp_path, monkeypatch):
    from lineage.scenario import load
    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    assert load(ROOT / "lineage" / "scenarios" / "attention_recall.yaml").model.checkpoint


def test_lineage_serve_refuses_a_scenario_naming_a_checkpoint_outside_its_root(outside_root, capsys):
    """Said once in the terminal, before any server starts (not by each browser's app)."""
    from lineage.cli.main import main
    root, reads = outside_root
    (root / "s.yaml").write_text("version: 1\ntitle: t\n" + OUTSIDE["model.pretrained"])
    assert main(["serve", str(root / "s.yaml"), "--root", str(root), "--port", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "model.pretrained: outside the served root" in err[0]
    assert reads == [] and ROOT_ENV not in os.environ


def test_served_apps_publish_their_cache_when_the_browser_or_server_leaves(tmp_path):
    """A browser that leaves while its app plays, and a server stopped with a browser on it: each
    app quits as on `q`, so its frames become a cache entry and no partial is left (a served app
    used to crash on quitting while playing, leaving hundreds of MB of .partial files)."""
    cache = tmp_path / "cache"
    port = _free_port()
    env = dict(os.environ, LINEAGE_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "lineage.cli.main", "serve", "fig5_gating", "--port", str(port)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        token = re.search(r"\?token=(\S+)", proc.stdout.readline()).group(1)
        for _ in range(300):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        served = {"port": port, "token": token}

        async def play_and_leave(stop_server: bool) -> list[int]:
            url, headers = _ws(served)
            async with aiohttp.ClientSession() as s:
                async with s.ws_connect(url, headers=headers) as ws:
                    # until the first frame is up: a GPU box's first open takes several seconds, and
                    # an app quit while opening has no frame to publish (and rightly leaves nothing)
                    seen, deadline = b"", time.monotonic() + 90
                    while not re.search(rb"step \d+ / \d+", seen) and time.monotonic() < deadline:
                        msg = await ws.receive(timeout=deadline - time.monotonic())
                        if msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT):
                            data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
                            seen = seen[-4096:] + data
                    await ws.send_json(["stdin", " "])          # play
                    await asyncio.sleep(3)
                    kids = _children(proc.pid)
                    if stop_server:
                        proc.send_signal(signal.SIGTERM)
                        await asyncio.sleep(0.5)
                    return kids

        def entries(pattern):
            return list((cache / "lineage-trace-cache").glob(pattern)) if cache.exists() else []

        for stop_server in (False, True):
            for old in entries("*.trace"):
                old.unlink()
            kids = asyncio.run(play_and_leave(stop_server))
            deadline = time.monotonic() + 20
            while any(_alive(k) for k in kids) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert kids and not any(_alive(k) for k in kids)
            assert len(entries("*.trace")) == 1 and entries("*.partial") == [], (
                stop_server, sorted(str(p.relative_to(cache)) for p in cache.rglob("*")) if cache.exists() else "no cache")
    finally:
        if proc.poll() is None:
            proc.kill()
