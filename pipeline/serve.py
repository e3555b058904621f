"""`eoslab serve STORE`: a web page listing every run of a store, on aiohttp.

Guarantees: `serve(store, host, port)` checks the store first
(serve_scan.check_store: one line, NotAStore, for a path that is not one),
binds HOST:PORT (127.0.0.1 by default; port 0 picks a free port), prints
one line with the URL on `out`, and serves until SIGINT or SIGTERM, then
returns 0 with the socket closed. Routes, all GET:

  /               the page: a table of the runs (pipeline/static/serve.js
                  renders it from the JSON embedded in the page, then polls
                  /api/runs), every asset served from the package, nothing
                  from another host
  /api/runs       serve_scan.Scanner.scan() as JSON; the store is re-scanned
                  on every request, so runs a sweep adds appear without a
                  restart. With ?since=GENERATION, when nothing changed
                  since that scan: only {"generation", "unchanged": true}
  /static/NAME    a file of pipeline/static (only those)
  /store/PATH     a file under the store (reports, run.json, results.json,
                  histories, the matrix page): PATH resolved with symlinks
                  must stay inside the store, else 403; not a file, 404

Bind failures (address in use, an address this machine does not have)
raise OSError for the command line to turn into one line.
"""
from __future__ import annotations

import asyncio
import html
import json
import os
import re
import signal
import socket
import sys

from aiohttp import web

from pipeline.serve_scan import NotAStore, Scanner, check_store

STATIC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "static")
ASSETS = ("serve.js", "serve.css")
TEXT_TYPES = {".jsonl": "text/plain", ".log": "text/plain", ".txt": "text/plain", ".csv": "text/plain",
              ".edn": "text/plain"}
_STORE = web.AppKey("store", str)
_SCANNER = web.AppKey("scanner", Scanner)
_LOCK = web.AppKey("lock", asyncio.Lock)
_REFRESH = web.AppKey("refresh", float)
_PAGE = web.AppKey("page", str)


def check_assets() -> None:
    """The page's own files are there (a package installed without its package data has none)."""
    missing = [a for a in ASSETS + ("serve.html",) if not os.path.isfile(os.path.join(STATIC, a))]
    if missing:
        raise NotAStore(f"this eoslab installation lacks pipeline/static/{missing[0]} (reinstall eoslab "
                        f"with its package data, e.g. pip install -e .)")


async def _scan(request: web.Request) -> dict:
    app = request.app
    async with app[_LOCK]:         # one scan at a time; the scanner's cache is not shared across threads
        return await asyncio.get_running_loop().run_in_executor(None, app[_SCANNER].scan)


def _embed(data: dict) -> str:
    """JSON safe inside <script type=application/json>: no '</' and no '<!--' can end or open anything."""
    return json.dumps(data, default=str).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


async def page(request: web.Request) -> web.Response:
    tpl = request.app[_PAGE]
    data = await _scan(request)
    config = {"refresh_s": request.app[_REFRESH]}
    fill = {"STORE": html.escape(request.app[_STORE]), "DATA": _embed(data), "CONFIG": _embed(config)}
    body = re.sub(r"\{\{(STORE|DATA|CONFIG)\}\}", lambda m: fill[m.group(1)], tpl)     # one pass
    return web.Response(text=body, content_type="text/html", headers={"Cache-Control": "no-store"})


async def api_runs(request: web.Request) -> web.Response:
    data = await _scan(request)
    if request.query.get("since") == data["generation"]:          # the page has these rows already
        data = {"generation": data["generation"], "unchanged": True, "scanned": data["scanned"]}
    return web.json_response(data, dumps=lambda x: json.dumps(x, default=str),
                             headers={"Cache-Control": "no-store"})


async def static(request: web.Request) -> web.StreamResponse:
    name = request.match_info["name"]
    if name not in ASSETS:
        raise web.HTTPNotFound(text=f"no asset {name}\n")
    return web.FileResponse(os.path.join(STATIC, name), headers={"Cache-Control": "no-cache"})


def confine(store: str, rel: str) -> str | None:
    """The real path of store/rel when it lies inside the store (symlinks resolved), else None."""
    if "\x00" in rel or os.path.isabs(rel):
        return None
    real = os.path.realpath(os.path.join(store, rel))
    if real != store and os.path.commonpath([store, real]) != store:
        return None
    return real


async def store_file(request: web.Request) -> web.StreamResponse:
    store = request.app[_STORE]
    rel = request.match_info["path"]
    real = confine(store, rel)
    if real is None:
        raise web.HTTPForbidden(text="outside the store\n")
    if os.path.isdir(real) and os.path.isfile(os.path.join(real, "index.html")):
        real = os.path.join(real, "index.html")
    if not os.path.isfile(real):
        raise web.HTTPNotFound(text=f"no file {rel} in the store\n")
    ext = os.path.splitext(real)[1].lower()
    headers = {"Cache-Control": "no-cache"}
    if ext in TEXT_TYPES:
        headers["Content-Type"] = f"{TEXT_TYPES[ext]}; charset=utf-8"
    return web.FileResponse(real, headers=headers)


def make_app(store: str, refresh_s: float = 2.0) -> web.Application:
    real = check_store(store)
    check_assets()
    app = web.Application()
    app[_STORE] = real
    app[_SCANNER] = Scanner(real)
    app[_LOCK] = asyncio.Lock()
    app[_REFRESH] = float(refresh_s)
    with open(os.path.join(STATIC, "serve.html"), encoding="utf-8") as fh:
        app[_PAGE] = fh.read()
    app.router.add_get("/", page)
    app.router.add_get("/api/runs", api_runs)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/store/{path:.*}", store_file)
    return app


def bind(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


async def _serve(app: web.Application, sock: socket.socket, out) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.SockSite(runner, sock)
        await site.start()
        print(f"eoslab serve: {url_of(sock)} (store {app[_STORE]}; Ctrl-C stops)", file=out, flush=True)
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await runner.cleanup()


def serve(store: str, host: str = "127.0.0.1", port: int = 8765, refresh_s: float = 2.0, out=sys.stdout) -> int:
    app = make_app(store, refresh_s)
    sock = bind(host, port)
    try:
        asyncio.run(_serve(app, sock, out))
    finally:
        sock.close()
    return 0
