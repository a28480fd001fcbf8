package store

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/model"
)

const (
	crashChildEnv = "QB_STORE_CRASH_CHILD"
	crashHangEnv  = "QB_STORE_CRASH_HANG" // hang inside the Nth sample's transaction
)

const (
	crashCells      = 4
	crashIterations = 100
	crashPoints     = 2000 // a big timeline makes the kill land inside a transaction often
)

// crashChild is the child process of TestCrashSafety: it resumes the run in
// the database at path and stores samples until it is killed, printing
// "committed CELL ITERATION" after each InsertSample returns.
func crashChild(path string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(3)
	}
	db, err := OpenExisting(path)
	if err != nil {
		fail(err)
	}
	run, err := db.LatestRun(ctx)
	if err != nil {
		fail(err)
	}
	cells, err := db.Cells(ctx, run.ID)
	if err != nil {
		fail(err)
	}
	done, err := db.DoneSamples(ctx, run.ID)
	if err != nil {
		fail(err)
	}
	if n, _ := strconv.Atoi(os.Getenv(crashHangEnv)); n > 0 {
		testHookBeforeCommit = func(s *model.Sample) {
			if n--; n == 0 {
				fmt.Printf("inflight %d %d\n", s.CellID, s.Iteration)
				select {} // wait for SIGKILL with the transaction open
			}
		}
	}
	for it := -1; it < crashIterations; it++ {
		for _, c := range cells {
			if done[c.ID][it] {
				continue
			}
			s := fullSample(c.ID, it, crashPoints)
			if err := db.InsertSample(ctx, &s); err != nil {
				fail(err)
			}
			fmt.Printf("committed %d %d\n", c.ID, it)
		}
	}
	os.Exit(0)
}

// TestCrashSafety kills a process that is writing samples with SIGKILL,
// three times, resuming in between, and checks that every sample reported
// committed is intact, that nothing else is half-written, and that the
// database passes SQLite's integrity check.
func TestCrashSafety(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	db, path := openTemp(t)
	run := mustCreateRun(t, db)
	cells := testCells(crashCells)
	if err := db.InsertCells(ctx, run.ID, cells); err != nil {
		t.Fatal(err)
	}
	db.Close()

	type key struct {
		cell int64
		it   int
	}
	committed := map[key]bool{}
	// Rounds: killed at an arbitrary point after 15 samples; killed for sure
	// inside the 4th sample's transaction; killed after 30 samples.
	rounds := []struct{ killAfter, hangAt int }{{15, 0}, {0, 4}, {30, 0}}
	var inflight *key
	for round, rd := range rounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashSafety$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, fmt.Sprintf("%s=%d", crashHangEnv, rd.hangAt))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			var k key
			if _, err := fmt.Sscanf(sc.Text(), "inflight %d %d", &k.cell, &k.it); err == nil {
				inflight = &k
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := fmt.Sscanf(sc.Text(), "committed %d %d", &k.cell, &k.it); err != nil {
				continue // test framework output
			}
			if committed[k] {
				t.Errorf("round %d: sample %v stored twice", round, k)
			}
			committed[k] = true
			if n++; n == rd.killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child was not killed by SIGKILL: %v", round, err)
		}

		db, err := OpenExisting(path)
		if err != nil {
			t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
		}
		if err := db.IntegrityCheck(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ds, err := db.LoadDataset(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		stored := map[key]bool{}
		for _, s := range ds.Samples {
			k := key{s.CellID, s.Iteration}
			want := fullSample(s.CellID, s.Iteration, crashPoints)
			want.ID = s.ID
			if !reflect.DeepEqual(s, want) {
				t.Fatalf("round %d: sample %v is not intact after SIGKILL", round, k)
			}
			stored[k] = true
		}
		if rd.hangAt > 0 {
			if inflight == nil {
				t.Fatalf("round %d: the child never hung inside a transaction", round)
			}
			if stored[*inflight] {
				t.Fatalf("round %d: sample %v, killed before its commit, is in the database", round, *inflight)
			}
			if got := len(stored) - len(committed); got != 0 {
				t.Fatalf("round %d: %d samples stored beyond those reported committed", round, got)
			}
		}
		for k := range committed {
			if !stored[k] {
				t.Fatalf("round %d: sample %v was reported committed but is missing", round, k)
			}
		}
		// At most one sample can have been committed after its line was
		// printed (killed between commit and print); it is intact (above)
		// and counts as committed for the next round.
		if extra := len(stored) - len(committed); extra < 0 || extra > 1 {
			t.Fatalf("round %d: %d samples stored, %d reported committed", round, len(stored), len(committed))
		}
		for k := range stored {
			committed[k] = true
		}
	}
	if want := 15 + 3 + 30; len(committed) < want {
		t.Fatalf("only %d samples over three rounds, want at least %d", len(committed), want)
	}
}
