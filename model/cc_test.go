package model

import "testing"

func TestCCName(t *testing.T) {
	for in, want := range map[string]string{
		"cubic": "cubic", "Cubic": "cubic", "reno": "reno", "NewReno": "reno", "bbr": "bbr",
		"bbr2_gcongestion": "bbr", "bbr2": "bbr", "vegas": "vegas",
	} {
		if got := CCName(in); got != want {
			t.Errorf("CCName(%q) = %q, want %q", in, got, want)
		}
	}
}
