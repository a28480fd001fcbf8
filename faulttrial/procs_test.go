package faulttrial

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/store"
)

// TestLeftoversSeen checks that the leftover check sees what it must: a
// marked process, the network namespace it holds, and a held database
// lock; and that it sees nothing once they are gone.
func TestLeftoversSeen(t *testing.T) {
	testsupport.RequireRoot(t, "needs root for a network namespace")
	id := fmt.Sprintf("selftest-%d", os.Getpid())
	cmd := exec.Command("unshare", "--net", "sleep", "60")
	cmd.Env = append(os.Environ(), markerEnv+"="+id)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	db := filepath.Join(t.TempDir(), "l.db")
	d, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	ns := map[uint64]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(ns) == 0 && time.Now().Before(deadline) {
		namespaces(id, ns) // unshare enters the namespace, then execs sleep
		time.Sleep(10 * time.Millisecond)
	}
	left := strings.Join(leftovers(id, ns, db, 0), "\n")
	for _, want := range []string{"process ", "network namespace ", "database lock held by pid "} {
		if !strings.Contains(left, want) {
			t.Errorf("leftovers do not include a %q line:\n%s", want, left)
		}
	}
	d.Close()
	cmd.Process.Kill()
	cmd.Wait()
	if left := leftovers(id, ns, db, 5*time.Second); len(left) > 0 {
		t.Errorf("leftovers once everything is gone: %v", left)
	}
}
