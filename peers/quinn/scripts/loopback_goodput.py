#!/usr/bin/env python3
"""Loopback goodput and CPU per MB: quinn client <-> quinn server against
quicbench fetch <-> quicbench serve (quic-go), both over HTTP/3, interleaved.

Usage: loopback_goodput.py QUICBENCH QB_QUINN_SERVER QB_QUINN_CLIENT [SIZE] [ROUNDS]
(SIZE a /bytes size, default 100MB; ROUNDS default 5). Prints one line per
sample and the medians with their ratio. Both servers run for the whole
measurement; each round fetches SIZE from each once, in alternating order.
Goodput is body bytes over the request's start-to-end time (each client's
own timeline); client CPU is the whole client process (wait4), server CPU
the server's /proc/PID/stat delta over the fetch (10 ms ticks).
A measurement, not a test: it asserts nothing about speed.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def run(cmd, stdin=None):
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if stdin is not None:
        p.stdin.write(stdin)
    p.stdin.close()
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({p.returncode}): {err.decode()[-2000:]}")
    return out, ru.ru_utime + ru.ru_stime


def main():
    qb, server, client = sys.argv[1:4]
    size = sys.argv[4] if len(sys.argv) > 4 else "100MB"
    rounds = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    d = tempfile.mkdtemp(prefix="qb-goodput-")
    cert, key = f"{d}/cert.pem", f"{d}/key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE"],
        check=True, capture_output=True)
    ca = open(cert).read()
    go = subprocess.Popen(
        [qb, "serve", "--control", "--host", "127.0.0.1", "--port", "0", "--plain-port", "0",
         "--protocols", "h3", "--cert", cert, "--key", key],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    go_port = json.loads(go.stdout.readline())["body"]["port"]
    cfg = {"host": "127.0.0.1", "port": 0, "cert": cert, "key": key, "cc": "cubic", "max_datagram_size": 1452,
           "max_data": 15 << 20, "max_stream_data": 6 << 20, "socket_buffer": 7 << 20, "qlog_dir": "",
           "keylog": "", "sites": None, "png_head": "", "png_tail": ""}
    with open(f"{d}/quinn.json", "w") as f:
        json.dump(cfg, f)
    qn = subprocess.Popen([server, "--config", f"{d}/quinn.json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)
    qn_port = json.loads(qn.stdout.readline())["ready"]["port"]
    mb = None
    res = {"quinn": [], "quic-go": []}

    def quinn():
        req = {"host": "127.0.0.1", "port": qn_port, "server_name": "localhost", "ca_pem": ca,
               "paths": [f"/bytes/{size}"], "rcvbuf": 4 << 20, "congestion_control": "cubic"}
        before = proc_cpu(qn.pid)
        out, ccpu = run([client], json.dumps(req).encode())
        scpu = proc_cpu(qn.pid) - before
        rec = json.loads(out)
        if rec.get("error"):
            raise SystemExit(f"quinn client: {rec['error']}")
        r = rec["requests"][0]
        return r["bytes"], r["end"] - r["start"], ccpu, scpu

    def quicgo():
        before = proc_cpu(go.pid)
        out, ccpu = run([qb, "fetch", "--json", "--proto", "h3", "--ca", cert, "--server-name", "localhost",
                         "--addr", f"127.0.0.1:{go_port}", f"/bytes/{size}"])
        scpu = proc_cpu(go.pid) - before
        r = json.loads(out)["requests"][0]
        return r["bytes"], r["end"] - r["start"], ccpu, scpu

    print(f"load before: {os.getloadavg()}")
    for i in range(rounds):
        order = [("quinn", quinn), ("quic-go", quicgo)]
        if i % 2:
            order.reverse()
        for name, fn in order:
            n, ns, ccpu, scpu = fn()
            mb = n / 1e6
            mbps = n * 8 / ns * 1e3
            res[name].append((mbps, ccpu / mb * 1e3, scpu / mb * 1e3))
            print(f"round {i} {name:8s} {mbps:8.0f} Mbit/s  client {ccpu / mb * 1e3:6.2f} ms/MB  "
                  f"server {scpu / mb * 1e3:6.2f} ms/MB", flush=True)
            time.sleep(0.5)
    print(f"load after: {os.getloadavg()}")
    med = {k: [statistics.median(x[j] for x in v) for j in range(3)] for k, v in res.items()}
    for k, (g, c, s) in med.items():
        print(f"median {k:8s} {g:8.0f} Mbit/s  client {c:6.2f} ms/MB  server {s:6.2f} ms/MB")
    q, g = med["quinn"], med["quic-go"]
    print(f"ratio quinn/quic-go: goodput {q[0] / g[0]:.2f}, client CPU/MB {q[1] / g[1]:.2f}, "
          f"server CPU/MB {q[2] / g[2]:.2f}")
    go.stdin.close()
    qn.stdin.close()
    go.wait(10)
    qn.wait(10)


if __name__ == "__main__":
    main()
