package plan

import (
	"strings"
	"testing"
)

// TestCaptureFields: capture, capture_snap and capture_limit parse, keep
// through the canonical YAML, and leave the plan's hash alone.
func TestCaptureFields(t *testing.T) {
	plain := mustParse(t, minimal)
	if c := plain.Capture(); c.Pcap() || c.SnapLen() != SnapHeaders || c.LimitBytes() != DefaultCaptureLimit {
		t.Fatalf("default capture %+v", c)
	}
	cases := []struct {
		text  string
		snap  int
		limit int64
	}{
		{"capture: pcap\n", 0, 0},
		{"capture: [pcap]\ncapture_snap: whole\ncapture_limit: 250MB\n", SnapWhole, 250_000_000},
		{"capture: pcap\ncapture_snap: 300\n", 300, 0},
		{"capture: pcap\ncapture_snap: headers\n", SnapHeaders, 0},
	}
	for _, c := range cases {
		p := mustParse(t, c.text+minimal)
		got := p.Capture()
		if !got.Pcap() || got.Snap != c.snap || got.Limit != c.limit {
			t.Errorf("%q: %+v", c.text, got)
		}
		if p.Hash() != plain.Hash() {
			t.Errorf("%q: capture changed the plan's hash", c.text)
		}
		again := mustParse(t, string(p.render()))
		if a := again.Capture(); a.Snap != got.Snap || a.Limit != got.Limit || !a.Pcap() {
			t.Errorf("%q: after rendering %+v\n%s", c.text, a, p.render())
		}
	}
}

func TestCaptureErrors(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"capture: pcapng\n", `capture: "pcapng": unknown value, did you mean "pcap"? (allowed: pcap, har)`},
		{"capture_snap: whole\n", "capture_snap: \"whole\": only with capture"},
		{"capture: pcap\ncapture_snap: 20\n", "want headers, whole, or a byte count from 64 to 65535"},
		{"capture: pcap\ncapture_limit: 10KB\n", "want at least 1MB"},
		{"capture: pcap\ncapture_limit: lots\n", "capture limit \"lots\""},
	} {
		_, err := Parse("plan.yaml", []byte(c.text+minimal))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, c.want)
		}
	}
}

func TestCaptureFlags(t *testing.T) {
	if k, err := ParseCaptureKinds("pcap, pcap"); err != nil || len(k) != 1 {
		t.Fatalf("%v %v", k, err)
	}
	for _, bad := range []string{"", "har2", ","} {
		if _, err := ParseCaptureKinds(bad); err == nil {
			t.Errorf("--capture %q accepted", bad)
		}
	}
	if n, err := ParseSnap("200B"); err != nil || n != 200 {
		t.Fatalf("snap %d %v", n, err)
	}
	m := CaptureSpec{Kinds: []string{CapturePcap}, Snap: 200}.Merge(CaptureSpec{Kinds: []string{CapturePcap}, Limit: 5e6})
	if len(m.Kinds) != 1 || m.Snap != 200 || m.Limit != 5e6 {
		t.Fatalf("merged %+v", m)
	}
}
