package lighthouse

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// Audit ids of the six metrics of the Lighthouse 6-9 performance score, in
// the order Check examines them.
const (
	AuditFCP = "first-contentful-paint"
	AuditSI  = "speed-index"
	AuditLCP = "largest-contentful-paint"
	AuditTTI = "interactive"
	AuditTBT = "total-blocking-time"
	AuditCLS = "cumulative-layout-shift"
)

// metricAudits lists the six metric audits in the order Check examines
// them (see MetricAudits).
var metricAudits = []string{AuditFCP, AuditSI, AuditLCP, AuditTTI, AuditTBT, AuditCLS}

// MetricAudits returns the ids of the six metric audits in the order Check
// examines them, in a new slice.
func MetricAudits() []string { return slices.Clone(metricAudits) }

// Other audits Parse reads.
const (
	auditMetrics         = "metrics"
	auditNetworkRequests = "network-requests"
	auditTotalByteWeight = "total-byte-weight"
)

// studyWeights are the weights of Report.StudyScore (see StudyWeights).
var studyWeights = map[string]float64{
	AuditFCP: 15,
	AuditSI:  15,
	AuditLCP: 25,
	AuditTTI: 15,
	AuditTBT: 25,
	AuditCLS: 5,
}

// StudyWeights returns the weights (summing to 100) of the performance
// score of Lighthouse 6 and 7, which the replicated study used: FCP 15,
// SI 15, LCP 25, TTI 15, TBT 25, CLS 5, keyed by audit id, in a new map.
// Lighthouse 8 and later weight the metrics differently, and 10 and later
// drop TTI (see Report.Score).
func StudyWeights() map[string]float64 { return maps.Clone(studyWeights) }

// slowLoadWarning is the start of the run warning Lighthouse adds when the
// page did not finish loading within --max-wait-for-load (its UIString
// warningTimeout in core/gather/driver/navigation.js: "The page loaded too
// slowly to finish within the time limit. Results may be incomplete.").
// Lighthouse still exits 0 and computes the metrics from what it saw. Run
// passes --locale=en-US so that the text is English.
const slowLoadWarning = "The page loaded too slowly to finish within the time limit"

// Report is what quicbench takes from a Lighthouse JSON report (an "LHR").
// The metrics and observed events are in milliseconds since the navigation
// started.
type Report struct {
	LighthouseVersion string // lighthouseVersion, e.g. "12.8.2"
	RequestedURL      string // requestedUrl
	// FinalURL is mainDocumentUrl, the main document after redirects (its
	// deprecated alias finalUrl when absent).
	FinalURL string
	// FinalDisplayedURL is finalDisplayedUrl, the URL shown at the end of
	// the load ("chrome-error://chromewebdata/" after an interstitial,
	// "about:blank" when nothing was painted).
	FinalDisplayedURL string
	UserAgent         string  // environment.hostUserAgent, the browser's own user agent
	BenchmarkIndex    float64 // environment.benchmarkIndex, Lighthouse's CPU benchmark of the host

	// Metrics, from audits[id].numericValue: milliseconds, except CLS,
	// which is unitless. 0 when Lighthouse gave none (see MetricValues and
	// Check).
	FCP, SI, LCP, TTI, TBT float64
	CLS                    float64

	// MetricValues maps each of the six metric audit ids (MetricAudits())
	// whose numericValue Lighthouse gave to that value; a missing key is a
	// metric Lighthouse could not compute.
	MetricValues map[string]float64
	// MetricScores maps each of the six metric audit ids whose score
	// Lighthouse gave to that score (0..1, two decimals).
	MetricScores map[string]float64
	// AuditErrors maps a metric audit id (or "metrics", "network-requests",
	// "total-byte-weight") to the errorMessage of that audit when
	// Lighthouse could not compute it.
	AuditErrors map[string]string

	// Score is categories.performance.score, Lighthouse 12's weighting
	// (FCP 10, SI 10, LCP 25, TBT 30, CLS 25) rounded to two decimals. 0
	// when Lighthouse gave none (a weighted metric failed; Check says so).
	Score float64
	// StudyScore is the weighted mean of MetricScores with StudyWeights(),
	// not rounded. 0 when a metric has no score (Check says so).
	StudyScore float64

	// ObservedLoad and ObservedDOMContentLoaded are the load and
	// DOMContentLoaded events as Lighthouse observed them
	// (audits.metrics.details.items[0].observedLoad and
	// .observedDomContentLoaded), in whole milliseconds; 0 when the event
	// was not observed.
	ObservedLoad, ObservedDOMContentLoaded float64

	// TotalByteWeight is audits["total-byte-weight"].numericValue, the
	// bytes transferred for all requests.
	TotalByteWeight int64

	// Requests are audits["network-requests"].details.items, in
	// Lighthouse's order (by start time, the document first).
	Requests []Request

	// Warnings are the top-level runWarnings.
	Warnings []string

	// RuntimeError is the top-level runtimeError, nil when absent. With a
	// runtime error the metrics are missing and the CLI exits 1.
	RuntimeError *RuntimeError
}

// Request is one network request of the page load, an item of the
// network-requests audit.
type Request struct {
	URL          string
	Protocol     string // as Chromium reports it: "http/1.1", "h2", "h3"; "" when it never got a response
	ResourceType string // e.g. "Document", "Stylesheet", "Image"
	MimeType     string
	StatusCode   int     // -1 when there was no response
	TransferSize int64   // bytes on the wire, headers included
	ResourceSize int64   // decoded body bytes
	StartMs      float64 // networkRequestTime: ms since the earliest rendererStartTime of the page's requests (not the navigation start the metrics count from)
	EndMs        float64 // networkEndTime, on the same clock; 0 when the request did not finish
	Finished     bool
}

// RuntimeError is the runtimeError of a report: Lighthouse could not load
// the page or measure it (e.g. code "NO_FCP", "INSECURE_DOCUMENT_REQUEST",
// "CHROME_INTERSTITIAL_ERROR", "PAGE_HUNG").
type RuntimeError struct {
	Code    string
	Message string
}

func (e *RuntimeError) Error() string {
	return "lighthouse: runtime error " + e.Code + ": " + e.Message
}

// IncompleteError is returned by Report.Check: the report does not hold a
// complete measurement, for the first reason found.
type IncompleteError struct {
	Reason string
	// Err is the *RuntimeError when that is the reason, else nil.
	Err error
}

func (e *IncompleteError) Error() string {
	return "lighthouse: incomplete measurement: " + e.Reason
}

// Unwrap returns the *RuntimeError behind the error, if any.
func (e *IncompleteError) Unwrap() error { return e.Err }

// The JSON shapes Parse reads. Pointers tell null and missing from zero.
type lhr struct {
	LighthouseVersion string  `json:"lighthouseVersion"`
	RequestedURL      string  `json:"requestedUrl"`
	MainDocumentURL   string  `json:"mainDocumentUrl"`
	FinalURL          string  `json:"finalUrl"`
	FinalDisplayedURL string  `json:"finalDisplayedUrl"`
	RunWarnings       []any   `json:"runWarnings"`
	RuntimeError      *lhrErr `json:"runtimeError"`
	Environment       struct {
		HostUserAgent  string   `json:"hostUserAgent"`
		BenchmarkIndex *float64 `json:"benchmarkIndex"`
	} `json:"environment"`
	Categories struct {
		Performance *lhrCategory `json:"performance"`
	} `json:"categories"`
	Audits map[string]*lhrAudit `json:"audits"`
}

type lhrErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type lhrCategory struct {
	Score     *float64 `json:"score"`
	AuditRefs []struct {
		ID     string  `json:"id"`
		Weight float64 `json:"weight"`
	} `json:"auditRefs"`
}

type lhrAudit struct {
	Score        *float64        `json:"score"`
	NumericValue *float64        `json:"numericValue"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

type lhrRequest struct {
	URL                string   `json:"url"`
	Protocol           string   `json:"protocol"`
	ResourceType       string   `json:"resourceType"`
	MimeType           string   `json:"mimeType"`
	StatusCode         *float64 `json:"statusCode"`
	TransferSize       *float64 `json:"transferSize"`
	ResourceSize       *float64 `json:"resourceSize"`
	NetworkRequestTime *float64 `json:"networkRequestTime"`
	NetworkEndTime     *float64 `json:"networkEndTime"`
	Finished           bool     `json:"finished"`
}

// Parse reads a Lighthouse JSON report. It fails only when the data is not
// a report of the performance category (not JSON, no lighthouseVersion, no
// categories.performance, no audits or a metric audit absent altogether);
// a report of a failed run parses, with RuntimeError set and the metrics
// missing, and Check tells whether a report is a complete measurement.
func Parse(data []byte) (*Report, error) {
	var l lhr
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("lighthouse report: %w", err)
	}
	if l.LighthouseVersion == "" {
		return nil, errors.New("lighthouse report: no lighthouseVersion")
	}
	perf := l.Categories.Performance
	if perf == nil {
		return nil, errors.New("lighthouse report: no categories.performance")
	}
	if l.Audits == nil {
		return nil, errors.New("lighthouse report: no audits")
	}
	for _, id := range metricAudits {
		if l.Audits[id] == nil {
			return nil, fmt.Errorf("lighthouse report: no audits[%q]", id)
		}
	}

	r := &Report{
		LighthouseVersion: l.LighthouseVersion,
		RequestedURL:      l.RequestedURL,
		FinalURL:          l.MainDocumentURL,
		FinalDisplayedURL: l.FinalDisplayedURL,
		UserAgent:         l.Environment.HostUserAgent,
		MetricValues:      map[string]float64{},
		MetricScores:      map[string]float64{},
		AuditErrors:       map[string]string{},
	}
	if r.FinalURL == "" {
		r.FinalURL = l.FinalURL
	}
	if l.Environment.BenchmarkIndex != nil {
		r.BenchmarkIndex = *l.Environment.BenchmarkIndex
	}
	if perf.Score != nil {
		r.Score = *perf.Score
	}
	for _, w := range l.RunWarnings {
		if s, ok := w.(string); ok {
			r.Warnings = append(r.Warnings, s)
		} else if b, err := json.Marshal(w); err == nil {
			r.Warnings = append(r.Warnings, string(b))
		}
	}
	if l.RuntimeError != nil {
		r.RuntimeError = &RuntimeError{Code: l.RuntimeError.Code, Message: l.RuntimeError.Message}
	}

	fields := map[string]*float64{AuditFCP: &r.FCP, AuditSI: &r.SI, AuditLCP: &r.LCP, AuditTTI: &r.TTI, AuditTBT: &r.TBT, AuditCLS: &r.CLS}
	for _, id := range metricAudits {
		a := l.Audits[id]
		if a.NumericValue != nil {
			r.MetricValues[id] = *a.NumericValue
			*fields[id] = *a.NumericValue
		}
		if a.Score != nil {
			r.MetricScores[id] = *a.Score
		}
		if a.ErrorMessage != "" {
			r.AuditErrors[id] = a.ErrorMessage
		}
	}
	if s, err := WeightedScore(r.MetricScores, studyWeights); err == nil {
		r.StudyScore = s
	}

	if a := l.Audits[auditTotalByteWeight]; a != nil {
		if a.NumericValue != nil {
			r.TotalByteWeight = toInt64(*a.NumericValue)
		}
		if a.ErrorMessage != "" {
			r.AuditErrors[auditTotalByteWeight] = a.ErrorMessage
		}
	}

	if a := l.Audits[auditMetrics]; a != nil {
		if a.ErrorMessage != "" {
			r.AuditErrors[auditMetrics] = a.ErrorMessage
		}
		var d struct {
			Items []struct {
				ObservedLoad             *float64 `json:"observedLoad"`
				ObservedDomContentLoaded *float64 `json:"observedDomContentLoaded"`
			} `json:"items"`
		}
		if len(a.Details) > 0 {
			if err := json.Unmarshal(a.Details, &d); err != nil {
				return nil, fmt.Errorf("lighthouse report: audits.metrics.details: %w", err)
			}
		}
		if len(d.Items) > 0 {
			if v := d.Items[0].ObservedLoad; v != nil {
				r.ObservedLoad = *v
			}
			if v := d.Items[0].ObservedDomContentLoaded; v != nil {
				r.ObservedDOMContentLoaded = *v
			}
		}
	}

	if a := l.Audits[auditNetworkRequests]; a != nil {
		if a.ErrorMessage != "" {
			r.AuditErrors[auditNetworkRequests] = a.ErrorMessage
		}
		var d struct {
			Items []lhrRequest `json:"items"`
		}
		if len(a.Details) > 0 {
			if err := json.Unmarshal(a.Details, &d); err != nil {
				return nil, fmt.Errorf("lighthouse report: audits[%q].details: %w", auditNetworkRequests, err)
			}
		}
		for _, q := range d.Items {
			r.Requests = append(r.Requests, Request{
				URL:          q.URL,
				Protocol:     q.Protocol,
				ResourceType: q.ResourceType,
				MimeType:     q.MimeType,
				StatusCode:   int(toInt64(deref(q.StatusCode))),
				TransferSize: toInt64(deref(q.TransferSize)),
				ResourceSize: toInt64(deref(q.ResourceSize)),
				StartMs:      deref(q.NetworkRequestTime),
				EndMs:        deref(q.NetworkEndTime),
				Finished:     q.Finished,
			})
		}
	}
	return r, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// toInt64 converts a JSON number to an int64, saturating instead of
// overflowing (NaN cannot come out of encoding/json).
func toInt64(v float64) int64 {
	switch {
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(math.Round(v))
}

// WeightedScore returns the weighted mean of scores (audit id -> score)
// with weights (audit id -> weight), the way Lighthouse computes a category
// score but without its rounding to two decimals. Audits of weight 0 are
// ignored; an audit with a positive weight and no score is an error, as is
// a total weight that is not positive.
func WeightedScore(scores, weights map[string]float64) (float64, error) {
	ids := make([]string, 0, len(weights))
	for id := range weights {
		ids = append(ids, id)
	}
	sort.Strings(ids) // a fixed summation order, for bit-identical results
	var sum, total float64
	for _, id := range ids {
		w := weights[id]
		if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
			return 0, fmt.Errorf("lighthouse: weight of %s is %v", id, w)
		}
		if w == 0 {
			continue
		}
		s, ok := scores[id]
		if !ok {
			return 0, fmt.Errorf("lighthouse: %s has weight %v but no score", id, w)
		}
		sum += w * s
		total += w
	}
	if total <= 0 {
		return 0, errors.New("lighthouse: no audit with a positive weight")
	}
	return sum / total, nil
}

// Check returns nil when the report holds a complete measurement, else an
// *IncompleteError naming the first problem among, in this order: a
// runtime error (the error then unwraps to the *RuntimeError); a run
// warning saying that the page loaded too slowly to finish within the time
// limit (Lighthouse still exits 0 then); a metric audit (MetricAudits()
// order) without numericValue or score; no network requests; a request that
// did not finish.
func (r *Report) Check() error {
	if r.RuntimeError != nil {
		return &IncompleteError{Reason: fmt.Sprintf("runtime error %s: %s", r.RuntimeError.Code, r.RuntimeError.Message), Err: r.RuntimeError}
	}
	for _, w := range r.Warnings {
		if strings.Contains(w, slowLoadWarning) {
			return &IncompleteError{Reason: "run warning: " + w}
		}
	}
	for _, id := range metricAudits {
		_, hasValue := r.MetricValues[id]
		_, hasScore := r.MetricScores[id]
		what := ""
		switch {
		case !hasValue && !hasScore:
			what = "no numericValue and no score"
		case !hasValue:
			what = "no numericValue"
		case !hasScore:
			what = "no score"
		default:
			continue
		}
		reason := fmt.Sprintf("audit %s has %s", id, what)
		if msg := r.AuditErrors[id]; msg != "" {
			reason += ": " + msg
		}
		return &IncompleteError{Reason: reason}
	}
	if len(r.Requests) == 0 {
		reason := "no network requests"
		if msg := r.AuditErrors[auditNetworkRequests]; msg != "" {
			reason += ": " + msg
		}
		return &IncompleteError{Reason: reason}
	}
	for i, q := range r.Requests {
		if !q.Finished {
			return &IncompleteError{Reason: fmt.Sprintf("request %d of %d (%s) did not finish", i+1, len(r.Requests), q.URL)}
		}
	}
	return nil
}

// Protocols counts the requests to origin (scheme://host[:port]; the
// scheme's default port may be left out) by the protocol Lighthouse
// reports for them ("http/1.1", "h2", "h3"; "" for a request that got no
// response). Requests to other origins and data:, blob: and similar URLs
// are ignored. An origin that does not parse matches nothing.
func (r *Report) Protocols(origin string) map[string]int {
	counts := map[string]int{}
	want, ok := normOrigin(origin)
	if !ok {
		return counts
	}
	for _, q := range r.Requests {
		if got, ok := normOrigin(q.URL); ok && got == want {
			counts[q.Protocol]++
		}
	}
	return counts
}

// normOrigin returns scheme://host:port of an http(s) URL or origin, with
// the default port filled in and scheme and host in lower case.
func normOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	switch scheme {
	case "https":
		if port == "" {
			port = "443"
		}
	case "http":
		if port == "" {
			port = "80"
		}
	default:
		return "", false
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}
