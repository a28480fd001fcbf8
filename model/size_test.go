package model

import "testing"

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"1500", 1500}, {"1B", 1}, {"5KB", 5000}, {"5kb", 5000}, {"5kB", 5000},
		{"12KB", 12000}, {"352KB", 352000}, {"1.1MB", 1100000}, {"3.4MB", 3400000},
		{"1MiB", 1 << 20}, {"1mib", 1 << 20}, {"0.5KiB", 512}, {"700MB", 700000000},
		{"100GB", 100000000000}, {" 3 MB ", 3000000}, {"1TiB", 1 << 40}, {".5KB", 500},
	}
	for _, g := range good {
		got, err := ParseSize(g.in)
		if err != nil || got != g.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", g.in, got, err, g.want)
		}
	}
	bad := map[string]string{
		"":           "empty size",
		"MB":         `size "MB" does not start with a number`,
		"5K":         `unknown size unit "K" (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)`,
		"5Mbit":      `unknown size unit "Mbit" (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)`,
		"-5MB":       "size must not be negative",
		"1.5B":       `size "1.5B" is not a whole number of bytes`,
		"1.2.3K":     `malformed number "1.2.3" in size`,
		"5-3KB":      `malformed number "5-3" in size`,
		"1e3":        `unknown size unit "e3" (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)`,
		"10000000TB": `size "10000000TB" is too large`,
	}
	for in, want := range bad {
		_, err := ParseSize(in)
		if err == nil || err.Error() != want {
			t.Errorf("ParseSize(%q) error = %v; want %q", in, err, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	cases := map[int64]string{
		0: "0B", 1: "1B", 999: "999B", 1000: "1KB", 5000: "5KB", 1000000: "1MB", 1024: "1KiB",
		1 << 20: "1MiB", 16384: "16KiB", 3400000: "3.4MB", 1100000: "1.1MB", 352000: "352KB",
		1024000: "1.024MB", 512000: "512KB", 1536: "1.536KB", 2048: "2KiB", 1500000000: "1.5GB", 1048576000: "1000MiB", 1234: "1.234KB", 1001: "1.001KB", 12345678: "12345678B", 700000000: "700MB",
	}
	for n, want := range cases {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q; want %q", n, got, want)
		}
		if back, err := ParseSize(want); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}
