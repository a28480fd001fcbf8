package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// Evidence a run keeps per sample (docs/plan-format.md, "Evidence"):
//
//	capture: pcap          # a pcapng per sample from the emulator (with its TLS secrets)
//	capture: [pcap, har]   # and a HAR of every browser sample's page load
//	capture_snap: headers  # bytes kept per packet: headers (default), whole, or a count
//	capture_limit: 1GB     # the most the run's captures hold (default 1GB)
//
// None of these enters the plan's Hash: capturing does not change which
// samples a run takes (and docs/performance.md shows it does not change
// what they measure beyond noise), so a run may be resumed with or
// without it.

// Capture kinds.
const (
	CapturePcap = "pcap" // the emulator's packets of each sample, pcapng
	CaptureHAR  = "har"  // a HAR 1.2 of each browser sample's page load
)

// CaptureKinds lists the values of capture.
var CaptureKinds = []string{CapturePcap, CaptureHAR}

// Snap lengths: capture_snap headers and whole.
const (
	SnapHeaders = 128   // IP and TCP/UDP headers and the first payload bytes (forward.DefaultSnap)
	SnapWhole   = 65535 // whole packets (the emulator keeps at most its buffer size, 2048 bytes)
	MinSnap     = 64    // an IPv6 header and a TCP header without options fit
)

// DefaultCaptureLimit is capture_limit's default: 1 GB of packet blocks per
// run.
const DefaultCaptureLimit = 1_000_000_000

// CaptureSpec is what a plan (or `quicbench run --capture`) asks to keep.
type CaptureSpec struct {
	Kinds []string // of CaptureKinds; none: no capture
	Snap  int      // bytes per packet; 0: SnapHeaders
	Limit int64    // bytes per run; 0: DefaultCaptureLimit
}

// Pcap reports whether packets are captured.
func (c CaptureSpec) Pcap() bool { return contains(c.Kinds, CapturePcap) }

// HAR reports whether browser samples keep a HAR of their page load.
func (c CaptureSpec) HAR() bool { return contains(c.Kinds, CaptureHAR) }

// SnapLen returns the snap length in effect.
func (c CaptureSpec) SnapLen() int {
	if c.Snap == 0 {
		return SnapHeaders
	}
	return c.Snap
}

// LimitBytes returns the run's limit in effect.
func (c CaptureSpec) LimitBytes() int64 {
	if c.Limit == 0 {
		return DefaultCaptureLimit
	}
	return c.Limit
}

// Merge returns c with o's kinds added, and o's snap length and limit
// where o sets them: a plan's capture with the command line's on top.
func (c CaptureSpec) Merge(o CaptureSpec) CaptureSpec {
	out := CaptureSpec{Kinds: append([]string(nil), c.Kinds...), Snap: c.Snap, Limit: c.Limit}
	for _, k := range o.Kinds {
		if !contains(out.Kinds, k) {
			out.Kinds = append(out.Kinds, k)
		}
	}
	if o.Snap != 0 {
		out.Snap = o.Snap
	}
	if o.Limit != 0 {
		out.Limit = o.Limit
	}
	return out
}

// Capture returns what the plan asks to keep per sample.
func (p *Plan) Capture() CaptureSpec {
	c := p.d.capture
	c.Kinds = append([]string(nil), c.Kinds...)
	return c
}

// ParseCaptureKinds reads a comma-separated list of capture kinds (the
// value of --capture).
func ParseCaptureKinds(s string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if !contains(CaptureKinds, k) {
			return nil, fmt.Errorf("unknown capture %q (allowed: %s)", k, strings.Join(CaptureKinds, ", "))
		}
		if !contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no capture kind in %q (allowed: %s)", s, strings.Join(CaptureKinds, ", "))
	}
	return out, nil
}

// ParseSnap reads a snap length: headers, whole, or a byte count from
// MinSnap to SnapWhole.
func ParseSnap(s string) (int, error) {
	switch t := strings.TrimSpace(s); t {
	case "headers":
		return SnapHeaders, nil
	case "whole":
		return SnapWhole, nil
	default:
		n, err := strconv.Atoi(strings.TrimSuffix(t, "B"))
		if err != nil || n < MinSnap || n > SnapWhole {
			return 0, fmt.Errorf("snap length %q: want headers, whole, or a byte count from %d to %d", s, MinSnap, SnapWhole)
		}
		return n, nil
	}
}

// ParseCaptureLimit reads a capture limit: a size of at least 1MB.
func ParseCaptureLimit(s string) (int64, error) {
	n, err := ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("capture limit %q: %w", s, err)
	}
	if n < 1_000_000 {
		return 0, fmt.Errorf("capture limit %q: want at least 1MB", s)
	}
	return n, nil
}

// captureFields decodes capture, capture_snap and capture_limit.
func (d *decoder) captureFields(f map[string]field, out *doc) {
	if v, ok := f["capture"]; ok {
		if s, ok := d.choices(v.val, "capture", CaptureKinds); ok {
			out.capture.Kinds = s
		}
	}
	for _, k := range []string{"capture_snap", "capture_limit"} {
		v, ok := f[k]
		if !ok {
			continue
		}
		if _, set := f["capture"]; !set {
			d.fail(v.val, k, "only with capture (what to capture)")
			continue
		}
		s, ok := d.str(v.val, k)
		if !ok {
			continue
		}
		if k == "capture_snap" {
			if n, err := ParseSnap(s); err != nil {
				d.fail(v.val, k, err.Error())
			} else {
				out.capture.Snap = n
			}
		} else if n, err := ParseCaptureLimit(s); err != nil {
			d.fail(v.val, k, err.Error())
		} else {
			out.capture.Limit = n
		}
	}
}

// renderCapture adds the capture fields the plan sets to the canonical
// YAML.
func renderCapture(top mapBuilder, c CaptureSpec) {
	if len(c.Kinds) == 0 {
		return
	}
	top.add("capture", oneOrList(c.Kinds, false))
	switch c.Snap {
	case 0:
	case SnapHeaders:
		top.add("capture_snap", scalar("headers"))
	case SnapWhole:
		top.add("capture_snap", scalar("whole"))
	default:
		top.add("capture_snap", scalar(strconv.Itoa(c.Snap)))
	}
	if c.Limit != 0 {
		top.add("capture_limit", scalar(FormatSize(c.Limit)))
	}
}
