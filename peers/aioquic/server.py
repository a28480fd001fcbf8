"""quicbench's aioquic peer: an HTTP/3 server built on aioquic.

`quicbench serve --impl aioquic` runs this program (with the interpreter of
peers/aioquic/.venv) as its child and speaks to it over pipes:

* argv: --config FILE, a JSON object written by the Go wrapper (see
  `load_config`);
* stdout: one JSON object per line: {"ready": {...}} once it listens, then
  {"open": ADDR} when a connection from ADDR ("ip:port") starts and
  {"end": ADDR, "stats": {...}} when it ends (or the client closed it);
* stdin: {"stats": ADDR} lines ask for an open connection's statistics,
  answered with {"live": ADDR, "stats": {...}} (or {"live": ADDR} when no
  connection from ADDR is open: the client's close may have been lost);
  its end stops the server (the wrapper's quit).

It serves quicbench's resources with the same semantics and bytes as
quicbench's own server (endpoint/handlers.go, endpoint/content): /bytes/N,
/upload, /echo, /stream, /page/N/S, /page/N/S/I.png and /site/NAME/...

`server.py --check` builds a connection in memory, reads its transport
statistics through the private attributes this program relies on and prints
them: it fails when an aioquic release renamed them (a Go test runs it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import mimetypes
import os
import re
import socket
import sys
import time
import urllib.parse
import zlib
from fractions import Fraction

import aioquic
from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, ProtocolNegotiated, StreamReset
from aioquic.quic.logger import QuicFileLogger

# Limits, as endpoint/handlers.go.
MAX_ECHO = 16 << 20
MAX_SEGMENTS = 100000
MAX_SEGMENT_SIZE = 64 << 20
MAX_PAGE_OBJECTS = 10000
MAX_SIZE = 1 << 40

# A writer waits while its stream holds more than this many bytes not yet
# acknowledged (aioquic has no backpressure of its own: send_data buffers
# everything it is given).
SEND_BUFFER = 16 << 20
CHUNK = 1 << 20

# --- content: the byte pattern of endpoint/content --------------------------

BLOCK_SIZE = 1 << 16


def _make_block() -> bytes:
    out = bytearray(BLOCK_SIZE)
    x = 0x9E3779B97F4A7C15
    mask = (1 << 64) - 1
    for i in range(0, BLOCK_SIZE, 8):
        x ^= x >> 12
        x ^= (x << 25) & mask
        x ^= x >> 27
        v = (x * 0x2545F4914F6CDD1D) & mask
        out[i : i + 8] = v.to_bytes(8, "little")
    return bytes(out)


BLOCK = _make_block()
# CHUNK + BLOCK_SIZE bytes of pattern: any slice of up to CHUNK bytes at any
# offset is a plain slice of it.
PATTERN = memoryview(BLOCK * (CHUNK // BLOCK_SIZE + 1))


def pattern(off: int, n: int) -> bytes:
    """The pattern bytes at offsets off..off+n-1 (n <= CHUNK)."""
    start = off & (BLOCK_SIZE - 1)
    return bytes(PATTERN[start : start + n])


_UNITS = {
    "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}


def parse_size(s: str) -> int:
    """content.ParseSize: "512", "8KB", "1.5MiB", "10m" (powers of 1000)."""
    t = s.strip()
    if t.startswith("+"):
        raise ValueError(f"size {s!r}: want a number without a sign")
    i = len(t)
    while i > 0 and t[i - 1].isalpha():
        i -= 1
    if len(t) - i == 1 and t[i:] in "kKmMgGtT":
        t += "B"
    if t == "":
        raise ValueError("empty size")
    j = 0
    while j < len(t) and (t[j].isdigit() or t[j] in ".+-"):
        j += 1
    num, unit = t[:j], t[j:].strip()
    if num == "" or num.count(".") > 1 or any(c in "+-" for c in num[1:]) or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)", num):
        raise ValueError(f"malformed number {num!r} in size")
    mult = _UNITS.get(unit.lower(), 1 if unit == "" else None)
    if mult is None:
        raise ValueError(f"unknown size unit {unit!r}")
    r = Fraction(num) * mult
    if r < 0:
        raise ValueError("size must not be negative")
    if r.denominator != 1:
        raise ValueError(f"size {s!r} is not a whole number of bytes")
    if r > MAX_SIZE:
        raise ValueError(f"size {s!r} exceeds the maximum of 1 TiB")
    return int(r)


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(s: str) -> float:
    """Go's time.ParseDuration, in seconds ("50ms", "1.5s", "1m30s", "0")."""
    if s in ("0", "+0", "-0"):
        return 0.0
    m = re.fullmatch(r"([+-]?)((?:(?:\d+\.?\d*|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)", s)
    if not m:
        raise ValueError(f"invalid duration {s!r}")
    total = 0.0
    for num, unit in re.findall(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", m.group(2)):
        total += float(num) * _DURATION_UNITS[unit]
    return -total if m.group(1) == "-" else total


def splitmix64(x: int) -> int:
    mask = (1 << 64) - 1
    x = (x + 0x9E3779B97F4A7C15) & mask
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


class Page:
    """content.Page: N objects of a size or of sizes in a range."""

    def __init__(self, n: str, size: str) -> None:
        if not re.fullmatch(r"[+-]?\d+", n) or not 0 <= int(n) <= MAX_PAGE_OBJECTS:
            raise ValueError(f"page object count {n!r}: want an integer from 0 to {MAX_PAGE_OBJECTS}")
        self.objects = int(n)
        lo, sep, hi = size.partition("-")
        if not sep:
            self.min = self.max = parse_size(size)
        else:
            self.max = parse_size(hi)
            self.min = parse_size(lo)
            if self.min > self.max:
                raise ValueError(f"page object size range {size!r}: lower bound above upper bound")

    def object_size(self, i: int) -> int:
        if self.min == self.max:
            return self.min
        return self.min + splitmix64(i) % (self.max - self.min + 1)

    def html(self, page_path: str) -> bytes:
        title = f"quicbench page: {self.objects} objects"
        out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n', '<link rel="icon" href="data:,">\n']
        out.append(f"<title>{go_escape(title)}</title></head>\n<body>\n<h1>{go_escape(title)}</h1>\n")
        base = page_path.rstrip("/")
        for i in range(self.objects):
            out.append(f'<img src="{go_escape(f"{base}/{i}.png")}" width="1" height="1" alt="">\n')
        out.append("</body></html>\n")
        return "".join(out).encode()


def go_escape(s: str) -> str:
    """html.EscapeString of Go."""
    return s.replace("&", "&amp;").replace("'", "&#39;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&#34;")


# --- connection statistics from aioquic's private recovery state -------------


class Counters:
    """What aioquic does not count itself: packets sent, lost (and their
    bytes) and probe timeouts, counted by wrapping its recovery methods."""

    def __init__(self) -> None:
        self.sent = 0
        self.lost = 0
        self.lost_bytes = 0
        self.ptos = 0


def install_counters(quic: QuicConnection) -> Counters:
    """Wraps the recovery methods of one connection (private API of aioquic
    1.7.2: QuicPacketRecovery.on_packet_sent, _on_packets_lost and
    on_loss_detection_timeout)."""
    c = Counters()
    loss = quic._loss
    orig_sent = loss.on_packet_sent
    orig_lost = loss._on_packets_lost
    orig_timeout = loss.on_loss_detection_timeout

    def on_packet_sent(*, packet, space):
        c.sent += 1
        return orig_sent(packet=packet, space=space)

    def on_packets_lost(*, packets, congestion_event=True, **kw):
        packets = list(packets)
        if congestion_event:  # real losses, not data a PTO sends again
            c.lost += len(packets)
            c.lost_bytes += sum(p.sent_bytes for p in packets)
        return orig_lost(packets=packets, congestion_event=congestion_event, **kw)

    def on_loss_detection_timeout(*, now):
        before = loss._pto_count
        orig_timeout(now=now)
        if loss._pto_count > before:
            c.ptos += 1

    loss.on_packet_sent = on_packet_sent
    loss._on_packets_lost = on_packets_lost
    loss.on_loss_detection_timeout = on_loss_detection_timeout
    return c


def read_stats(quic: QuicConnection, c: Counters) -> dict:
    """The transport statistics of a connection, from aioquic's private
    recovery state (QuicConnection._loss: _rtt_smoothed, _rtt_variance,
    _rtt_min, _cc.congestion_window, _cc.ssthresh, bytes_in_flight)."""
    loss = quic._loss
    rtt_min = loss._rtt_min
    return {
        "cc": quic._configuration.congestion_control_algorithm,
        "srtt_ms": loss._rtt_smoothed * 1000,
        "rttvar_ms": loss._rtt_variance * 1000,
        "min_rtt_ms": 0.0 if math.isinf(rtt_min) else rtt_min * 1000,
        "cwnd": int(loss._cc.congestion_window),
        "ssthresh": int(loss._cc.ssthresh or 0),
        "bytes_in_flight": int(loss.bytes_in_flight),
        "packets_sent": c.sent,
        "packets_lost": c.lost,
        "bytes_lost": c.lost_bytes,
        "pto_count": c.ptos,
    }


# --- output to the wrapper ----------------------------------------------------


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def addr_str(addr) -> str:
    host, port = addr[0], addr[1]
    if host.startswith("::ffff:"):
        host = host[len("::ffff:") :]
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


# --- HTTP/3 ------------------------------------------------------------------


class Request:
    def __init__(self, stream_id: int, headers: dict, ended: bool) -> None:
        self.stream_id = stream_id
        self.headers = headers
        self.done = asyncio.get_running_loop().create_future()
        self.body = bytearray()  # kept for /echo only
        self.keep_body = False
        self.bytes = 0
        self.first = 0.0
        self.last = 0.0
        if ended:
            self.done.set_result(None)

    def data(self, data: bytes, ended: bool) -> None:
        if data:
            now = time.monotonic()
            if self.bytes == 0:
                self.first = now
            self.last = now
            self.bytes += len(data)
            if self.keep_body and len(self.body) <= MAX_ECHO:
                self.body += data
        if ended and not self.done.done():
            self.done.set_result(None)


class StreamGone(Exception):
    pass


class Connection(QuicConnectionProtocol):
    def __init__(self, *args, app, **kwargs):
        super().__init__(*args, **kwargs)
        self.app = app
        self.h3: H3Connection | None = None
        self.requests: dict[int, Request] = {}
        self.tasks: set[asyncio.Task] = set()
        self.wake = asyncio.Event()
        self.addr: str | None = None
        self.reported = False
        self.counters = install_counters(self._quic)

    def datagram_received(self, data, addr) -> None:
        if self.addr is None:
            self.addr = addr_str(addr)
            self.app.open[self.addr] = self
            emit({"open": self.addr})
        super().datagram_received(data, addr)
        self.wake.set()
        # The client closed the connection: its statistics are final now,
        # not only after the draining period (3 PTOs) ends.
        if self._quic._close_event is not None:
            self.report()

    def report(self) -> None:
        if self.reported or self.addr is None:
            return
        self.reported = True
        if self.app.open.get(self.addr) is self:
            del self.app.open[self.addr]
        emit({"end": self.addr, "stats": read_stats(self._quic, self.counters)})

    def live(self) -> dict:
        """The statistics of the open connection, now."""
        return read_stats(self._quic, self.counters)

    def quic_event_received(self, event) -> None:
        if isinstance(event, ProtocolNegotiated):
            if event.alpn_protocol in H3_ALPN:
                self.h3 = H3Connection(self._quic)
        elif isinstance(event, ConnectionTerminated):
            self.report()
            for r in self.requests.values():
                if not r.done.done():
                    r.done.set_exception(StreamGone())
            self.wake.set()
        elif isinstance(event, StreamReset):
            r = self.requests.get(event.stream_id)
            if r is not None and not r.done.done():
                r.done.set_exception(StreamGone())
        if self.h3 is None:
            return
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                headers = {}
                for k, v in ev.headers:
                    headers.setdefault(k.decode(), v.decode(errors="replace"))
                req = Request(ev.stream_id, headers, ev.stream_ended)
                self.requests[ev.stream_id] = req
                t = asyncio.ensure_future(self.handle(req))
                self.tasks.add(t)
                t.add_done_callback(self.tasks.discard)
            elif isinstance(ev, DataReceived):
                req = self.requests.get(ev.stream_id)
                if req is not None:
                    req.data(ev.data, ev.stream_ended)

    # sending

    def buffered(self, sid: int) -> int:
        stream = self._quic._streams.get(sid)
        if stream is None:
            raise StreamGone()
        return len(stream.sender._buffer)

    async def room(self, sid: int) -> None:
        """Waits until the stream's send buffer has room (backpressure)."""
        while self.buffered(sid) > SEND_BUFFER:
            if self._quic._close_event is not None:
                raise StreamGone()
            self.wake.clear()
            await self.wake.wait()

    def headers(self, sid: int, status: int, fields: list[tuple[str, str]], end: bool = False) -> None:
        hs = [(b":status", str(status).encode()), (b"cache-control", b"no-store")]
        hs += [(k.encode(), v.encode()) for k, v in fields]
        self.h3.send_headers(sid, hs, end_stream=end)
        self.transmit()

    async def send(self, sid: int, data: bytes, end: bool = False) -> None:
        await self.room(sid)
        self.h3.send_data(sid, data, end_stream=end)
        self.transmit()

    async def respond(self, sid: int, status: int, body: bytes, ctype: str) -> None:
        self.headers(sid, status, [("content-type", ctype), ("content-length", str(len(body)))], end=not body)
        if body:
            await self.send(sid, body, end=True)

    async def error(self, sid: int, status: int, msg: str) -> None:
        await self.respond(sid, status, (msg + "\n").encode(), "text/plain; charset=utf-8")

    async def send_pattern(self, sid: int, off: int, n: int, end: bool) -> None:
        done = 0
        while done < n:
            m = min(CHUNK, n - done)
            await self.send(sid, pattern(off + done, m), end=end and done + m == n)
            done += m
        if n == 0 and end:
            await self.send(sid, b"", end=True)

    # resources

    async def handle(self, req: Request) -> None:
        sid = req.stream_id
        method = req.headers.get(":method", "GET")
        raw = req.headers.get(":path", "/")
        path_raw, _, query = raw.partition("?")
        path = urllib.parse.unquote(path_raw)
        req.keep_body = path == "/echo" and method in ("POST", "PUT")
        try:
            await req.done  # the request body, read (or drained) first
            await self.route(req, method, path, query)
        except StreamGone:
            pass
        except Exception as e:  # a bug: say it, keep serving
            print(f"aioquic peer: {method} {raw}: {e!r}", file=sys.stderr, flush=True)
            try:
                self._quic.reset_stream(sid, 0x102)  # H3_INTERNAL_ERROR
                self.transmit()
            except Exception:
                pass
        finally:
            self.requests.pop(sid, None)

    async def route(self, req: Request, method: str, path: str, query: str) -> None:
        sid = req.stream_id
        if path == "/":
            await self.respond(sid, 200, INDEX, "text/plain; charset=utf-8")
            return
        if path == "/upload":
            if method not in ("POST", "PUT"):
                self.headers(sid, 405, [("allow", "POST, PUT"), ("content-type", "text/plain; charset=utf-8")])
                await self.send(sid, b"/upload takes a POST or PUT body\n", end=True)
                return
            nanos = int((req.last - req.first) * 1e9) if req.bytes else 0
            body = (json.dumps({"bytes": req.bytes, "nanos": nanos}, separators=(",", ":")) + "\n").encode()
            await self.respond(sid, 200, body, "application/json")
            return
        if path == "/echo":
            if method not in ("POST", "PUT"):
                await self.respond(sid, 200, b"ok\n", "application/octet-stream")
            elif req.bytes > MAX_ECHO:
                await self.error(sid, 413, "/echo takes at most 16 MiB")
            else:
                await self.respond(sid, 200, bytes(req.body), "application/octet-stream")
            return
        if path == "/stream":
            await self.stream(sid, query)
            return
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "bytes":
            try:
                n = parse_size(parts[2])
            except ValueError as e:
                await self.error(sid, 400, f"/bytes/N: {e}")
                return
            head = method == "HEAD"
            self.headers(sid, 200, [("content-type", "application/octet-stream"), ("content-length", str(n))], end=head)
            if not head:
                await self.send_pattern(sid, 0, n, end=True)
            return
        if len(parts) in (4, 5) and parts[1] == "page":
            await self.page(sid, method, path, parts)
            return
        if len(parts) >= 3 and parts[1] == "site" and parts[2] in self.app.sites:
            await self.site(sid, method, path, parts)
            return
        await self.error(sid, 404, "404 page not found")

    async def stream(self, sid: int, query: str) -> None:
        q = urllib.parse.parse_qs(query, keep_blank_values=True)
        get = lambda k: q.get(k, [""])[0]
        segments, interval, size = 20, 0.05, 1000
        try:
            if get("segments"):
                v = get("segments")
                if not re.fullmatch(r"[+-]?\d+", v) or not 1 <= int(v) <= MAX_SEGMENTS:
                    raise ValueError(f"segments={v!r}: want an integer from 1 to {MAX_SEGMENTS}")
                segments = int(v)
            if get("interval"):
                v = get("interval")
                try:
                    interval = parse_duration(v)
                except ValueError:
                    interval = -1
                if not 0 <= interval <= 60:
                    raise ValueError(f"interval={v!r}: want a duration from 0 to 1m, e.g. 50ms")
            if get("size"):
                v = get("size")
                try:
                    size = parse_size(v)
                except ValueError:
                    size = 0
                if not 1 <= size <= MAX_SEGMENT_SIZE:
                    raise ValueError(f"size={v!r}: want a size from 1 B to 64 MiB")
        except ValueError as e:
            await self.error(sid, 400, f"/stream: {e}")
            return
        self.headers(sid, 200, [("content-type", "application/octet-stream"), ("x-content-type-options", "nosniff")])
        loop = asyncio.get_running_loop()
        start = loop.time()
        off = 0
        for i in range(segments):
            if i > 0:
                # Segment i is due at start + i*interval: no drift accumulates.
                delay = start + i * interval - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            await self.send_pattern(sid, off, size, end=i == segments - 1)
            off += size

    async def page(self, sid: int, method: str, path: str, parts: list[str]) -> None:
        try:
            p = Page(parts[2], parts[3])
        except ValueError as e:
            what = "/page/N/S" if len(parts) == 4 else "/page/N/S/I.png"
            await self.error(sid, 400, f"{what}: {e}")
            return
        if len(parts) == 4:
            await self.respond(sid, 200, p.html(path), "text/html; charset=utf-8")
            return
        obj = parts[4]
        m = re.fullmatch(r"([+-]?\d+)\.png", obj)
        if not m or not 0 <= int(m.group(1)) < p.objects:
            await self.error(sid, 404, f"/page/N/S/I.png: object {obj!r}: want I.png with 0 <= I < {p.objects}")
            return
        size = p.object_size(int(m.group(1)))
        png = size >= self.app.min_png
        self.headers(sid, 200, [("content-type", "image/png" if png else "application/octet-stream"), ("content-length", str(size))], end=method == "HEAD")
        if method == "HEAD":
            return
        if not png:
            await self.send_pattern(sid, 0, size, end=True)
            return
        pad = size - self.app.min_png
        crc = zlib.crc32(b"qbPd")
        await self.send(sid, self.app.png_head + pad.to_bytes(4, "big") + b"qbPd")
        done = 0
        while done < pad:
            m = min(CHUNK, pad - done)
            chunk = pattern(done, m)
            crc = zlib.crc32(chunk, crc)
            await self.send(sid, chunk)
            done += m
        await self.send(sid, crc.to_bytes(4, "big") + self.app.png_tail, end=True)

    async def site(self, sid: int, method: str, path: str, parts: list[str]) -> None:
        """A static file under a site's directory; like os.Root, no path
        (.., symbolic links) leaves the directory."""
        root = self.app.sites[parts[2]]
        rel = "/".join(parts[3:])
        target = os.path.realpath(os.path.join(root, rel))
        if any(s == ".." for s in parts[3:]) or (target != root and not target.startswith(root + os.sep)):
            await self.error(sid, 404, "404 page not found")
            return
        if os.path.isdir(target):
            if not path.endswith("/"):
                self.headers(sid, 301, [("location", parts[-1] + "/"), ("content-length", "0")], end=True)
                return
            target = os.path.join(target, "index.html")
        if not os.path.isfile(target):
            await self.error(sid, 404, "404 page not found")
            return
        ctype = mimetypes.guess_type(target)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            ctype += "; charset=utf-8"
        with open(target, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self.headers(sid, 200, [("content-type", ctype), ("content-length", str(size))], end=method == "HEAD" or size == 0)
            if method == "HEAD" or size == 0:
                return
            sent = 0
            while sent < size:
                chunk = f.read(min(CHUNK, size - sent))
                if not chunk:
                    raise StreamGone()  # the file shrank
                sent += len(chunk)
                await self.send(sid, chunk, end=sent >= size)


INDEX = b"""quicbench server (aioquic peer). Resources:
  /bytes/N   /upload   /echo   /stream?segments=K&interval=D&size=S
  /page/N/S  /page/N/S/I.png   /site/NAME/...
"""


class App:
    def __init__(self, cfg: dict) -> None:
        self.sites = {name: os.path.realpath(d) for name, d in (cfg.get("sites") or {}).items()}
        self.png_head = bytes.fromhex(cfg["png_head"])
        self.png_tail = bytes.fromhex(cfg["png_tail"])
        self.min_png = len(self.png_head) + 12 + len(self.png_tail)
        self.open: dict[str, Connection] = {}  # open connections by client address, for stats lines


def load_config(path: str) -> dict:
    """The wrapper's configuration: host, port, cert, key (PEM files),
    cc ("reno" or "cubic"), max_datagram_size, max_data, max_stream_data,
    socket_buffer (bytes), qlog_dir and keylog ("" = off), sites
    ({NAME: DIR}), png_head and png_tail (hex, from endpoint/content)."""
    with open(path) as f:
        return json.load(f)


def set_buffer(sock: socket.socket, size: int) -> None:
    """Raises the UDP buffers: SO_RCVBUFFORCE as root (beyond rmem_max),
    else SO_RCVBUF (capped by rmem_max)."""
    for force, plain in ((33, socket.SO_RCVBUF), (32, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, plain, size)


async def main(cfg: dict) -> None:
    conf = QuicConfiguration(
        is_client=False,
        alpn_protocols=H3_ALPN,
        congestion_control_algorithm=cfg["cc"],
        max_datagram_size=cfg["max_datagram_size"],
        max_data=cfg["max_data"],
        max_stream_data=cfg["max_stream_data"],
        idle_timeout=120.0,
    )
    conf.load_cert_chain(cfg["cert"], cfg["key"])
    if cfg.get("qlog_dir"):
        conf.quic_logger = QuicFileLogger(cfg["qlog_dir"])
    if cfg.get("keylog"):
        conf.secrets_log_file = open(cfg["keylog"], "a")
    app = App(cfg)
    server = await serve(
        cfg["host"], cfg["port"], configuration=conf,
        create_protocol=lambda *a, **kw: Connection(*a, app=app, **kw),
    )
    sock = server._transport.get_extra_info("socket")
    set_buffer(sock, cfg["socket_buffer"])
    emit({"ready": {
        "version": aioquic.__version__,
        "port": sock.getsockname()[1],
        "cc": conf.congestion_control_algorithm,
        "max_datagram_size": conf.max_datagram_size,
        "rcvbuf": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    }})
    loop = asyncio.get_running_loop()
    stdin_closed = loop.create_future()
    pending = bytearray()

    def on_stdin() -> None:
        chunk = os.read(sys.stdin.fileno(), 4096)
        if not chunk:
            loop.remove_reader(sys.stdin.fileno())
            if not stdin_closed.done():
                stdin_closed.set_result(None)
            return
        pending.extend(chunk)
        while (nl := pending.find(b"\n")) >= 0:
            line = bytes(pending[:nl])
            del pending[:nl + 1]
            answer(app, line)

    loop.add_reader(sys.stdin.fileno(), on_stdin)
    await stdin_closed
    server.close()


def answer(app: "App", line: bytes) -> None:
    """Answers a {"stats": ADDR} line of the wrapper; ignores other lines."""
    try:
        req = json.loads(line)
    except ValueError:
        return
    if not isinstance(req, dict) or not isinstance(req.get("stats"), str):
        return
    addr = req["stats"]
    conn = app.open.get(addr)
    if conn is None:
        emit({"live": addr})
    else:
        emit({"live": addr, "stats": conn.live()})


def check() -> None:
    """Exercises the private-attribute accessors on an in-memory connection
    and prints what they read."""
    quic = QuicConnection(configuration=QuicConfiguration(is_client=True, congestion_control_algorithm="cubic"))
    c = install_counters(quic)
    quic.connect(("127.0.0.1", 4433), now=0.0)
    sent = quic.datagrams_to_send(now=0.0)
    quic.handle_timer(now=quic.get_timer() or 1.0)  # a PTO: nothing was answered
    stats = read_stats(quic, c)
    if not sent or stats["packets_sent"] < 1 or stats["cwnd"] <= 0 or stats["pto_count"] < 1:
        raise SystemExit(f"aioquic {aioquic.__version__}: statistics accessors read nothing: {stats}")
    print(json.dumps({"version": aioquic.__version__, "stats": stats}))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", help="the wrapper's JSON configuration file")
    ap.add_argument("--check", action="store_true", help="check the statistics accessors and exit")
    a = ap.parse_args()
    if a.check:
        check()
    elif a.config:
        asyncio.run(main(load_config(a.config)))
    else:
        ap.error("give --config FILE (quicbench serve --impl aioquic writes it) or --check")
