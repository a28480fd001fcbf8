// quicbench bench page: runs one test of quicbench with fetch() inside a
// browser and publishes what it observed as window.__qbResult, a promise of
// a plain object (see workload/bench.go, which turns it into a sample: the
// metrics are computed there, with the built-in client's code).
//
// The page is loaded from /bench?test=NAME&PARAMS (parameters as quicbench
// writes them: size in bytes, interval as a Go duration) and starts its test
// once the load event has ended. Times are performance.now() values in ms;
// request times are relative to t0, the start of the measured part.
(() => {
  'use strict';
  const q = new URLSearchParams(location.search);
  const test = q.get('test') || '';
  const int = k => {
    const v = Number(q.get(k));
    if (!Number.isSafeInteger(v) || v < 0) throw new Error('parameter ' + k + '=' + q.get(k) + ': not a count');
    return v;
  };
  const now = () => performance.now();
  // Every measured request is a resource of its own (the server ignores
  // the query string), so that its Resource Timing entry is found by name.
  const uniq = (path, i) => path + (path.includes('?') ? '&' : '?') + 'qb=' + i;
  try { performance.setResourceTimingBufferSize(10000000); } catch (e) { /* keep the default */ }

  // The smallest step of performance.now() seen in 20 steps (bounded to
  // 50 ms): 0.005 in a cross-origin isolated Chromium, 0.1 otherwise.
  function timerStep() {
    let prev = now(), step = Infinity, changes = 0;
    const limit = prev + 50;
    while (changes < 20) {
      const t = now();
      if (t !== prev) { step = Math.min(step, t - prev); prev = t; changes++; }
      if (t > limit) break;
    }
    return Number.isFinite(step) ? step : -1;
  }

  // read reads a response body through its stream reader. With chunks, it
  // records [arrival - t0, bytes] per chunk; with merge, a chunk arriving
  // within merge ms of the previous record is added to it (bounding the
  // record of long transfers).
  async function read(resp, t0, chunks, merge) {
    if (!resp.ok) throw new Error(resp.url + ': HTTP status ' + resp.status);
    const reader = resp.body.getReader();
    let bytes = 0, last = -1;
    for (;;) {
      const { done, value } = await reader.read();
      const t = now();
      if (done) return { bytes, end: (last >= 0 ? last : t) - t0 };
      bytes += value.byteLength;
      last = t;
      if (!chunks) continue;
      const rel = t - t0, prev = chunks[chunks.length - 1];
      if (merge > 0 && prev && rel - prev[0] < merge) {
        prev[0] = rel;
        prev[1] += value.byteLength;
      } else {
        chunks.push([rel, value.byteLength]);
      }
    }
  }

  const opts = { cache: 'no-store' };

  // One request, timed from the fetch() call to its last body byte.
  async function timed(url, t0, chunks, merge) {
    const start = now() - t0;
    const resp = await fetch(url, opts);
    const r = await read(resp, t0, chunks, merge);
    const out = { name: url, start, end: r.end, bytes: r.bytes };
    if (chunks) out.chunks = chunks;
    return out;
  }

  const tests = {
    // requests sequential requests on the page's connection, after one
    // unmeasured request on it.
    async latency(res) {
      const n = int('requests'), size = int('size');
      const path = size > 0 ? '/bytes/' + size : '/echo';
      await read(await fetch(uniq('/echo', 'warm'), opts), 0);
      const t0 = res.t0 = now();
      for (let i = 0; i < n; i++) res.requests.push(await timed(uniq(path, i), t0));
    },
    // The document itself is the measured resource (navigation timing).
    async ttfb(res) { res.t0 = 0; },
    async download(res) {
      const t0 = res.t0 = now();
      res.requests.push(await timed(uniq('/bytes/' + int('size'), 0), t0));
    },
    async upload(res) {
      const size = int('size');
      const body = new Uint8Array(size);
      const url = uniq('/upload', 0);
      const t0 = res.t0 = now();
      const resp = await fetch(url, { method: 'POST', body, cache: 'no-store' });
      if (!resp.ok) throw new Error(url + ': HTTP status ' + resp.status);
      const rep = await resp.json();
      res.requests.push({ name: url, start: 0, end: now() - t0, bytes: 0, upload: size, server: rep });
    },
    async multiplex(res) {
      const n = int('objects'), size = int('size');
      const t0 = res.t0 = now();
      const all = [];
      for (let i = 0; i < n; i++) all.push(timed('/bytes/' + size + '?object=' + i, t0, [], 0.1));
      res.requests = await Promise.all(all);
    },
    async stream(res) {
      const url = uniq('/stream?segments=' + int('segments') + '&interval=' + encodeURIComponent(q.get('interval')) + '&size=' + int('size'), 0);
      const t0 = res.t0 = now();
      res.requests.push(await timed(url, t0, []));
    },
  };

  const pick = e => ({
    name: e.name, type: e.entryType, protocol: e.nextHopProtocol,
    startTime: e.startTime, connectStart: e.connectStart, secureConnectionStart: e.secureConnectionStart,
    connectEnd: e.connectEnd, requestStart: e.requestStart, responseStart: e.responseStart,
    responseEnd: e.responseEnd, encodedBodySize: e.encodedBodySize,
  });

  async function run() {
    if (document.readyState !== 'complete') await new Promise(r => addEventListener('load', r, { once: true }));
    await new Promise(r => setTimeout(r, 0)); // after loadEventEnd
    const res = {
      version: 1, test, isolated: self.crossOriginIsolated === true, timer_ms: timerStep(),
      time_origin: performance.timeOrigin, t0: 0, t1: 0, requests: [], entries: [],
    };
    const t = tests[test];
    try {
      if (!t) throw new Error('unknown test ' + JSON.stringify(test));
      await t(res);
      res.t1 = now();
    } catch (e) {
      res.error = String(e && e.message || e);
    }
    // The entry of a response that just ended may be queued a moment
    // longer: wait (up to 2 s) until every measured request has one.
    const names = () => new Set(performance.getEntriesByType('resource').map(e => e.name));
    for (let i = 0; i < 400; i++) {
      const have = names();
      if (res.requests.every(r => have.has(new URL(r.name, location.href).href))) break;
      await new Promise(r => setTimeout(r, 5));
    }
    res.entries = performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource')).map(pick);
    return res;
  }
  window.__qbResult = run();
})();
