// trim.mjs makes the test fixtures of package lighthouse: it copies full
// Lighthouse JSON reports (180-800 KB: screenshots, i18n, every audit)
// keeping only what Parse reads, so that each copy stays small (< 60 KB).
//
// usage: node lighthouse/testdata/trim.mjs OUTDIR REPORT.json...
//   e.g. node lighthouse/testdata/trim.mjs lighthouse/testdata /tmp/lh/out/b-h2.json
// Each report is written to OUTDIR under its own base name.
//
// Kept: lighthouseVersion, requestedUrl, mainDocumentUrl, finalDisplayedUrl,
// finalUrl, fetchTime, environment, runWarnings, runtimeError (without its
// errorStack), configSettings, categories.performance (whole, auditRefs
// included) and the audits Parse reads: the six metric audits,
// total-byte-weight, metrics and network-requests. Audits lose their
// description and errorStack; only metrics and network-requests keep their
// details (network-requests without details.debugData, its items whole).
import fs from 'node:fs';
import path from 'node:path';

const keepAudits = [
  'first-contentful-paint', 'speed-index', 'largest-contentful-paint', 'interactive',
  'total-blocking-time', 'cumulative-layout-shift', 'total-byte-weight', 'metrics', 'network-requests',
];
const keepDetails = new Set(['metrics', 'network-requests']);
const keepTop = [
  'lighthouseVersion', 'requestedUrl', 'mainDocumentUrl', 'finalDisplayedUrl', 'finalUrl', 'fetchTime',
  'environment', 'runWarnings', 'runtimeError', 'configSettings',
];

const [outDir, ...inputs] = process.argv.slice(2);
if (!outDir || inputs.length === 0) {
  console.error('usage: node trim.mjs OUTDIR REPORT.json...');
  process.exit(2);
}
for (const file of inputs) {
  const r = JSON.parse(fs.readFileSync(file, 'utf8'));
  const out = {};
  for (const k of keepTop) {
    if (k in r) out[k] = r[k];
  }
  if (out.runtimeError) {
    const {errorStack, ...rest} = out.runtimeError;
    out.runtimeError = rest;
  }
  out.categories = {performance: r.categories.performance};
  out.audits = {};
  for (const id of keepAudits) {
    const a = r.audits[id];
    if (!a) continue;
    const {description, errorStack, details, ...rest} = a;
    if (details && keepDetails.has(id)) {
      const {debugData, ...d} = details;
      rest.details = d;
    }
    out.audits[id] = rest;
  }
  const dest = path.join(outDir, path.basename(file));
  fs.writeFileSync(dest, JSON.stringify(out, null, 1) + '\n');
  console.log(`${dest}: ${fs.statSync(dest).size} bytes`);
}
