package lighthouse

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures are trimmed copies (testdata/trim.mjs) of reports of
// Lighthouse 12.8.2 through quicbench's testbed: a-h3, b-h1, b-h2 and b-h3
// are complete runs of a 39-request site over HTTP/3, 1.1, 2 and 3;
// f-certerr and f-certerr-h3 failed on the certificate (TCP and QUIC),
// f-nofcp painted nothing, f-slowload never finished one image.
var (
	okFixtures   = []string{"a-h3.json", "b-h1.json", "b-h2.json", "b-h3.json"}
	failFixtures = []string{"f-certerr.json", "f-certerr-h3.json", "f-nofcp.json", "f-slowload.json"}
)

const siteOrigin = "https://10.1.2.2:4433"

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseFixture(t testing.TB, name string) *Report {
	t.Helper()
	r, err := Parse(readFixture(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// editFixture decodes a fixture, lets edit change it and re-encodes it.
func editFixture(t *testing.T, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFixture(t, name), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseEdited parses a fixture after edit changed it (editFixture).
func parseEdited(t *testing.T, name string, edit func(m map[string]any)) *Report {
	t.Helper()
	r, err := Parse(editFixture(t, name, edit))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func audit(m map[string]any, id string) map[string]any {
	return m["audits"].(map[string]any)[id].(map[string]any)
}

// TestParseValues checks values copied by hand from the fixture files.
func TestParseValues(t *testing.T) {
	type want struct {
		metrics      [6]float64 // FCP SI LCP TTI TBT CLS
		scores       [6]float64
		score, study float64
		load, dcl    float64
		bytes        int64
		requests     int
		proto        string
		benchmark    float64
		first, last  Request
	}
	site := "https://10.1.2.2:4433/site/site-39x3mb/"
	// The first and the last request of every fixture: the page and its
	// last script, which differ only in protocol, size on the wire and time.
	page := func(proto string, transfer int64, start, end float64) Request {
		return Request{URL: site, Protocol: proto, ResourceType: "Document", MimeType: "text/html", StatusCode: 200,
			TransferSize: transfer, ResourceSize: 2591, StartMs: start, EndMs: end, Finished: true}
	}
	app5 := func(proto string, transfer int64, start, end float64) Request {
		return Request{URL: site + "js/app5.js", Protocol: proto, ResourceType: "Script", MimeType: "text/javascript", StatusCode: 200,
			TransferSize: transfer, ResourceSize: 36033, StartMs: start, EndMs: end, Finished: true}
	}
	cases := map[string]want{
		"b-h2.json": {
			metrics: [6]float64{307.844, 1238, 307.844, 307.844, 0, 0},
			scores:  [6]float64{1, 0.92, 1, 1, 1, 1},
			score:   0.99, study: 0.988, load: 2508, dcl: 9, bytes: 3003129, requests: 39, proto: "h2", benchmark: 1092,
			first: page("h2", 2724, 3.6979999989271164, 20.598999999463558),
			last:  app5("h2", 36082, 130.8859999962151, 1549.7119999974966),
		},
		"b-h1.json": {
			metrics: [6]float64{277.321, 1287, 277.321, 2510.254, 0, 0},
			scores:  [6]float64{1, 0.9, 1, 0.89, 1, 1},
			score:   0.99, study: 0.9685, load: 2536, dcl: 2510, bytes: 3009084, requests: 39, proto: "http/1.1", benchmark: 1690.5,
			first: page("http/1.1", 2833, 5.211999997496605, 20.36099999770522),
			last:  app5("http/1.1", 36282, 2175.7760000005364, 2461.5619999952614),
		},
		"b-h3.json": {
			metrics: [6]float64{288.462, 1244, 288.462, 2524.884, 0, 0},
			scores:  [6]float64{1, 0.92, 1, 0.89, 1, 1},
			score:   0.99, study: 0.9715, load: 2525, dcl: 2525, bytes: 3003151, requests: 39, proto: "h3", benchmark: 1565.5,
			first: page("h3", 2655, 5.48200000077486, 10.239000003784895),
			last:  app5("h3", 36128, 2224.4460000023246, 2513.9660000018775),
		},
		"a-h3.json": {
			metrics: [6]float64{294.738, 1257, 294.738, 2520.543, 0, 0},
			scores:  [6]float64{1, 0.91, 1, 0.89, 1, 1},
			score:   0.99, study: 0.97, load: 2521, dcl: 2521, bytes: 3003151, requests: 39, proto: "h3", benchmark: 1637.5,
			first: page("h3", 2655, 9.787000004202127, 27.98600000143051),
			last:  app5("h3", 36128, 2217.712000004947, 2510.3460000045598),
		},
	}
	for name, w := range cases {
		t.Run(name, func(t *testing.T) {
			r := parseFixture(t, name)
			if r.LighthouseVersion != Version {
				t.Errorf("LighthouseVersion %q, want %q", r.LighthouseVersion, Version)
			}
			if r.RequestedURL != site || r.FinalURL != site || r.FinalDisplayedURL != site {
				t.Errorf("URLs %q %q %q, want %q", r.RequestedURL, r.FinalURL, r.FinalDisplayedURL, site)
			}
			if !strings.Contains(r.UserAgent, "HeadlessChrome/") {
				t.Errorf("UserAgent %q", r.UserAgent)
			}
			if r.BenchmarkIndex != w.benchmark {
				t.Errorf("BenchmarkIndex %v, want %v", r.BenchmarkIndex, w.benchmark)
			}
			got := [6]float64{r.FCP, r.SI, r.LCP, r.TTI, r.TBT, r.CLS}
			if got != w.metrics {
				t.Errorf("metrics %v, want %v", got, w.metrics)
			}
			for i, id := range MetricAudits() {
				if v, ok := r.MetricValues[id]; !ok || v != w.metrics[i] {
					t.Errorf("MetricValues[%s] = %v, %v; want %v", id, v, ok, w.metrics[i])
				}
				if s, ok := r.MetricScores[id]; !ok || s != w.scores[i] {
					t.Errorf("MetricScores[%s] = %v, %v; want %v", id, s, ok, w.scores[i])
				}
			}
			if len(r.MetricScores) != 6 || len(r.MetricValues) != 6 || len(r.AuditErrors) != 0 {
				t.Errorf("%d scores, %d values, audit errors %v", len(r.MetricScores), len(r.MetricValues), r.AuditErrors)
			}
			if r.Score != w.score {
				t.Errorf("Score %v, want %v", r.Score, w.score)
			}
			if math.Abs(r.StudyScore-w.study) > 1e-12 {
				t.Errorf("StudyScore %v, want %v", r.StudyScore, w.study)
			}
			if r.ObservedLoad != w.load || r.ObservedDOMContentLoaded != w.dcl {
				t.Errorf("load %v DCL %v, want %v %v", r.ObservedLoad, r.ObservedDOMContentLoaded, w.load, w.dcl)
			}
			if r.TotalByteWeight != w.bytes {
				t.Errorf("TotalByteWeight %d, want %d", r.TotalByteWeight, w.bytes)
			}
			if len(r.Requests) != w.requests {
				t.Fatalf("%d requests, want %d", len(r.Requests), w.requests)
			}
			if r.Requests[0] != w.first {
				t.Errorf("first request\n %+v, want\n %+v", r.Requests[0], w.first)
			}
			if last := r.Requests[len(r.Requests)-1]; last != w.last {
				t.Errorf("last request\n %+v, want\n %+v", last, w.last)
			}
			var sum int64
			for _, q := range r.Requests {
				sum += q.TransferSize
			}
			if sum != r.TotalByteWeight {
				t.Errorf("sum of transfer sizes %d != TotalByteWeight %d", sum, r.TotalByteWeight)
			}
			if len(r.Warnings) != 0 || r.RuntimeError != nil {
				t.Errorf("warnings %q, runtime error %v", r.Warnings, r.RuntimeError)
			}
			if err := r.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
			p := r.Protocols(siteOrigin)
			if len(p) != 1 || p[w.proto] != w.requests {
				t.Errorf("Protocols(%s) = %v, want %s: %d", siteOrigin, p, w.proto, w.requests)
			}
		})
	}
}

// TestParseMatchesJSON compares every parsed field of every fixture with
// the same field read generically from the JSON.
func TestParseMatchesJSON(t *testing.T) {
	num := func(v any) (float64, bool) { f, ok := v.(float64); return f, ok }
	for _, name := range append(append([]string{}, okFixtures...), failFixtures...) {
		t.Run(name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(readFixture(t, name), &m); err != nil {
				t.Fatal(err)
			}
			r := parseFixture(t, name)
			fields := map[string]float64{AuditFCP: r.FCP, AuditSI: r.SI, AuditLCP: r.LCP, AuditTTI: r.TTI, AuditTBT: r.TBT, AuditCLS: r.CLS}
			for _, id := range MetricAudits() {
				a := audit(m, id)
				v, hasV := num(a["numericValue"])
				if got, ok := r.MetricValues[id]; ok != hasV || got != v || fields[id] != v {
					t.Errorf("%s: value %v (%v), field %v; JSON %v (%v)", id, got, ok, fields[id], v, hasV)
				}
				s, hasS := num(a["score"])
				if got, ok := r.MetricScores[id]; ok != hasS || got != s {
					t.Errorf("%s: score %v (%v); JSON %v (%v)", id, got, ok, s, hasS)
				}
				if msg, _ := a["errorMessage"].(string); r.AuditErrors[id] != msg {
					t.Errorf("%s: AuditErrors %q, JSON %q", id, r.AuditErrors[id], msg)
				}
			}
			perf := m["categories"].(map[string]any)["performance"].(map[string]any)
			if s, _ := num(perf["score"]); r.Score != s {
				t.Errorf("Score %v, JSON %v", r.Score, perf["score"])
			}
			if tbw, _ := num(audit(m, "total-byte-weight")["numericValue"]); float64(r.TotalByteWeight) != tbw {
				t.Errorf("TotalByteWeight %d, JSON %v", r.TotalByteWeight, tbw)
			}
			var items []any
			if d, ok := audit(m, "network-requests")["details"].(map[string]any); ok {
				items, _ = d["items"].([]any)
			}
			if len(items) != len(r.Requests) {
				t.Fatalf("%d requests, JSON %d", len(r.Requests), len(items))
			}
			for i, it := range items {
				q := it.(map[string]any)
				start, _ := num(q["networkRequestTime"])
				end, _ := num(q["networkEndTime"])
				status, _ := num(q["statusCode"])
				ts, _ := num(q["transferSize"])
				rs, _ := num(q["resourceSize"])
				want := Request{URL: q["url"].(string), Protocol: q["protocol"].(string), ResourceType: q["resourceType"].(string),
					MimeType: q["mimeType"].(string), StatusCode: int(status), TransferSize: int64(ts), ResourceSize: int64(rs),
					StartMs: start, EndMs: end, Finished: q["finished"].(bool)}
				if r.Requests[i] != want {
					t.Errorf("request %d\n %+v, JSON\n %+v", i, r.Requests[i], want)
				}
			}
			warnings, _ := m["runWarnings"].([]any)
			if len(warnings) != len(r.Warnings) {
				t.Errorf("warnings %q, JSON %v", r.Warnings, warnings)
			}
			for i := range min(len(warnings), len(r.Warnings)) {
				if warnings[i] != r.Warnings[i] {
					t.Errorf("warning %d %q, JSON %q", i, r.Warnings[i], warnings[i])
				}
			}
		})
	}
}

// TestWeightedScoreReproducesLighthouse proves the method of StudyScore:
// the category's own auditRefs weights applied to the metric scores give
// Lighthouse's performance score (which it rounds to two decimals).
func TestWeightedScoreReproducesLighthouse(t *testing.T) {
	for _, name := range append(append([]string{}, okFixtures...), "f-slowload.json") {
		var l lhr
		if err := json.Unmarshal(readFixture(t, name), &l); err != nil {
			t.Fatal(err)
		}
		weights := map[string]float64{}
		scores := map[string]float64{}
		for _, ref := range l.Categories.Performance.AuditRefs {
			if _, dup := weights[ref.ID]; dup {
				t.Fatalf("%s: auditRef %s twice", name, ref.ID)
			}
			weights[ref.ID] = ref.Weight
			if a := l.Audits[ref.ID]; a != nil && a.Score != nil {
				scores[ref.ID] = *a.Score
			}
		}
		var total float64
		for _, w := range weights {
			total += w
		}
		if total != 100 {
			t.Errorf("%s: auditRefs weights sum to %v", name, total)
		}
		got, err := WeightedScore(scores, weights)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := *l.Categories.Performance.Score
		if math.Abs(got-want) > 0.005 {
			t.Errorf("%s: weighted auditRefs %v, Lighthouse's score %v", name, got, want)
		}
		if math.Round(got*100)/100 != want {
			t.Errorf("%s: weighted auditRefs %v rounds to %v, not Lighthouse's %v", name, got, math.Round(got*100)/100, want)
		}
		r := parseFixture(t, name)
		study, err := WeightedScore(r.MetricScores, StudyWeights())
		if err != nil || study != r.StudyScore {
			t.Errorf("%s: WeightedScore(MetricScores, StudyWeights) = %v, %v; StudyScore %v", name, study, err, r.StudyScore)
		}
	}
}

func TestStudyWeights(t *testing.T) {
	w := StudyWeights()
	var total float64
	for _, id := range MetricAudits() {
		total += w[id]
	}
	if total != 100 || len(w) != 6 {
		t.Errorf("StudyWeights() %v sum to %v", w, total)
	}
	// The accessors return copies: changing them changes nothing in the
	// package.
	w[AuditFCP] = 1000
	ids := MetricAudits()
	ids[0] = "changed"
	if StudyWeights()[AuditFCP] != 15 || MetricAudits()[0] != AuditFCP {
		t.Errorf("StudyWeights() or MetricAudits() returned the package's own: %v, %v", StudyWeights(), MetricAudits())
	}
	r := parseFixture(t, "b-h2.json")
	if want, err := WeightedScore(r.MetricScores, map[string]float64{AuditFCP: 15, AuditSI: 15, AuditLCP: 25, AuditTTI: 15, AuditTBT: 25, AuditCLS: 5}); err != nil || r.StudyScore != want {
		t.Errorf("after changing a copy, StudyScore %v, want %v (%v)", r.StudyScore, want, err)
	}
}

func TestWeightedScore(t *testing.T) {
	got, err := WeightedScore(map[string]float64{"a": 1, "b": 0.5, "c": 0.1}, map[string]float64{"a": 1, "b": 3, "c": 0})
	if err != nil || got != 0.625 {
		t.Errorf("got %v, %v; want 0.625", got, err)
	}
	if _, err := WeightedScore(map[string]float64{"a": 1}, map[string]float64{"a": 1, "b": 2}); err == nil || !strings.Contains(err.Error(), "b has weight 2 but no score") {
		t.Errorf("missing score: %v", err)
	}
	if _, err := WeightedScore(map[string]float64{"a": 1}, map[string]float64{"a": 0}); err == nil {
		t.Error("no positive weight: no error")
	}
	if _, err := WeightedScore(map[string]float64{"a": 1}, map[string]float64{"a": -1}); err == nil {
		t.Error("negative weight: no error")
	}
	if _, err := WeightedScore(nil, nil); err == nil {
		t.Error("no weights: no error")
	}
}

func TestRuntimeErrorFixtures(t *testing.T) {
	cases := map[string]struct{ code, msg, final string }{
		"f-certerr.json":    {"INSECURE_DOCUMENT_REQUEST", "net::ERR_CERT_AUTHORITY_INVALID", "chrome-error://chromewebdata/"},
		"f-certerr-h3.json": {"CHROME_INTERSTITIAL_ERROR", "interstitial", "chrome-error://chromewebdata/"},
		"f-nofcp.json":      {"NO_FCP", "did not paint any content", "about:blank"},
	}
	for name, w := range cases {
		r := parseFixture(t, name)
		if r.RuntimeError == nil || r.RuntimeError.Code != w.code || !strings.Contains(r.RuntimeError.Message, w.msg) {
			t.Errorf("%s: RuntimeError %+v, want code %s", name, r.RuntimeError, w.code)
			continue
		}
		if r.FinalDisplayedURL != w.final {
			t.Errorf("%s: FinalDisplayedURL %q, want %q", name, r.FinalDisplayedURL, w.final)
		}
		if len(r.MetricValues) != 0 || len(r.MetricScores) != 0 || len(r.Requests) != 0 || r.Score != 0 || r.StudyScore != 0 {
			t.Errorf("%s: values %v scores %v, %d requests, score %v/%v", name, r.MetricValues, r.MetricScores, len(r.Requests), r.Score, r.StudyScore)
		}
		if !strings.Contains(r.AuditErrors[AuditFCP], r.RuntimeError.Message) {
			t.Errorf("%s: AuditErrors[FCP] %q", name, r.AuditErrors[AuditFCP])
		}
		err := r.Check()
		var ie *IncompleteError
		var re *RuntimeError
		if !errors.As(err, &ie) || !errors.As(err, &re) || re != r.RuntimeError {
			t.Errorf("%s: Check = %v, want an *IncompleteError wrapping the *RuntimeError", name, err)
		} else if !strings.Contains(ie.Reason, w.code) {
			t.Errorf("%s: reason %q does not name %s", name, ie.Reason, w.code)
		}
		if got := r.RuntimeError.Error(); !strings.Contains(got, w.code) || !strings.Contains(got, w.msg) {
			t.Errorf("%s: RuntimeError.Error() = %q", name, got)
		}
		if p := r.Protocols(siteOrigin); len(p) != 0 {
			t.Errorf("%s: Protocols %v", name, p)
		}
	}
}

// A real slow load: the page's image never answered, Lighthouse gave up
// after --max-wait-for-load, warned and exited 0 with a full score.
func TestSlowLoadFixture(t *testing.T) {
	r := parseFixture(t, "f-slowload.json")
	if r.RuntimeError != nil || r.Score != 1 || r.StudyScore != 1 || len(r.MetricValues) != 6 {
		t.Errorf("runtime error %v, score %v, study %v, values %v", r.RuntimeError, r.Score, r.StudyScore, r.MetricValues)
	}
	if r.ObservedLoad != 0 || r.ObservedDOMContentLoaded != 5 {
		t.Errorf("load %v DCL %v, want 0 (no load event) and 5", r.ObservedLoad, r.ObservedDOMContentLoaded)
	}
	if len(r.Requests) != 2 || r.Requests[1].Finished || r.Requests[1].EndMs != 0 || r.Requests[1].StatusCode != -1 || r.Requests[1].Protocol != "" {
		t.Errorf("requests %+v", r.Requests)
	}
	err := r.Check()
	var ie *IncompleteError
	if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "loaded too slowly") || ie.Err != nil {
		t.Errorf("Check = %v, want the slow-load warning", err)
	}
	// Without the warning, the unfinished request is the reason.
	r.Warnings = nil
	if err := r.Check(); !errors.As(err, &ie) || !strings.Contains(ie.Reason, "request 2 of 2 (https://10.1.2.2:9443/never.png) did not finish") {
		t.Errorf("Check without warning = %v", err)
	}
	// Protocols counts per origin: the document on :4433, the image on :9443.
	if p := r.Protocols(siteOrigin); len(p) != 1 || p["h2"] != 1 {
		t.Errorf("Protocols(%s) = %v", siteOrigin, p)
	}
	if p := r.Protocols("https://10.1.2.2:9443"); len(p) != 1 || p[""] != 1 {
		t.Errorf("Protocols(:9443) = %v", p)
	}
}

// A complete report with the slow-load warning added to its runWarnings.
func TestCheckSyntheticSlowLoad(t *testing.T) {
	r := parseEdited(t, "b-h2.json", func(m map[string]any) {
		m["runWarnings"] = []any{"The page loaded too slowly to finish within the time limit. Results may be incomplete."}
	})
	err := r.Check()
	var ie *IncompleteError
	if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "loaded too slowly") {
		t.Fatalf("Check = %v, want *IncompleteError for the slow load", err)
	}
	if !strings.HasPrefix(err.Error(), "lighthouse: incomplete measurement: run warning: The page loaded too slowly") {
		t.Errorf("message %q", err)
	}
	// Other warnings do not make a report incomplete.
	r.Warnings = []string{"The tested device appears to have a slower CPU than  Lighthouse expects."}
	if err := r.Check(); err != nil {
		t.Errorf("Check with a CPU warning = %v", err)
	}
}

func TestCheckMissingMetric(t *testing.T) {
	for _, c := range []struct {
		field  string
		reason string
	}{
		{"numericValue", "audit largest-contentful-paint has no numericValue: NO_LCP"},
		{"score", "audit largest-contentful-paint has no score: NO_LCP"},
	} {
		r := parseEdited(t, "b-h1.json", func(m map[string]any) {
			a := audit(m, AuditLCP)
			a[c.field] = nil
			a["errorMessage"] = "NO_LCP"
		})
		var ie *IncompleteError
		if err := r.Check(); !errors.As(err, &ie) || ie.Reason != c.reason {
			t.Errorf("%s null: Check = %v, want reason %q", c.field, err, c.reason)
		}
		if c.field == "score" && r.StudyScore != 0 {
			t.Errorf("StudyScore %v without an LCP score", r.StudyScore)
		}
	}
	// No requests at all.
	r := parseEdited(t, "b-h1.json", func(m map[string]any) {
		delete(audit(m, auditNetworkRequests), "details")
	})
	var ie *IncompleteError
	if err := r.Check(); !errors.As(err, &ie) || ie.Reason != "no network requests" {
		t.Errorf("no requests: Check = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "lighthouse report: unexpected end of JSON input"},
		{"truncated", readFixture(t, "b-h2.json")[:5000], "lighthouse report: unexpected end of JSON input"},
		{"not JSON", []byte("Runtime error encountered"), "lighthouse report: invalid character"},
		{"array", []byte("[]"), "lighthouse report: json: cannot unmarshal array"},
		{"null", []byte("null"), "lighthouse report: no lighthouseVersion"},
		{"empty object", []byte("{}"), "lighthouse report: no lighthouseVersion"},
		{"no version", editFixture(t, "b-h2.json", func(m map[string]any) { delete(m, "lighthouseVersion") }), "no lighthouseVersion"},
		{"no performance", editFixture(t, "b-h2.json", func(m map[string]any) { m["categories"] = map[string]any{} }), "lighthouse report: no categories.performance"},
		{"no categories", editFixture(t, "b-h2.json", func(m map[string]any) { delete(m, "categories") }), "lighthouse report: no categories.performance"},
		{"no audits", editFixture(t, "b-h2.json", func(m map[string]any) { delete(m, "audits") }), "lighthouse report: no audits"},
		{"no SI audit", editFixture(t, "b-h2.json", func(m map[string]any) { delete(m["audits"].(map[string]any), AuditSI) }), `lighthouse report: no audits["speed-index"]`},
		{"null TTI audit", editFixture(t, "b-h2.json", func(m map[string]any) { m["audits"].(map[string]any)[AuditTTI] = nil }), `lighthouse report: no audits["interactive"]`},
		{"score a string", editFixture(t, "b-h2.json", func(m map[string]any) { audit(m, AuditFCP)["score"] = "1" }), "lighthouse report: json: cannot unmarshal string"},
		{"metrics details", editFixture(t, "b-h2.json", func(m map[string]any) { audit(m, auditMetrics)["details"] = "x" }), "lighthouse report: audits.metrics.details"},
		{"request items", editFixture(t, "b-h2.json", func(m map[string]any) {
			audit(m, auditNetworkRequests)["details"] = map[string]any{"items": 3}
		}), `lighthouse report: audits["network-requests"].details`},
	}
	for _, c := range cases {
		r, err := Parse(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Parse = %v, %v; want error with %q", c.name, r, err, c.want)
		} else if r != nil {
			t.Errorf("%s: a report with the error", c.name)
		}
	}
}

func TestProtocolsOrigins(t *testing.T) {
	r := &Report{Requests: []Request{
		{URL: "https://Example.com/", Protocol: "h2"},
		{URL: "https://example.com:443/a.css", Protocol: "h2"},
		{URL: "https://example.com/b.png", Protocol: "h3"},
		{URL: "http://example.com/c.js", Protocol: "http/1.1"},
		{URL: "https://example.com:8443/d.js", Protocol: "h2"},
		{URL: "https://cdn.example.com/e.js", Protocol: "h2"},
		{URL: "data:image/png;base64,AAAA", Protocol: "data"},
		{URL: "blob:https://example.com/0f0f", Protocol: "blob"},
		{URL: "::bad", Protocol: "h2"},
	}}
	for _, c := range []struct {
		origin string
		want   map[string]int
	}{
		{"https://example.com", map[string]int{"h2": 2, "h3": 1}},
		{"https://example.com:443", map[string]int{"h2": 2, "h3": 1}},
		{"HTTPS://EXAMPLE.COM/", map[string]int{"h2": 2, "h3": 1}},
		{"http://example.com:80", map[string]int{"http/1.1": 1}},
		{"https://example.com:8443", map[string]int{"h2": 1}},
		{"https://other.example", map[string]int{}},
		{"data:", map[string]int{}},
		{"", map[string]int{}},
		{"example.com", map[string]int{}},
	} {
		got := r.Protocols(c.origin)
		if len(got) != len(c.want) {
			t.Errorf("Protocols(%q) = %v, want %v", c.origin, got, c.want)
			continue
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("Protocols(%q) = %v, want %v", c.origin, got, c.want)
			}
		}
	}
}

// FuzzParse checks that Parse never panics and returns a report or an
// error. The fixture seeds are tens of KB, which makes the fuzzer spend
// minutes minimising each new input; run it with a bounded minimisation:
//
//	go test -run '^$' -fuzz FuzzParse -fuzzminimizetime 50x -fuzztime 1m ./lighthouse/
func FuzzParse(f *testing.F) {
	for _, name := range append(append([]string{}, okFixtures...), failFixtures...) {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte(`{"lighthouseVersion":"1","categories":{"performance":{}},"audits":{}}`))
	f.Add([]byte(`{"lighthouseVersion":"1","categories":{"performance":{"score":null}},"audits":{"first-contentful-paint":{},"speed-index":{},` +
		`"largest-contentful-paint":{},"interactive":{},"total-blocking-time":{},"cumulative-layout-shift":{"numericValue":1e400},` +
		`"total-byte-weight":{"numericValue":1e300},"network-requests":{"details":{"items":[{"url":"https://a/","statusCode":-1e30}]}},` +
		`"metrics":{"details":{"items":[]}}},"runWarnings":[1,null,{"a":2}],"runtimeError":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			if r != nil {
				t.Fatal("report and error")
			}
			return
		}
		if r == nil {
			t.Fatal("no report, no error")
		}
		_ = r.Check()
		_ = r.Protocols("https://a")
		for _, q := range r.Requests {
			_ = r.Protocols(q.URL)
		}
	})
}
