package cli

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/cluster"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/store"
)

// slurmTestPlan is the plan TestSlurmCluster runs in 4 shards: 2 scenarios
// x 2 protocols of one cheap test, 2 iterations each, no warm-up: 4 cells,
// 8 samples, 4 (group, iteration) blocks.
const slurmTestPlan = `name: slurm-test
seed: 7
iterations: 2
warmup: false
protocols: [h1, h3]
client: builtin
timeout: 20s
scenarios:
  - name: clean
  - name: delay
    link: "delay 5ms"
tests:
  - test: ttfb
`

// slurmCluster is a private one-node Slurm cluster: its own munged (own
// key and socket), slurmctld and slurmd, all from files in one temporary
// directory, on ports of their own and the loopback address (the host name
// need not resolve), so that it touches no system configuration and can
// run beside a cluster the machine already has.
type slurmCluster struct {
	dir      string // configuration, state, logs
	conf     string // slurm.conf
	env      []string
	ctld, sd *exec.Cmd
	mungePID int
}

// requireSlurm ends the test through testsupport.Unavailable unless the
// Slurm and munge programs are installed (scripts/setup.sh installs them).
func requireSlurm(t *testing.T) {
	t.Helper()
	testsupport.RequireRoot(t, "needs root (slurmd runs the shards as root, the shards create network namespaces)")
	for _, p := range []string{"munged", "slurmctld", "slurmd", "sbatch", "scontrol", "sinfo"} {
		if _, err := exec.LookPath(p); err != nil {
			testsupport.Unavailable(t, "%s not installed (apt-get install slurm-wlm munge; scripts/setup.sh does)", p)
		}
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startSlurm starts the cluster and registers its shutdown with t.Cleanup.
func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "qbslurm")
	if err != nil {
		t.Fatal(err)
	}
	c := &slurmCluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	t.Cleanup(func() {
		c.stop(t)
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("cluster files kept in %s", dir)
		}
	})
	for _, d := range []string{"munge", "state", "spool"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	// munged with its own key and socket. It checks that the key is
	// private and that no one else may write its directories: a private
	// temporary directory is both.
	key := make([]byte, 1024)
	if f, err := os.Open("/dev/urandom"); err != nil {
		t.Fatal(err)
	} else {
		_, err = f.Read(key)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	m := filepath.Join(dir, "munge")
	if err := os.WriteFile(filepath.Join(m, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(m, "munge.socket")
	pidFile := filepath.Join(m, "munged.pid")
	out, err := exec.Command("munged", "--force", "--socket="+socket, "--key-file="+filepath.Join(m, "munge.key"),
		"--pid-file="+pidFile, "--log-file="+filepath.Join(m, "munged.log"), "--seed-file="+filepath.Join(m, "munged.seed")).CombinedOutput()
	if err != nil {
		t.Fatalf("munged: %v\n%s", err, out)
	}
	c.mungePID = testsupport.ReadPID(t, pidFile, "munged wrote no pid file")

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	conf := fmt.Sprintf(`ClusterName=qbtest
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[4]s
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/slurmctld.log
SlurmdLogFile=%[5]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=600
MailProg=/bin/true
NodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d State=UNKNOWN
PartitionName=main Nodes=%[1]s Default=YES MaxTime=INFINITE State=UP
`, host, freePort(t), freePort(t), socket, dir, cpus())
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	c.env = append(os.Environ(), "SLURM_CONF="+c.conf)
	t.Setenv("SLURM_CONF", c.conf) // for the in-process quicbench slurm --submit

	start := func(name string) *exec.Cmd {
		log, err := os.Create(filepath.Join(dir, name+".out"))
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close()
		cmd := exec.Command(name, "-D")
		cmd.Env, cmd.Stdout, cmd.Stderr = c.env, log, log
		// Its own process group: a signal to the test does not reach it
		// first, and stop can end the group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := cmd.Start(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return cmd
	}
	c.ctld = start("slurmctld")
	time.Sleep(time.Second)
	c.sd = start("slurmd")

	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := c.run("sinfo", "-h", "-o", "%T")
		state := strings.TrimSpace(out)
		if err == nil && state == "idle" {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node did not come up: sinfo says %q (%v)\n%s", state, err, c.logs())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func cpus() int {
	// slurmd refuses a node that claims more CPUs than it has; fewer is fine.
	n := 0
	data, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		n = strings.Count(string(data), "\nprocessor\t")
		if strings.HasPrefix(string(data), "processor\t") {
			n++
		}
	}
	return max(n, 1)
}

// run runs a Slurm client command against the cluster.
func (c *slurmCluster) run(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), err
}

// logs returns the end of the daemons' logs, for a failure message.
func (c *slurmCluster) logs() string {
	var b strings.Builder
	for _, f := range []string{"slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out", "munge/munged.log"} {
		data, _ := os.ReadFile(filepath.Join(c.dir, f))
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", f, data)
	}
	return b.String()
}

// stop shuts the cluster down and checks that none of its processes is
// left: scontrol shutdown, then a kill of whatever did not exit, then
// munged.
func (c *slurmCluster) stop(t *testing.T) {
	if c.ctld != nil {
		if _, err := c.run("scontrol", "shutdown"); err != nil {
			t.Logf("scontrol shutdown: %v", err)
		}
		for _, cmd := range []*exec.Cmd{c.sd, c.ctld} {
			if cmd == nil {
				continue
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(60 * time.Second): // slurmd saves its state first: slow on a loaded machine
				t.Errorf("%s did not stop within 60 s of scontrol shutdown: killing it", filepath.Base(cmd.Path))
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	}
	if c.mungePID > 0 {
		_ = syscall.Kill(c.mungePID, syscall.SIGTERM)
		for i := 0; i < 100 && alive(c.mungePID); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(c.mungePID) {
			t.Errorf("munged (pid %d) still runs after SIGTERM: killing it", c.mungePID)
			_ = syscall.Kill(c.mungePID, syscall.SIGKILL)
		}
	}
	// Nothing that names the cluster's directory may be left: daemons,
	// slurmstepd, job scripts, shards.
	if out, err := exec.Command("pgrep", "-a", "-f", c.dir).Output(); err == nil {
		t.Errorf("processes left running:\n%s", out)
	}
}

// alive reports whether process pid runs: it exists and is not a zombie.
// munged daemonizes, so its parent is init, which may take its time to
// reap it (or never, in a container whose init does not).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: the state follows the last ")".
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}

// jobState returns a job's JobState and Reason from scontrol.
func (c *slurmCluster) jobState(id string) (state, reason string, err error) {
	out, err := c.run("scontrol", "show", "job", "-o", id)
	if err != nil {
		return "", "", err
	}
	if m := regexp.MustCompile(`JobState=(\S+)`).FindStringSubmatch(out); m != nil {
		state = m[1]
	}
	if m := regexp.MustCompile(`Reason=(\S+)`).FindStringSubmatch(out); m != nil {
		reason = m[1]
	}
	return state, reason, nil
}

// TestSlurmCluster starts a private one-node Slurm cluster, submits a tiny
// plan in 4 shards with quicbench slurm --submit, waits for the merge job
// and checks that the merged database holds every (cell, iteration) of the
// plan exactly once; then it stops the cluster and checks that nothing it
// started is left running.
func TestSlurmCluster(t *testing.T) {
	requireSlurm(t)
	c := startSlurm(t)

	// The shards run this test binary as quicbench (TestMain), through a
	// wrapper, from a directory with a blank in its name.
	qb := filepath.Join(c.dir, "quicbench")
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=main exec %s \"$@\"\n", cliExecEnv, shQuoteTest(os.Args[0]))
	if err := os.WriteFile(qb, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(c.dir, "plan.yaml")
	if err := os.WriteFile(planFile, []byte(slurmTestPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(c.dir, "slurm jobs")
	args := []string{"slurm", "--plan", planFile, "--shards", "4", "-o", out, "--quicbench", qb, "--", "--time=10"}
	if code, _, stderr := runCLIExe(t, qb, args...); code != ExitOK {
		t.Fatalf("quicbench slurm: exit %d\n%s", code, stderr)
	}
	// Shard 2 interrupted after its first sample, as a task stopped by a
	// node failure or a preemption leaves it: its task must resume it.
	pre := exec.Command(qb, "run", "--plan", filepath.Join(out, cluster.PlanFile), "--shard", "2/4", "-o", filepath.Join(out, "shard-2.db"),
		"--max-samples", "1", "--no-report", "--lines")
	if b, err := pre.CombinedOutput(); err != nil {
		t.Fatalf("shard 2, first sample: %v\n%s", err, b)
	}
	code, stdout, stderr := runCLIExe(t, qb, append(args[:len(args)-2:len(args)-2], "--submit", "--", "--time=10")...)
	if code != ExitOK {
		t.Fatalf("quicbench slurm --submit: exit %d\n%s\n%s", code, stderr, c.logs())
	}
	m := regexp.MustCompile(`^array job ([0-9]+)\nmerge job ([0-9]+)\n$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("stdout %q: want the two job ids", stdout)
	}
	array, merge := m[1], m[2]
	t.Logf("array job %s, merge job %s", array, merge)

	shardLogs := func() string {
		var b strings.Builder
		for k := 1; k <= 4; k++ {
			data, _ := os.ReadFile(filepath.Join(out, "shard-"+strconv.Itoa(k)+".log"))
			if len(data) > 2000 {
				data = data[len(data)-2000:]
			}
			fmt.Fprintf(&b, "== shard %d\n%s\n", k, data)
		}
		data, _ := os.ReadFile(filepath.Join(out, "merge.log"))
		fmt.Fprintf(&b, "== merge\n%s\n", data)
		return b.String()
	}
	c.waitJob(t, merge, shardLogs)
	checkMerged(t, filepath.Join(out, cluster.MergedFile), planFile)
	if logs := shardLogs(); !strings.Contains(logs, "resuming "+filepath.Join(out, "shard-2.db")) {
		t.Errorf("shard 2's task did not resume its database")
	}
	if t.Failed() {
		t.Fatal(shardLogs())
	}

	// The same jobs submitted again by hand (submit.sh), as after a failed
	// task was fixed: every task finds its shard complete and does nothing,
	// the merge replaces all.db.
	sub, err := c.run("bash", filepath.Join(out, cluster.SubmitFile))
	if err != nil {
		t.Fatal(err)
	}
	m = regexp.MustCompile(`^array job ([0-9]+), merge job ([0-9]+)\n$`).FindStringSubmatch(sub)
	if m == nil {
		t.Fatalf("submit.sh printed %q: want the two job ids", sub)
	}
	c.waitJob(t, m[2], shardLogs)
	checkMerged(t, filepath.Join(out, cluster.MergedFile), planFile)
	logs := shardLogs()
	if n := strings.Count(logs, "is complete"); n != 4 {
		t.Errorf("%d of 4 tasks found their shard complete on the second submission", n)
	}
	if t.Failed() || testing.Verbose() {
		t.Log(logs)
	}
}

// waitJob waits until job id is COMPLETED; it fails the test when the job
// fails or can never run (its dependency failed), or after 8 minutes.
func (c *slurmCluster) waitJob(t *testing.T, id string, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(8 * time.Minute)
	for {
		state, reason, err := c.jobState(id)
		if err != nil {
			t.Fatalf("%v\n%s", err, c.logs())
		}
		if state == "COMPLETED" {
			return
		}
		if state == "FAILED" || state == "CANCELLED" || state == "TIMEOUT" || state == "NODE_FAIL" || reason == "DependencyNeverSatisfied" {
			t.Fatalf("job %s: %s (%s)\n%s", id, state, reason, logs())
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s (%s) after 8 minutes\n%s\n%s", id, state, reason, logs(), c.logs())
		}
		time.Sleep(time.Second)
	}
}

// checkMerged checks that the database at path holds every (cell,
// iteration) of the plan file exactly once, and no other sample.
func checkMerged(t *testing.T, path, planFile string) {
	t.Helper()
	p, err := plan.Load(planFile)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenReadOnly(path)
	if err != nil {
		t.Fatalf("merged database: %v", err)
	}
	defer db.Close()
	ctx := context.Background()
	runs, err := db.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("merged database holds %d runs, want 1", len(runs))
	}
	ds, err := db.LoadDataset(ctx, runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	keyOf := map[int64]string{}
	for _, c := range ds.Cells {
		keyOf[c.ID] = c.Key
	}
	seen := map[string]int{}
	for _, s := range ds.Samples {
		seen[fmt.Sprintf("%s#%d", keyOf[s.CellID], s.Iteration)]++
	}
	want := 0
	for _, c := range cells {
		for i := 0; i < 2; i++ {
			want++
			k := fmt.Sprintf("%s#%d", c.Key, i)
			if seen[k] != 1 {
				t.Errorf("%s: %d samples, want 1", k, seen[k])
			}
		}
	}
	if len(ds.Samples) != want {
		t.Errorf("merged database holds %d samples, want %d (%d cells x 2 iterations)", len(ds.Samples), want, len(cells))
	}
}

func shQuoteTest(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
