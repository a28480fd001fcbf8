package cli

import (
	"strings"
	"testing"
)

func TestK8sCommand(t *testing.T) {
	code, out, errs := runCLI(t, "k8s", "--plan", "quick", "--shards", "2", "--image", "qb:1", "--namespace", "lab")
	if code != ExitOK || !strings.Contains(out, "completionMode: Indexed") || !strings.Contains(out, "namespace: lab") {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, errs, out)
	}
	code, _, errs = runCLI(t, "k8s", "--plan", "quick", "--shards", "2")
	if code != ExitUsage || !strings.Contains(errs, "no image") {
		t.Errorf("without --image: exit %d, %q", code, errs)
	}
}
