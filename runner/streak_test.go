package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

func failed(e string) *model.Sample { return &model.Sample{Status: model.StatusFailed, Error: e} }

func TestFailStreakStopsOnOneCause(t *testing.T) {
	var f failStreak
	for i := range sameCauseLimit - 1 {
		// the same cause with other numbers (ports, sizes) in it
		if err := f.observe(failed(fmt.Sprintf("dial tcp 10.7.2.2:%d: connect: connection refused", 4433+i))); err != nil {
			t.Fatalf("sample %d: stopped early: %v", i, err)
		}
	}
	err := f.observe(failed("dial tcp 10.7.2.2:9999: connect: connection refused"))
	if err == nil || !strings.Contains(err.Error(), "10 samples") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("after %d failures: %v", sameCauseLimit, err)
	}
}

func TestFailStreakResets(t *testing.T) {
	breakers := []*model.Sample{
		{Status: model.StatusOK},
		{Status: model.StatusInvalid, Error: "resource used h2"},
		failed("timeout after 30s waiting for the response body"),
		failed("a different cause"),
	}
	for _, b := range breakers {
		var f failStreak
		for range sameCauseLimit - 1 {
			if err := f.observe(failed("connection refused")); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.observe(b); err != nil {
			t.Fatalf("%+v stopped the run: %v", b, err)
		}
		if err := f.observe(failed("connection refused")); err != nil {
			t.Errorf("after %+v the streak was not reset: %v", b, err)
		}
	}
	// timeouts never stop a run: a dead link is measured as timeouts
	var f failStreak
	for i := range 3 * sameCauseLimit {
		if err := f.observe(failed("timeout after 20s")); err != nil {
			t.Fatalf("timeout %d stopped the run: %v", i, err)
		}
	}
}
