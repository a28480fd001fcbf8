package chromium

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/browser"
)

// TestApplyNetLog: the variable's directory is made and Chromium gets the
// NetLog switches; without it nothing changes; a directory that cannot be
// made is an error naming the variable.
func TestApplyNetLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nl")
	var o browser.Options
	if err := applyNetLog(&o, dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("NetLog directory not made: %v", err)
	}
	if len(o.ExtraArgs) != 2 || !strings.HasPrefix(o.ExtraArgs[0], "--log-net-log="+dir+"/netlog-") || o.ExtraArgs[1] != "--net-log-capture-mode=Everything" {
		t.Errorf("Chromium switches %v", o.ExtraArgs)
	}
	var none browser.Options
	if err := applyNetLog(&none, ""); err != nil || none.ExtraArgs != nil {
		t.Errorf("no variable: %v, %v", none.ExtraArgs, err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := applyNetLog(&none, filepath.Join(file, "sub")); err == nil || !strings.Contains(err.Error(), netLogEnv) {
		t.Errorf("bad directory: %v", err)
	}
}
