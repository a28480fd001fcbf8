package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// StateDir holds one JSON file per persistent testbed.
const StateDir = "/run/quicbench"

// Info describes a persistent testbed, as recorded in its state file.
type Info struct {
	Name       string     `json:"name"`
	PID        int        `json:"pid"` // the quicbench process holding the emulator
	ClientNS   string     `json:"client_ns"`
	ServerNS   string     `json:"server_ns"`
	ClientAddr netip.Addr `json:"client_addr"`
	ServerAddr netip.Addr `json:"server_addr"`
	Subnet     int        `json:"subnet"`
	Up         string     `json:"up"`   // link spec client->server
	Down       string     `json:"down"` // link spec server->client
	Seed       uint64     `json:"seed"`
	CC         string     `json:"cc"`                   // every TCP connection across the link runs it (route congctl)
	DefaultCC  string     `json:"default_cc,omitempty"` // the namespaces' default, for TCP sockets that stay inside one
	Started    time.Time  `json:"started"`
}

// NSPath is the bind mount of side s's namespace.
func (i Info) NSPath(s Side) string {
	if s == Client {
		return "/run/netns/" + i.ClientNS
	}
	return "/run/netns/" + i.ServerNS
}

// Addr is the address of side s.
func (i Info) Addr(s Side) netip.Addr {
	if s == Client {
		return i.ClientAddr
	}
	return i.ServerAddr
}

// Alive reports whether the process holding the testbed still runs.
func (i Info) Alive() bool { return processAlive(i.PID) }

// Command returns a command running name with arg inside side s's
// namespace of this persistent testbed (see Testbed.Command).
func (i Info) Command(ctx context.Context, s Side, name string, arg ...string) *exec.Cmd {
	return nsCommand(ctx, i.NSPath(s), name, arg...)
}

func statePath(name string) string { return filepath.Join(StateDir, name+".json") }

// persist bind-mounts the namespaces and writes the state file.
func (t *Testbed) persist() error {
	for _, s := range []Side{Client, Server} {
		p, err := bindNetNS(int(t.ns[s].Fd()), t.NSName(s))
		if err != nil {
			return err
		}
		t.mounts = append(t.mounts, p)
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return err
	}
	up, down, seed := t.Links()
	info := Info{
		Name: t.name, PID: os.Getpid(),
		ClientNS: t.NSName(Client), ServerNS: t.NSName(Server),
		ClientAddr: t.Addr(Client), ServerAddr: t.Addr(Server), Subnet: t.subnet,
		Up: up.String(), Down: down.String(), Seed: seed, CC: t.cc, DefaultCC: t.defaultCC, Started: time.Now().UTC(),
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	path := statePath(t.name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	t.state = path
	return nil
}

// updateState rewrites the link and congestion control fields of a
// persistent testbed's state.
func (t *Testbed) updateState() error {
	if t.state == "" {
		return nil
	}
	info, err := Lookup(t.name)
	if err != nil {
		return err
	}
	info.Up, info.Down, info.Seed = t.up.String(), t.down.String(), t.seed
	info.CC, info.DefaultCC = t.cc, t.defaultCC
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	tmp := t.state + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, t.state)
}

// ErrNotFound is returned by Lookup for an unknown testbed.
var ErrNotFound = errors.New("no such testbed")

// Lookup reads the state of the persistent testbed called name.
func Lookup(name string) (Info, error) {
	if !nameRE.MatchString(name) {
		return Info{}, fmt.Errorf("testbed name %q: want 1 to 32 letters, digits, '_' or '-'", name)
	}
	b, err := os.ReadFile(statePath(name))
	if errors.Is(err, os.ErrNotExist) {
		return Info{}, fmt.Errorf("testbed %q: %w (start one with `quicbench testbed up --name %s`)", name, ErrNotFound, name)
	}
	if err != nil {
		return Info{}, err
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("state file %s: %w", statePath(name), err)
	}
	return info, nil
}

// List returns the persistent testbeds recorded in StateDir, by name.
func List() ([]Info, error) {
	ents, err := os.ReadDir(StateDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !nameRE.MatchString(name) {
			continue
		}
		info, err := Lookup(name)
		if err != nil {
			continue
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Down stops the persistent testbed called name: it asks the process holding
// it to exit (SIGTERM) and waits until it has removed the testbed; if that
// process is gone, it removes what it left.
func Down(ctx context.Context, name string) error {
	info, err := Lookup(name)
	if err != nil {
		return err
	}
	if info.Alive() && isQuicbenchTestbed(info.PID) {
		if err := unix.Kill(info.PID, unix.SIGTERM); err != nil && err != unix.ESRCH {
			return fmt.Errorf("signalling pid %d: %w", info.PID, err)
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timeout:
				unix.Kill(info.PID, unix.SIGKILL)
				break wait
			case <-tick.C:
				if _, err := os.Stat(statePath(name)); errors.Is(err, os.ErrNotExist) || !info.Alive() {
					break wait
				}
			}
		}
	}
	_, err = removeStale(info.Name, info.ClientNS, info.ServerNS)
	return err
}

// isQuicbenchTestbed reports whether pid still holds a quicbench testbed: a
// guard against signalling an unrelated process that reused the pid.
func isQuicbenchTestbed(pid int) bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, e := range ents {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if err == nil && strings.HasPrefix(l, "net:[") {
			return true
		}
	}
	return false
}

// removeStale removes a testbed whose holder is gone: the processes still in
// the named namespaces, their bind mounts under /run/netns and, when name is
// not empty, the state file. It returns what it removed.
func removeStale(name string, nsNames ...string) ([]string, error) {
	var removed []string
	var errs []error
	var inodes []uint64
	for _, ns := range nsNames {
		var st unix.Stat_t
		if unix.Stat("/run/netns/"+ns, &st) == nil && st.Dev != 0 {
			inodes = append(inodes, st.Ino)
		}
	}
	var args []string
	for _, ns := range nsNames {
		args = append(args, "--net=/run/netns/"+ns)
	}
	errs = append(errs, killAll(inodes, args))
	for _, ns := range nsNames {
		p := "/run/netns/" + ns
		if _, err := os.Lstat(p); err == nil {
			if err := unbindNetNS(p); err != nil {
				errs = append(errs, err)
			} else {
				removed = append(removed, "netns "+ns)
			}
		}
	}
	if name != "" {
		if err := os.Remove(statePath(name)); err == nil {
			removed = append(removed, "state "+statePath(name))
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// Subnets: N in 10.N.1.0/24 and 10.N.2.0/24, distinct among this process's
// testbeds and the persistent ones. (Namespaces are isolated, so equal
// subnets would still work; distinct ones keep logs and captures readable.)
var subnets struct {
	sync.Mutex
	used map[int]bool
}

func allocSubnet() int {
	subnets.Lock()
	defer subnets.Unlock()
	if subnets.used == nil {
		subnets.used = map[int]bool{}
	}
	taken := map[int]bool{}
	if infos, err := List(); err == nil {
		for _, i := range infos {
			taken[i.Subnet] = true
		}
	}
	for n := 1; n < 255; n++ {
		if !subnets.used[n] && !taken[n] {
			subnets.used[n] = true
			return n
		}
	}
	for n := 1; n < 255; n++ { // all taken: share one, it still works
		if !subnets.used[n] {
			subnets.used[n] = true
			return n
		}
	}
	return 1
}

func freeSubnet(n int) {
	subnets.Lock()
	defer subnets.Unlock()
	delete(subnets.used, n)
}

func randomID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
