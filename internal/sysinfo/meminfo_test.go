package sysinfo

import "testing"

func TestParseMemAvailable(t *testing.T) {
	good := []byte("MemTotal:       24684032 kB\nMemFree:        22771712 kB\nMemAvailable:   24077312 kB\nBuffers:           1234 kB\n")
	if v, err := parseMemAvailable(good); err != nil || v != 24077312<<10 {
		t.Errorf("parseMemAvailable = %d, %v; want %d", v, err, int64(24077312)<<10)
	}
	for _, bad := range []string{"MemTotal: 1 kB\n", "MemAvailable: 12 MB\n", "MemAvailable: x kB\n", "MemAvailable: -4 kB\n", ""} {
		if v, err := parseMemAvailable([]byte(bad)); err == nil {
			t.Errorf("parseMemAvailable(%q) = %d, want an error", bad, v)
		}
	}
	if v, err := MemAvailable(); err != nil || v <= 0 {
		t.Errorf("MemAvailable() = %d, %v", v, err)
	}
}
