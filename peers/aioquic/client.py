#!/usr/bin/env python3
"""quicbench's aioquic HTTP/3 client (client: aioquic in a plan).

quicbench's agent runs this program inside the client namespace, once per
sample (Go package aioquicclient). It reads one JSON request on stdin (or
from the file named by its only argument), runs the requests over one
HTTP/3 connection with aioquic, and prints one JSON record on stdout: the
connection's and every request's timeline in nanoseconds from the sample's
start, as quicbench's built-in client records them (endpoint.ConnTiming,
endpoint.RequestTiming), what the connection negotiated and its transport
statistics read from aioquic's recovery state. The metrics are derived from
that record by quicbench (package workload), with the same code as the
built-in client's, so that both clients' numbers mean the same.

Request fields (all times in seconds):
  host, port, server_name, ca_pem   the server and the CA to verify it with
  paths, repeat, parallel           requests: the path list repeat times,
                                    at most parallel streams in flight
  upload                            POST that many bytes with each request
  warm                              complete one unmeasured /echo first
  handshake_timeout, first_byte_timeout, idle_timeout, timeout
  congestion_control                "reno" or "cubic" (aioquic's)
  max_datagram_size, max_data, max_stream_data
  rcvbuf                            SO_RCVBUF to ask for; 0 leaves the default
  qlog_dir                          write a qlog per connection there
  keylog                            append TLS secrets (NSS key log) there

Output: {"version" ("aioquic X.Y.Z"), "config", "measure_start", "measure_end",
"conns", "requests", "error"}; "error" is absent on success. The program
exits 0 whenever it printed a record (failed samples included) and 2 when
the request is unusable.

aioquic exposes no statistics API: the recovery state is read from private
attributes (recovery_stats, instrument), which the pinned version
(PINNED_VERSION) has; test_client.py fails when they change.
"""

import asyncio
import inspect
import json
import os
import resource
import socket
import sys
import time

import aioquic
from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted
from aioquic.quic.logger import QuicFileLogger

PINNED_VERSION = "1.7.2"

# Upload pieces handed to aioquic at once, and the unacknowledged bytes a
# stream may hold before the feeder waits: aioquic has no backpressure.
UPLOAD_PIECE = 256 << 10
UPLOAD_BUFFERED = 4 << 20

QUIC_VERSIONS = {0x00000001: "v1", 0x6B3343CF: "v2"}


class RequestError(Exception):
    """A request failed; the message says which and why."""


def instrument(quic):
    """Counts what aioquic's recovery does not: packets sent, packets and
    bytes declared lost, packets whose frames a probe timeout sent again,
    probe timeouts and loss-triggered window reductions. It wraps the
    methods of this connection's recovery object (private in aioquic), so
    the counting stays per connection. Returns the counter dict."""
    loss = quic._loss
    counts = {
        "packets_sent": 0,
        "packets_lost": 0,
        "bytes_lost": 0,
        "rescheduled": 0,
        "pto_count": 0,
        "congestion_events": 0,
    }
    on_sent = loss.on_packet_sent
    on_lost = loss._on_packets_lost
    on_timeout = loss.on_loss_detection_timeout

    def packet_sent(*, packet, space):
        counts["packets_sent"] += 1
        on_sent(packet=packet, space=space)

    def packets_lost(*, packets, congestion_event=True, **kw):
        packets = list(packets)
        if congestion_event:
            counts["packets_lost"] += len(packets)
            counts["bytes_lost"] += sum(p.sent_bytes for p in packets)
        else:
            counts["rescheduled"] += len(packets)
        cwnd = loss._cc.congestion_window
        on_lost(packets=packets, congestion_event=congestion_event, **kw)
        if congestion_event and loss._cc.congestion_window < cwnd:
            counts["congestion_events"] += 1

    def loss_detection_timeout(*, now):
        before = loss._pto_count
        on_timeout(now=now)
        if loss._pto_count > before:
            counts["pto_count"] += 1

    loss.on_packet_sent = packet_sent
    loss._on_packets_lost = packets_lost
    loss.on_loss_detection_timeout = loss_detection_timeout
    return counts


def recovery_stats(quic, counts, algo):
    """The connection's transport statistics (model.TransportStats' JSON
    field names, plus latest_rtt_ms and bytes_in_flight) from aioquic's
    recovery state and the counters of instrument."""
    loss = quic._loss
    cc = loss._cc
    ms = 1000.0
    min_rtt = loss._rtt_min
    return {
        "Kind": "quic",
        "Side": "client",
        "CongestionAlgo": algo,
        "SmoothedRTTms": loss._rtt_smoothed * ms,
        "RTTVarms": loss._rtt_variance * ms,
        "MinRTTms": 0.0 if min_rtt == float("inf") else min_rtt * ms,
        "CwndBytes": int(cc.congestion_window),
        "SsthreshBytes": int(cc.ssthresh or 0),
        "PacketsSent": counts["packets_sent"],
        "PacketsLost": counts["packets_lost"],
        "Retransmits": counts["packets_lost"] + counts["rescheduled"],
        "BytesRetransmitted": counts["bytes_lost"],
        "DeliveryRateBps": 0,
        "CongestionEvents": counts["congestion_events"],
        "PTOCount": counts["pto_count"],
        "CongestionStateChanges": -1,
        "latest_rtt_ms": loss._rtt_latest * ms,
        "bytes_in_flight": int(cc.bytes_in_flight),
    }


class Request:
    """One request in flight and its record (endpoint.RequestTiming)."""

    def __init__(self, path, conn, upload):
        self.upload = upload
        self.t = {
            "path": path,
            "conn": conn,
            "status": 0,
            "start": 0,
            "sent": 0,
            "first_byte": 0,
            "end": 0,
            "bytes": 0,
            "upload_bytes": 0,
            "chunks": [],
        }
        self.length = None  # content-length, when sent
        self.body = bytearray()  # kept for /upload's report
        self.done = asyncio.get_running_loop().create_future()


class Client(QuicConnectionProtocol):
    """An HTTP/3 connection that records its requests' timelines."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.requests = {}
        self.now = None  # the sample's clock, set by the caller
        self.handshake = 0
        self.progress = 0
        self.closed_error = None

    def quic_event_received(self, event):
        t = self.now()
        if isinstance(event, HandshakeCompleted):
            self.handshake = t
        elif isinstance(event, ConnectionTerminated):
            self.closed_error = "connection closed: error 0x%x %s" % (
                event.error_code,
                event.reason_phrase,
            )
            for rq in self.requests.values():
                if not rq.done.done():
                    rq.done.set_exception(RequestError(self.closed_error))
        for ev in self.h3.handle_event(event):
            rq = self.requests.get(getattr(ev, "stream_id", None))
            if rq is None:
                continue
            self.progress = t
            if isinstance(ev, HeadersReceived):
                self.headers(rq, ev, t)
            elif isinstance(ev, DataReceived) and ev.data:
                rq.t["chunks"].append([t, len(ev.data)])
                rq.t["bytes"] += len(ev.data)
                if rq.t["first_byte"] == 0:
                    rq.t["first_byte"] = t
                if rq.upload:
                    rq.body += ev.data
            if getattr(ev, "stream_ended", False) and not rq.done.done():
                rq.t["end"] = t
                rq.done.set_result(None)

    def headers(self, rq, ev, t):
        if rq.t["first_byte"] == 0:
            rq.t["first_byte"] = t  # the response header, as net/http's trace
        for k, v in ev.headers:
            if k == b":status":
                rq.t["status"] = int(v)
            elif k == b"content-length":
                rq.length = int(v)

    async def request(self, rq, authority, lim):
        """Sends rq and waits for its response; lim is (first byte, idle)."""
        sid = self._quic.get_next_available_stream_id()
        self.requests[sid] = rq
        method = b"POST" if rq.upload else b"GET"
        hdrs = [
            (b":method", method),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", rq.t["path"].encode()),
            (b"user-agent", b"quicbench-aioquic"),
        ]
        if rq.upload:
            hdrs += [
                (b"content-type", b"application/octet-stream"),
                (b"content-length", str(rq.upload).encode()),
            ]
        rq.t["start"] = self.now()
        self.progress = rq.t["start"]
        self.h3.send_headers(sid, hdrs, end_stream=not rq.upload)
        self.transmit()
        if rq.upload:
            await self.send_body(sid, rq, lim[1])
        rq.t["sent"] = self.now()
        await self.wait(rq, lim)
        if rq.t["status"] < 200 or rq.t["status"] > 299:
            raise RequestError("h3 %s: status %d" % (rq.t["path"], rq.t["status"]))
        if rq.length is not None and rq.t["bytes"] != rq.length:
            rq.t["end"] = 0
            raise RequestError(
                "h3 %s: truncated body: %d of %d bytes"
                % (rq.t["path"], rq.t["bytes"], rq.length)
            )
        if rq.upload and rq.t["path"].startswith("/upload"):
            try:
                rep = json.loads(bytes(rq.body))
                got, nanos = int(rep["bytes"]), int(rep["nanos"])
            except (ValueError, KeyError, TypeError) as e:
                raise RequestError("/upload answered %r: %s" % (bytes(rq.body[:200]), e))
            if got != rq.upload:
                raise RequestError("server received %d of %d upload bytes" % (got, rq.upload))
            rq.t["server_upload_ns"] = nanos
        rq.body = bytearray()

    async def send_body(self, sid, rq, idle):
        zeros = bytes(UPLOAD_PIECE)
        left = rq.upload
        sender = self._quic._streams[sid].sender
        while left > 0:
            while len(sender._buffer) >= UPLOAD_BUFFERED:
                if self.closed_error:
                    raise RequestError(self.closed_error)
                if (self.now() - self.progress) / 1e9 > idle:
                    raise RequestError("h3 %s: no upload progress for %gs" % (rq.t["path"], idle))
                await asyncio.sleep(0.002)
            n = min(left, UPLOAD_PIECE)
            left -= n
            self.h3.send_data(sid, zeros[:n], end_stream=left == 0)
            rq.t["upload_bytes"] += n
            self.progress = self.now()
            self.transmit()

    async def wait(self, rq, lim):
        """Waits for rq's end while the connection makes progress."""
        while True:
            limit = lim[0] if rq.t["first_byte"] == 0 else lim[1]
            left = limit - (self.now() - self.progress) / 1e9
            if left <= 0:
                phase = "first byte" if rq.t["first_byte"] == 0 else "idle"
                raise RequestError(
                    "h3 %s: timeout (%s, %gs without progress)" % (rq.t["path"], phase, limit)
                )
            try:
                await asyncio.wait_for(asyncio.shield(rq.done), min(left, 1.0))
                return
            except asyncio.TimeoutError:
                continue


def source_address(host, port):
    """The local address the kernel picks towards host:port (no packet is
    sent): aioquic's socket is bound to the wildcard address."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.connect((host, port))
        return s.getsockname()[0]


def set_rcvbuf(sock, want):
    """Raises the socket's receive buffer to want bytes (SO_RCVBUFFORCE when
    allowed, else SO_RCVBUF, which rmem_max caps) and returns what the
    kernel reports (twice the usable size, by Linux's bookkeeping)."""
    if want > 0:
        try:
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), want)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, want)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


def negotiated(quic):
    tls = quic.tls
    cipher = ""
    if tls.key_schedule is not None:
        cipher = "TLS_" + tls.key_schedule.cipher_suite.name
    v = quic._version
    return {
        "ALPN": tls.alpn_negotiated or "",
        "HTTPVersion": "HTTP/3.0" if tls.alpn_negotiated == "h3" else "",
        "TLSVersion": "TLS 1.3",
        "Cipher": cipher,
        "QUICVersion": QUIC_VERSIONS.get(v, "0x%08x" % v if v else ""),
        "Resumed": False,
        "ZeroRTT": False,
    }


def check_request(req):
    """Validates the request; returns an error message or None."""
    need = {"host": str, "port": int, "paths": list}
    for k, ty in need.items():
        if not isinstance(req.get(k), ty):
            return "request field %r missing or not a %s" % (k, ty.__name__)
    if not req["paths"] or not all(isinstance(p, str) and p.startswith("/") for p in req["paths"]):
        return "paths must be a non-empty list of paths starting with /"
    if req.get("congestion_control", "cubic") not in ("reno", "cubic"):
        return "congestion_control must be reno or cubic (aioquic's)"
    for k in ("repeat", "parallel", "upload", "rcvbuf", "max_datagram_size"):
        if not isinstance(req.get(k, 0), int) or req.get(k, 0) < 0:
            return "%s must be a non-negative integer" % k
    return None


async def run(req, out, t0):
    def now():
        return time.monotonic_ns() - t0

    host, port = req["host"], req["port"]
    algo = req.get("congestion_control", "cubic")
    cfg = QuicConfiguration(
        alpn_protocols=H3_ALPN,
        is_client=True,
        congestion_control_algorithm=algo,
        max_datagram_size=req.get("max_datagram_size") or 1452,
        max_data=req.get("max_data") or 15 << 20,
        max_stream_data=req.get("max_stream_data") or 6 << 20,
        idle_timeout=max(req.get("idle_timeout", 10.0), 1.0) * 3,
        server_name=req.get("server_name") or host,
    )
    if req.get("ca_pem"):
        cfg.load_verify_locations(cadata=req["ca_pem"].encode())
    if req.get("qlog_dir"):
        os.makedirs(req["qlog_dir"], exist_ok=True)
        cfg.quic_logger = QuicFileLogger(req["qlog_dir"])
    if req.get("keylog"):
        cfg.secrets_log_file = open(req["keylog"], "a")
    out["config"] = {
        "congestion_control": algo,
        "max_datagram_size": cfg.max_datagram_size,
        "max_data": cfg.max_data,
        "max_stream_data": cfg.max_stream_data,
        "rcvbuf_requested": req.get("rcvbuf", 0),
    }
    lim = (req.get("first_byte_timeout", 15.0), req.get("idle_timeout", 10.0))
    authority = "%s:%d" % (req.get("server_name") or host, port)
    if ":" in host:
        authority = "[%s]:%d" % (host, port)

    conn = {"local": "", "remote": "%s:%d" % (host, port), "start": now()}
    out["conns"].append(conn)
    async with connect(host, port, configuration=cfg, create_protocol=Client, wait_connected=False) as proto:
        proto.now = now
        counts = instrument(proto._quic)
        sock = proto._transport.get_extra_info("socket")
        out["config"]["rcvbuf_bytes"] = set_rcvbuf(sock, req.get("rcvbuf", 0))
        lport = sock.getsockname()[1]
        src = source_address(host, port)
        conn["local"] = ("[%s]:%d" if ":" in src else "%s:%d") % (src, lport)
        proto.transmit()
        try:
            await asyncio.wait_for(proto.wait_connected(), req.get("handshake_timeout", 10.0))
        except asyncio.TimeoutError:
            raise RequestError("handshake timeout (%gs)" % req.get("handshake_timeout", 10.0))
        except ConnectionError as e:
            raise RequestError("handshake failed: %s" % (proto.closed_error or e))
        conn["connected"] = conn["handshake"] = proto.handshake or now()
        conn["negotiated"] = negotiated(proto._quic)
        try:
            if req.get("warm"):
                await proto.request(Request("/echo", 0, 0), authority, lim)
            reqs = [
                Request(p, 0, req.get("upload", 0))
                for _ in range(max(req.get("repeat", 1), 1))
                for p in req["paths"]
            ]
            out["measure_start"] = now()
            queue = list(reversed(reqs))

            async def worker():
                while queue:
                    rq = queue.pop()
                    out["requests"].append(rq.t)
                    try:
                        await proto.request(rq, authority, lim)
                    except RequestError as e:
                        rq.t["error"] = str(e)
                        raise

            workers = [asyncio.ensure_future(worker()) for _ in range(min(max(req.get("parallel", 1), 1), len(reqs)))]
            try:
                await asyncio.gather(*workers)
            finally:
                for w in workers:
                    w.cancel()
                out["measure_end"] = now()
        finally:
            conn["requests"] = sum(1 for t in out["requests"] if not t.get("error"))
            conn["transport"] = recovery_stats(proto._quic, counts, algo)
            conn["closed"] = now()


def self_check():
    """Exercises every private attribute and method the client relies on,
    on a client connection in memory: it sends its Initial, times out
    (a probe timeout re-sends it), and a packet is declared lost. Prints
    what it read as JSON and returns 0, or raises."""
    cfg = QuicConfiguration(
        alpn_protocols=H3_ALPN,
        is_client=True,
        congestion_control_algorithm="cubic",
        max_datagram_size=1452,
        server_name="localhost",
    )
    quic = QuicConnection(configuration=cfg)
    counts = instrument(quic)
    params = inspect.signature(type(quic._loss)._on_packets_lost).parameters
    now = 0.0
    quic.connect(("127.0.0.1", 4433), now=now)
    sent = len(quic.datagrams_to_send(now=now))
    for _ in range(3):
        now = quic.get_timer()
        quic.handle_timer(now=now)
        sent += len(quic.datagrams_to_send(now=now))
    space = next(sp for sp in quic._loss.spaces if sp.sent_packets)
    pkt = next(iter(space.sent_packets.values()))
    quic._loss._on_packets_lost(now=now, packets=[pkt], space=space)
    stats = recovery_stats(quic, counts, "cubic")
    want = {
        "datagrams sent": sent > 0,
        "packets counted": counts["packets_sent"] >= sent,
        "probe timeouts counted": counts["pto_count"] > 0,
        "re-sent packets counted": counts["rescheduled"] > 0,
        "lost packet counted": counts["packets_lost"] == 1 and counts["bytes_lost"] == pkt.sent_bytes,
        "congestion window read": stats["CwndBytes"] > 0,
        "RTT read": stats["SmoothedRTTms"] >= 0 and stats["RTTVarms"] >= 0,
        "PTO count read": isinstance(quic._loss._pto_count, int),
        "loss hook takes congestion_event": "congestion_event" in params,
    }
    bad = [k for k, ok in want.items() if not ok]
    if bad:
        raise AssertionError("aioquic %s: %s failed (counts %s, stats %s)" % (aioquic.__version__, ", ".join(bad), counts, stats))
    print(json.dumps({"aioquic_version": aioquic.__version__, "counts": counts, "stats": stats}))
    return 0


def main():
    if sys.argv[1:] == ["--check"]:
        return self_check()
    try:
        src = open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin
        with src:
            req = json.load(src)
        if not isinstance(req, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        print("aioquic client: reading the request: %s" % e, file=sys.stderr)
        return 2
    err = check_request(req)
    if err:
        print("aioquic client: %s" % err, file=sys.stderr)
        return 2
    out = {
        "version": "aioquic " + aioquic.__version__,
        "config": {},
        "measure_start": 0,
        "measure_end": 0,
        "conns": [],
        "requests": [],
    }
    if aioquic.__version__ != PINNED_VERSION:
        out["error"] = "aioquic %s is installed, but this client reads the private recovery state of %s" % (
            aioquic.__version__,
            PINNED_VERSION,
        )
        print(json.dumps(out))
        return 0
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_start"] = {"user_ns": int(ru.ru_utime * 1e9), "sys_ns": int(ru.ru_stime * 1e9)}
    out["started_unix_ns"] = time.time_ns()
    t0 = time.monotonic_ns()
    try:
        asyncio.run(asyncio.wait_for(run(req, out, t0), req.get("timeout", 600.0)))
    except asyncio.TimeoutError:
        out["error"] = "timeout (total, %gs)" % req.get("timeout", 600.0)
    except (RequestError, ConnectionError, OSError) as e:
        out["error"] = str(e) or type(e).__name__
    if req.get("qlog_dir"):
        out["qlogs"] = sorted(
            os.path.join(req["qlog_dir"], f) for f in os.listdir(req["qlog_dir"]) if f.endswith(".qlog")
        )
    print(json.dumps(out, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
