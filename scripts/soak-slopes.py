#!/usr/bin/env python3
"""Slopes of a browser soak (scripts/soak-browsers.sh): memory and open files
per hour, fitted by least squares.

Usage: soak-slopes.py SOAK.db PROCS.csv

From the samples (SOAK.db): per browser instance (testbed, client, and for
Chromium the protocol, between two restarts: browser_age counts up), the slope of
browser_pss_mb, browser_rss_mb and browser_fds over the samples' start times, and
per testbed's agent the slope of agent_rss_mb and agent_fds. From the 60-second
readings (PROCS.csv): per process (runner, agents, servers) and per browser
process group, the slope of RSS (and PSS for browsers) and of open files.
Each line: the series, its readings, hours covered, first and last value, slope
per hour. Series shorter than 30 minutes are left out of the summary lines.
"""
import csv
import sqlite3
import sys
from collections import defaultdict


def fit(points):
    """Least-squares slope (per hour) of [(t_seconds, v)]."""
    n = len(points)
    if n < 2:
        return 0.0
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    sxx = sum((t - mt) ** 2 for t, _ in points)
    if sxx == 0:
        return 0.0
    sxy = sum((t - mt) * (v - mv) for t, v in points)
    return sxy / sxx * 3600


def report(title, series, unit, min_hours=0.5):
    print(f"\n{title}")
    slopes = []
    for name in sorted(series):
        pts = sorted(series[name])
        hours = (pts[-1][0] - pts[0][0]) / 3600 if pts else 0
        s = fit(pts)
        print(f"  {name:40s} n={len(pts):5d} {hours:5.2f} h  {pts[0][1]:9.1f} -> {pts[-1][1]:9.1f} {unit}  slope {s:+8.2f} {unit}/h")
        if hours >= min_hours:
            slopes.append(s)
    if slopes:
        slopes.sort()
        print(f"  -> {len(slopes)} series of at least {min_hours} h: median slope {slopes[len(slopes)//2]:+.2f} {unit}/h, "
              f"range {slopes[0]:+.2f} .. {slopes[-1]:+.2f} {unit}/h")


def from_db(path):
    db = sqlite3.connect(path)
    q = """select s.slot, c.client, c.protocol, s.started_ns, m.name, m.value, s.id
           from samples s join cells c on c.id = s.cell_id join sample_metrics m on m.sample_id = s.id
           where m.name in ('browser_pss_mb','browser_rss_mb','browser_fds','browser_age','agent_rss_mb','agent_fds')"""
    rows = defaultdict(dict)
    for slot, client, proto, started, name, value, sid in db.execute(q):
        r = rows[sid]
        r.update(slot=slot, client=client, proto=proto, t=started / 1e9)
        r[name] = value
    ordered = sorted(rows.values(), key=lambda r: r["t"])
    inst = {}  # (slot, browser) -> instance number
    last_age = {}
    pss, rss, fds, arss, afds = (defaultdict(list) for _ in range(5))
    restarts = 0
    for r in ordered:
        b = r["client"] + ("/" + r["proto"] if r["client"] == "chromium" else "")
        k = (r["slot"], b)
        age = r.get("browser_age", 0)
        if age and age <= last_age.get(k, 0):
            inst[k] = inst.get(k, 0) + 1
            restarts += 1
        last_age[k] = age
        name = f"testbed {r['slot']} {b} #{inst.get(k, 0)}"
        for key, dst in (("browser_pss_mb", pss), ("browser_rss_mb", rss), ("browser_fds", fds)):
            if key in r:
                dst[name].append((r["t"], r[key]))
        for key, dst in (("agent_rss_mb", arss), ("agent_fds", afds)):
            if key in r:
                dst[f"testbed {r['slot']} agent"].append((r["t"], r[key]))
    n = db.execute("select count(*), min(started_ns), max(started_ns) from samples").fetchone()
    status = db.execute("select status, count(*) from samples group by status").fetchall()
    warn = db.execute("select message, count(*) from warnings where message like 'browser%' group by substr(message,1,60) order by 2 desc limit 10").fetchall()
    print(f"samples: {n[0]} over {(n[2]-n[1])/3.6e12:.2f} h; status {dict(status)}; browser restarts seen in the samples: {restarts}")
    for text, c in warn:
        print(f"  warning x{c}: {text[:160]}")
    report("browser PSS per kept browser (samples)", pss, "MB")
    report("browser RSS per kept browser (samples)", rss, "MB")
    report("browser open files per kept browser (samples)", fds, "fds")
    report("agent RSS (samples)", arss, "MB")
    report("agent open files (samples)", afds, "fds")


def from_csv(path):
    rss, pss, fds = (defaultdict(list) for _ in range(3))
    loads = []
    with open(path) as f:
        for r in csv.DictReader(f):
            t = float(r["time"])
            loads.append(float(r["load1"]))
            name = f"{r['kind']} {r['pid']}"
            rss[name].append((t, float(r["rss_kb"]) / 1024))
            fds[name].append((t, float(r["fds"])))
            if r["kind"] not in ("runner", "agent", "server"):
                pss[name].append((t, float(r["pss_kb"]) / 1024))
    if loads:
        loads.sort()
        print(f"\nload average (1 min) during the readings: median {loads[len(loads)//2]:.1f}, max {loads[-1]:.1f}")
    report("RSS per process or browser group (60 s readings)", rss, "MB")
    report("PSS per browser group (60 s readings)", pss, "MB")
    report("open files per process or browser group (60 s readings)", fds, "fds")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    from_db(sys.argv[1])
    from_csv(sys.argv[2])
