package spec

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseValid(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		in        string
		want      Link
		canonical string
	}{
		{"", Link{}, "none"},
		{"  \t\n", Link{}, "none"},
		{"none", Link{}, "none"},
		{"NONE", Link{}, "none"},
		{"delay 25ms", Link{Delay: 25 * ms}, "delay 25ms"},
		{"latency 1.5s", Link{Delay: 1500 * ms}, "delay 1.5s"},
		{"delay 100us", Link{Delay: 100 * time.Microsecond}, "delay 100us"},
		{"delay 250ns", Link{Delay: 250}, "delay 250ns"},
		{"delay 1.234567ms", Link{Delay: 1234567}, "delay 1.234567ms"},
		{"delay 0.5msec", Link{Delay: 500 * time.Microsecond}, "delay 500us"},
		{"delay 2SECS", Link{Delay: 2 * time.Second}, "delay 2s"},
		{"delay 0", Link{}, "none"},
		{"delay 10ms 5ms", Link{Delay: 10 * ms, Jitter: 5 * ms}, "delay 10ms 5ms"},
		{"delay 10ms 5ms 25%", Link{Delay: 10 * ms, Jitter: 5 * ms, DelayCorr: 25}, "delay 10ms 5ms 25%"},
		{"delay 10ms 5ms 25 distribution normal", Link{Delay: 10 * ms, Jitter: 5 * ms, DelayCorr: 25, Distribution: DistNormal},
			"delay 10ms 5ms 25% distribution normal"},
		{"distribution paretonormal delay 0ms 2ms", Link{Jitter: 2 * ms, Distribution: DistParetoNormal},
			"delay 0ms 2ms distribution paretonormal"},
		{"delay 10ms 5ms distribution uniform", Link{Delay: 10 * ms, Jitter: 5 * ms}, "delay 10ms 5ms"},
		{"delay 10ms 0ms 50%", Link{Delay: 10 * ms}, "delay 10ms"},
		{"loss 1%", Link{Loss: Loss{Model: LossRandom, Percent: 1}}, "loss 1%"},
		{"loss random 0.5 25", Link{Loss: Loss{Model: LossRandom, Percent: 0.5, Correlation: 25}}, "loss 0.5% 25%"},
		{"drop 100%", Link{Loss: Loss{Model: LossRandom, Percent: 100}}, "loss 100%"},
		{"loss 0% 30%", Link{}, "none"},
		{"loss 0.0001%", Link{Loss: Loss{Model: LossRandom, Percent: 0.0001}}, "loss 0.0001%"},
		{"loss gemodel 1%", Link{Loss: Loss{Model: LossGemodel, P: 1, R: 99, BadLoss: 100}}, "loss gemodel 1% 99% 100% 0%"},
		{"loss gemodel 1% 10%", Link{Loss: Loss{Model: LossGemodel, P: 1, R: 10, BadLoss: 100}}, "loss gemodel 1% 10% 100% 0%"},
		{"loss gemodel 1 10 70 0.1", Link{Loss: Loss{Model: LossGemodel, P: 1, R: 10, BadLoss: 70, GoodLoss: 0.1}},
			"loss gemodel 1% 10% 70% 0.1%"},
		{"loss state 2", Link{Loss: Loss{Model: LossState, P13: 2, P31: 98, P23: 100}}, "loss state 2% 98% 0% 100% 0%"},
		{"loss state 2 50 10 20 1", Link{Loss: Loss{Model: LossState, P13: 2, P31: 50, P32: 10, P23: 20, P14: 1}},
			"loss state 2% 50% 10% 20% 1%"},
		{"duplicate 1%", Link{Duplicate: 1}, "duplicate 1%"},
		{"duplicate 1% 5%", Link{Duplicate: 1, DuplicateCorr: 5}, "duplicate 1% 5%"},
		{"corrupt 0.1%", Link{Corrupt: 0.1}, "corrupt 0.1%"},
		{"corrupt 0 50", Link{}, "none"},
		{"delay 10ms reorder 25% 50%", Link{Delay: 10 * ms, Reorder: 25, ReorderCorr: 50, Gap: 1}, "delay 10ms reorder 25% 50%"},
		{"reorder 100% gap 5 delay 10ms", Link{Delay: 10 * ms, Reorder: 100, Gap: 5}, "delay 10ms reorder 100% gap 5"},
		{"rate 10mbit", Link{Rate: 10_000_000}, "rate 10mbit"},
		{"rate 1.5Mbit", Link{Rate: 1_500_000}, "rate 1.5mbit"},
		{"rate 1gbit", Link{Rate: 1_000_000_000}, "rate 1gbit"},
		{"rate 100kbit", Link{Rate: 100_000}, "rate 100kbit"},
		{"rate 8192", Link{Rate: 8192}, "rate 8.192kbit"},
		{"rate 1kbps", Link{Rate: 8000}, "rate 8kbit"},
		{"rate 1mibit", Link{Rate: 1 << 20}, "rate 1.048576mbit"},
		{"rate 2MBps", Link{Rate: 16_000_000}, "rate 16mbit"},
		{"rate 1KiBps", Link{Rate: 8192}, "rate 8.192kbit"},
		{"rate 999bit", Link{Rate: 999}, "rate 999bit"},
		{"rate 1tbit", Link{Rate: 1e12}, "rate 1tbit"},
		{"rate 5kbit 20 100 5", Link{Rate: 5000, PacketOverhead: 20, CellSize: 100, CellOverhead: 5}, "rate 5kbit 20 100 5"},
		{"rate 5kbit -14", Link{Rate: 5000, PacketOverhead: -14}, "rate 5kbit -14"},
		{"rate 5kbit 0 48", Link{Rate: 5000, CellSize: 48}, "rate 5kbit 0 48"},
		{"limit 100 rate 10mbit", Link{Limit: 100, Rate: 10_000_000}, "limit 100 rate 10mbit"},
		{"limit 50", Link{Limit: 50}, "limit 50"},
		{"rate 10mbit queue droptail", Link{Rate: 10_000_000}, "rate 10mbit"},
		{"rate 10mbit queue droptail bytes 150000", Link{Rate: 10_000_000, QueueBytes: 150000},
			"rate 10mbit queue droptail bytes 150000"},
		{"rate 10mbit queue droptail bytes 64kb", Link{Rate: 10_000_000, QueueBytes: 65536},
			"rate 10mbit queue droptail bytes 65536"},
		{"rate 10mbit queue codel", Link{Rate: 10_000_000, Queue: QueueCoDel}, "rate 10mbit queue codel"},
		{"rate 10mbit queue codel limit 1000", Link{Rate: 10_000_000, Queue: QueueCoDel, Limit: 1000},
			"limit 1000 rate 10mbit queue codel"},
		{"rate 10mbit queue codel target 10ms interval 200ms bytes 1mb",
			Link{Rate: 10_000_000, Queue: QueueCoDel, Target: 10 * ms, Interval: 200 * ms, QueueBytes: 1 << 20},
			"rate 10mbit queue codel bytes 1048576 target 10ms interval 200ms"},
		{"trace traces/TMobile-LTE-short.up", Link{Trace: "traces/TMobile-LTE-short.up"},
			"trace traces/TMobile-LTE-short.up"},
		{`trace "my traces/a b.up" queue codel`, Link{Trace: "my traces/a b.up", Queue: QueueCoDel},
			`queue codel trace "my traces/a b.up"`},
		{"onoff 10s 500ms", Link{On: 10 * time.Second, Off: 500 * ms}, "onoff 10s 500ms"},
		{"Delay 10ms LOSS 1%", Link{Delay: 10 * ms, Loss: Loss{Model: LossRandom, Percent: 1}}, "delay 10ms loss 1%"},
		{"mtu 1280", Link{MTU: 1280}, "mtu 1280"},
		{"mtu 1280 icmp", Link{MTU: 1280}, "mtu 1280"},
		{"MTU 1400 BlackHole delay 5ms", Link{MTU: 1400, MTUMode: MTUBlackhole, Delay: 5 * ms}, "delay 5ms mtu 1400 blackhole"},
		{"mtu 68", Link{MTU: 68}, "mtu 68"},
		{"mtu 1500 blackhole", Link{MTU: 1500, MTUMode: MTUBlackhole}, "mtu 1500 blackhole"},
		{"mtu 576 rate 1mbit", Link{MTU: 576, Rate: 1_000_000}, "rate 1mbit mtu 576"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q) =\n  %+v\nwant\n  %+v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.canonical {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, s, tt.canonical)
		}
		again, err := Parse(got.String())
		if err != nil || again != got {
			t.Errorf("round trip of %q: %+v, %v", tt.in, again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"delay -5ms", `link spec: token 2 "-5ms": delay must not be negative`},
		{"loss 150%", `link spec: token 2 "150%": loss must be at most 100%`},
		{"loss -1%", `link spec: token 2 "-1%": loss must not be negative`},
		{"rate 0", `link spec: token 2 "0": rate must be positive (leave rate out for an unlimited link)`},
		{"rate 0mbit", `link spec: token 2 "0mbit": rate must be positive (leave rate out for an unlimited link)`},
		{"rate -1mbit", `link spec: token 2 "-1mbit": rate must not be negative`},
		{"rate 10furlongs", `link spec: token 2 "10furlongs": rate has an unknown rate unit "furlongs"`},
		{"rate 20tbit", `link spec: token 2 "20tbit": rate is too large (at most 10tbit)`},
		{"rate 0.4bit", `link spec: token 2 "0.4bit": rate must be positive`},
		{"jitter 5ms", `link spec: token 1 "jitter": unknown keyword (want one of limit, delay,`},
		{"delay 10ms foo", `link spec: token 3 "foo": unknown keyword`},
		{"delay 10ms 5ms 20% 7", `link spec: token 5 "7": unexpected value: every value follows a keyword`},
		{"delay", `link spec: token 1 "delay": needs a TIME (e.g. delay 25ms)`},
		{"delay 10ms loss", `link spec: token 3 "loss": needs a PERCENT (loss)`},
		{"delay 100", `link spec: token 2 "100": delay needs a unit (s, ms, us or ns)`},
		{"delay 10parsecs", `link spec: token 2 "10parsecs": delay has an unknown time unit "parsecs"`},
		{"delay ms", `link spec: token 2 "ms": delay is not a time`},
		{"delay 25h", `link spec: token 2 "25h": delay has an unknown time unit "h"`},
		{"delay 90000s", `link spec: token 2 "90000s": delay is too large (at most 86400s)`},
		{"delay 10ms -1ms", `link spec: token 3 "-1ms": jitter must not be negative`},
		{"delay 10ms 1ms 101%", `link spec: token 4 "101%": delay correlation must be at most 100%`},
		{"delay 1e3ms", `link spec: token 2 "1e3ms": delay is not a time`},
		{"delay 10ms delay 20ms", `link spec: token 3 "delay": delay given twice (first as token 1)`},
		{"loss 1% drop 2%", `link spec: token 3 "drop": loss given twice (first as token 1)`},
		{"loss gemodel", `link spec: token 2 "gemodel": needs a PERCENT (gemodel P)`},
		{"loss gemodel 1% 200%", `link spec: token 4 "200%": gemodel R must be at most 100%`},
		{"loss bursty 1%", `link spec: token 2 "bursty": unknown loss model`},
		{"loss 1x", `link spec: token 2 "1x": loss is not a percentage`},
		{"loss nan", `link spec: token 2 "nan": unknown loss model`},
		{"loss state 60 10 10 10 50", `link spec: token 2 "state": state P13 + P14 must not exceed 100%`},
		{"loss state 10 60 50", `link spec: token 2 "state": state P31 + P32 must not exceed 100%`},
		{"distribution normal", `link spec: token 1 "distribution": distribution needs a jitter`},
		{"delay 1ms 1ms distribution gamma", `link spec: token 5 "gamma": unknown distribution`},
		{"reorder 25%", `link spec: token 1 "reorder": reorder needs a delay`},
		{"delay 10ms gap 5", `link spec: token 3 "gap": gap needs a reorder probability`},
		{"delay 10ms reorder 5% gap 0", `link spec: token 6 "0": gap must be between 1 and 2147483647`},
		{"limit 0", `link spec: token 2 "0": limit must be between 1 and 2147483647`},
		{"limit 1.5", `link spec: token 2 "1.5": limit is not an integer`},
		{"limit", `link spec: token 1 "limit": needs a packet count (e.g. limit 1000)`},
		{"queue codel", `link spec: token 1 "queue": queue needs a rate or trace`},
		{"rate 1mbit queue red", `link spec: token 4 "red": unknown queue discipline (want droptail or codel)`},
		{"rate 1mbit queue droptail target 5ms", `link spec: token 5 "target": target is a codel parameter`},
		{"rate 1mbit queue codel target 0ms", `link spec: token 6 "0ms": codel target must be positive`},
		{"rate 1mbit queue codel bytes 0", `link spec: token 6 "0": queue bytes must be positive`},
		{"rate 1mbit queue codel bytes 2gb", `link spec: token 6 "2gb": queue bytes is too large (at most 1gb)`},
		{"rate 1mbit bytes 5", `link spec: token 3 "bytes": bytes belongs to a queue`},
		{"rate 1mbit trace x", `link spec: token 3 "trace": trace and rate both set the link's capacity; use one`},
		{"rate 1mbit 0 0 5", `link spec: token 5 "5": rate cell overhead needs a non-zero cell size`},
		{"rate 1mbit 0 48 -48", `link spec: token 5 "-48": rate cell overhead must leave cells a positive size`},
		{"rate 1mbit 99999", `link spec: token 3 "99999": rate packet overhead (bytes) must be between -65535 and 65535`},
		{"onoff 1s", `link spec: token 1 "onoff": needs an OFF TIME after the ON time`},
		{"onoff 0s 1s", `link spec: token 2 "0s": onoff ON time must be positive`},
		{"onoff 1s 0s", `link spec: token 3 "0s": onoff OFF time must be positive`},
		{"trace", `link spec: token 1 "trace": needs a FILE`},
		{`trace ""`, `link spec: token 2 "": trace file name is empty`},
		{`trace "abc`, `link spec: token 2 "\"abc": unterminated or invalid quoted string`},
		{`trace "a"b`, `link spec: token 2 "\"a\"": a quoted string must be followed by a space`},
		{"none delay 1ms", `link spec: token 1 "none": none cannot be combined with other keywords`},
		{"ecn", `link spec: token 1 "ecn": netem's ecn is not supported`},
		{"slot 1ms", `link spec: token 1 "slot": netem's slot is not supported`},
		{"seed 5", `link spec: token 1 "seed": the seed is not part of a link spec`},
		{"10ms", `link spec: token 1 "10ms": unexpected value`},
		{"mtu", `link spec: token 1 "mtu": needs a size in bytes, 68 to 1500 (e.g. mtu 1280)`},
		{"mtu icmp", `link spec: token 2 "icmp": mtu is not an integer`},
		{"mtu 67", `link spec: token 2 "67": mtu must be between 68 and 1500 (68 is IPv4's minimum, 1500 the testbed devices' MTU)`},
		{"mtu 9000", `link spec: token 2 "9000": mtu must be between 68 and 1500`},
		{"mtu 1.5kb", `link spec: token 2 "1.5kb": mtu is not an integer`},
		{"mtu 1280 mtu 1400", `link spec: token 3 "mtu": mtu given twice (first as token 1)`},
		{"mtu 1280 icmp blackhole", `link spec: token 4 "blackhole": blackhole belongs to mtu: write mtu BYTES blackhole`},
		{"delay 1ms icmp", `link spec: token 3 "icmp": icmp belongs to mtu`},
		{"mtu 1280 fragment", `link spec: token 3 "fragment": unknown keyword`},
	}
	for _, tt := range tests {
		l, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error %q", tt.in, l, tt.want)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) error %T is not *Error", tt.in, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error\n  %s\nwant prefix\n  %s", tt.in, err, tt.want)
		}
		if l != (Link{}) {
			t.Errorf("Parse(%q) returned a non-zero Link with its error", tt.in)
		}
	}
}

func TestErrorFields(t *testing.T) {
	_, err := Parse("delay 10ms loss 150%")
	e := err.(*Error)
	if e.Pos != 4 || e.Token != "150%" || e.Spec != "" {
		t.Fatalf("Error = %+v", e)
	}
}

func TestAccessors(t *testing.T) {
	l, err := Parse("delay 20ms 5ms rate 100mbit")
	if err != nil {
		t.Fatal(err)
	}
	if l.RateBps() != 100_000_000 || l.BaseDelay() != 20*time.Millisecond || l.MaxDelay() != 25*time.Millisecond {
		t.Fatalf("RateBps %d BaseDelay %v MaxDelay %v", l.RateBps(), l.BaseDelay(), l.MaxDelay())
	}
	l, _ = Parse("delay 20ms 5ms distribution normal")
	if l.MaxDelay() != 40*time.Millisecond {
		t.Fatalf("normal MaxDelay %v, want 40ms", l.MaxDelay())
	}
	if l.HasBottleneck() || l.IsZero() {
		t.Fatalf("HasBottleneck %v IsZero %v", l.HasBottleneck(), l.IsZero())
	}
	zero := []string{"", "none", "limit 5", "loss 0%"}
	for _, s := range zero {
		l, err := Parse(s)
		if err != nil || !l.IsZero() {
			t.Errorf("Parse(%q).IsZero() = false (%v)", s, err)
		}
	}
	for _, s := range []string{"delay 1ns", "loss 0.001%", "rate 1gbit", "onoff 1s 1s", "trace x", "duplicate 1%", "corrupt 1%",
		"loss gemodel 0%", "delay 0ms 1ms"} {
		l, err := Parse(s)
		if err != nil || l.IsZero() {
			t.Errorf("Parse(%q).IsZero() = true (%v)", s, err)
		}
	}
	lims := []struct {
		s       string
		pkts    int
		bytes   uint64
		target  time.Duration
		interva time.Duration
	}{
		{"rate 1mbit", 1000, 0, 5 * time.Millisecond, 100 * time.Millisecond},
		{"rate 1mbit limit 20", 20, 0, 5 * time.Millisecond, 100 * time.Millisecond},
		{"rate 1mbit queue droptail bytes 3000", 0, 3000, 5 * time.Millisecond, 100 * time.Millisecond},
		{"rate 1mbit limit 7 queue codel bytes 3000 target 1ms interval 20ms", 7, 3000, time.Millisecond, 20 * time.Millisecond},
	}
	for _, tt := range lims {
		l, err := Parse(tt.s)
		if err != nil {
			t.Fatal(err)
		}
		p, b := l.QueueLimit()
		tg, iv := l.CoDelParams()
		if p != tt.pkts || b != tt.bytes || tg != tt.target || iv != tt.interva {
			t.Errorf("%q: QueueLimit %d %d CoDelParams %v %v", tt.s, p, b, tg, iv)
		}
	}
}

func TestParseDirections(t *testing.T) {
	up, down, err := ParseDirections("delay 10ms", "", "")
	if err != nil || up != down || up.Delay != 10*time.Millisecond {
		t.Fatalf("link only: %v %v %v", up, down, err)
	}
	up, down, err = ParseDirections("", "rate 1mbit", "delay 5ms")
	if err != nil || up.Rate != 1_000_000 || down.Delay != 5*time.Millisecond || up.Delay != 0 || down.Rate != 0 {
		t.Fatalf("up/down: %v %v %v", up, down, err)
	}
	up, down, err = ParseDirections("", "", "")
	if err != nil || !up.IsZero() || !down.IsZero() {
		t.Fatalf("nothing: %v %v %v", up, down, err)
	}
	if _, _, err := ParseDirections("delay 1ms", "delay 2ms", ""); err == nil {
		t.Fatal("link and up together accepted")
	}
	_, _, err = ParseDirections("", "delay 1ms", "loss 300%")
	var e *Error
	if !errors.As(err, &e) || e.Spec != "down" || !strings.HasPrefix(err.Error(), `link spec (down): token 2 "300%"`) {
		t.Fatalf("down error: %v", err)
	}
	_, _, err = ParseDirections("bogus", "", "")
	if !errors.As(err, &e) || e.Spec != "link" {
		t.Fatalf("link error: %v", err)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0ms", 1: "1ns", 999: "999ns", 1000: "1us", 1500: "1.5us", 1001: "1.001us",
		time.Millisecond: "1ms", 25 * time.Millisecond: "25ms", 1234567: "1.234567ms",
		time.Second: "1s", 90 * time.Second: "90s", time.Second + 1: "1.000000001s", -5 * time.Millisecond: "-5ms",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", d, got, want)
		}
		if d >= 0 {
			back, err := parseDuration(want)
			if err != nil || back != d {
				t.Errorf("parseDuration(%q) = %v, %v", want, back, err)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	for _, s := range []string{"", "delay 10ms 5ms 25% distribution normal loss gemodel 1%", "rate 1mbit queue codel"} {
		l, _ := Parse(s)
		if err := l.Validate(); err != nil {
			t.Errorf("Parse(%q).Validate() = %v", s, err)
		}
	}
	bad := []Link{
		{Delay: -time.Millisecond},
		{Loss: Loss{Model: LossRandom, Percent: 200}},
		{Loss: Loss{Model: LossRandom, Percent: 0, Correlation: 5}},
		{Delay: time.Millisecond, Reorder: 5}, // Gap 0
		{Rate: 1, Trace: "x"},
		{Queue: QueueCoDel},
		{DelayCorr: 10},
		{On: time.Second},
	}
	for _, l := range bad {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v validated", l)
		}
	}
}

func TestMaxWait(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want time.Duration
	}{
		{"none", 0},
		{"delay 50ms 10ms", 60 * time.Millisecond},                        // uniform jitter by default, as netem
		{"delay 100ms rate 1mbit", 100*time.Millisecond + 12*time.Second}, // 1000 x 1500 B at 1 Mbit/s
		{"delay 10ms rate 10mbit limit 100", 10*time.Millisecond + 120*time.Millisecond},
		{"rate 1mbit queue droptail bytes 15000", 120 * time.Millisecond},            // bytes only: no packet limit
		{"rate 1mbit limit 1000 queue droptail bytes 15000", 120 * time.Millisecond}, // the smaller
		{"delay 50ms 10ms distribution normal", 90 * time.Millisecond},               // cut at 4x
		{"delay 5ms onoff 1s 2s", 5*time.Millisecond + 2*time.Second},
	} {
		l, err := Parse(tc.spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.spec, err)
		}
		if got := l.MaxWait(); got != tc.want {
			t.Errorf("%s: MaxWait %v, want %v", tc.spec, got, tc.want)
		}
	}
}
