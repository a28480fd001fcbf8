// Package lighthouse runs Google Lighthouse, the Node.js CLI pinned in
// peers/lighthouse (Version), against a headless Chromium that is already
// running with a DevTools port on 127.0.0.1, and turns its JSON report into
// Go values.
//
// The caller (quicbench's client agent, inside the client network
// namespace) starts Chromium itself, with the protocol flags and the
// certificate pin of the sample, and hands Run the browser's DevTools port.
// Lighthouse attaches to that browser, loads the page once with its own
// instrumentation (performance category only, desktop preset, no
// throttling of its own: the emulated link is the throttle) and prints the
// report, which Parse reads:
//
//   - the six metrics of the Lighthouse 6-9 performance score (FCP, SI, LCP,
//     TTI, TBT, CLS) with their audit scores;
//   - the performance score twice: Lighthouse 12's own (Report.Score, whose
//     weights dropped TTI) and the Lighthouse 6-7 weighting the replicated
//     study used (Report.StudyScore, StudyWeights);
//   - the load and DOMContentLoaded times Lighthouse observed, the bytes
//     transferred and every network request with the protocol it used.
//
// Report.Check says whether a report holds a complete measurement (no
// runtime error, no load cut short by Lighthouse's time limit, every metric
// computed, every request finished), and Report.Protocols which protocols
// the requests to an origin used, so that a sample can be rejected when the
// browser did not use the protocol under test.
//
// Find locates node and the CLI; nothing in this package starts Chromium.
package lighthouse
