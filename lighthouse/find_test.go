package lighthouse

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

// fakeNode puts a node on PATH (ahead of the real one) that prints version
// for --version, and returns its path.
func fakeNode(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	node := filepath.Join(dir, "node")
	script := "#!/bin/sh\necho " + version + "\n"
	if err := os.WriteFile(node, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return node
}

// fakeLighthouse makes peersDir/node_modules/lighthouse with a package.json
// of the given version and an empty cli/index.js under root, and returns
// the package directory.
func fakeLighthouse(t *testing.T, root, version string) string {
	t.Helper()
	pkg := filepath.Join(root, "node_modules", "lighthouse")
	if err := os.MkdirAll(filepath.Join(pkg, "cli"), 0o755); err != nil {
		t.Fatal(err)
	}
	pj := `{"name": "lighthouse", "version": "` + version + `", "engines": {"node": ">=18.16"}}`
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(pj), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "cli", "index.js"), []byte("// fake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return pkg
}

func TestFindEnv(t *testing.T) {
	node := fakeNode(t, "v20.20.2")
	root := filepath.Join(t.TempDir(), "lh")
	pkg := fakeLighthouse(t, root, "12.8.2")
	t.Chdir(t.TempDir()) // no repository around
	for _, v := range []string{root, pkg, filepath.Join(pkg, "cli", "index.js"), root + "/"} {
		t.Setenv(EnvVar, v)
		inst, err := Find()
		if err != nil {
			t.Errorf("%s=%s: %v", EnvVar, v, err)
			continue
		}
		want := Install{Node: node, CLI: filepath.Join(pkg, "cli", "index.js"), Version: "12.8.2", NodeVersion: "v20.20.2"}
		if inst != want {
			t.Errorf("%s=%s: %+v, want %+v", EnvVar, v, inst, want)
		}
	}
	// A relative value is taken from the working directory.
	t.Chdir(filepath.Dir(root))
	t.Setenv(EnvVar, "lh")
	if inst, err := Find(); err != nil || inst.CLI != filepath.Join(pkg, "cli", "index.js") {
		t.Errorf("relative %s: %+v, %v", EnvVar, inst, err)
	}
}

func TestFindEnvWrong(t *testing.T) {
	fakeNode(t, "v20.20.2")
	dir := t.TempDir()
	// A directory named lighthouse whose package.json is another package.
	other := filepath.Join(dir, "node_modules", "lighthouse")
	if err := os.MkdirAll(filepath.Join(other, "cli"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "package.json"), []byte(`{"name":"not-lighthouse","version":"1.0.0"}`), 0o644)
	os.WriteFile(filepath.Join(other, "cli", "index.js"), nil, 0o644)
	// The repository's own install must not be picked when the variable is wrong.
	for _, v := range []string{dir, filepath.Join(dir, "missing"), filepath.Join(other, "package.json")} {
		t.Setenv(EnvVar, v)
		_, err := Find()
		if !errors.Is(err, ErrNotInstalled) {
			t.Errorf("%s=%s: %v, want ErrNotInstalled", EnvVar, v, err)
			continue
		}
		for _, s := range []string{EnvVar, v, "npm ci --prefix peers/lighthouse"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s=%s: error %q does not mention %q", EnvVar, v, err, s)
			}
		}
	}
}

func TestFindWorkingDirectoryParents(t *testing.T) {
	node := fakeNode(t, "v18.16.0")
	t.Setenv(EnvVar, "")
	repo := t.TempDir()
	pkg := fakeLighthouse(t, filepath.Join(repo, "peers", "lighthouse"), "12.8.2")
	sub := filepath.Join(repo, "internal", "cli")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, wd := range []string{repo, sub} {
		t.Chdir(wd)
		inst, err := Find()
		if err != nil {
			t.Fatalf("from %s: %v", wd, err)
		}
		want := Install{Node: node, CLI: filepath.Join(pkg, "cli", "index.js"), Version: "12.8.2", NodeVersion: "v18.16.0"}
		if inst != want {
			t.Errorf("from %s: %+v, want %+v", wd, inst, want)
		}
	}
}

func TestFindNotInstalled(t *testing.T) {
	fakeNode(t, "v20.20.2")
	t.Setenv(EnvVar, "")
	wd := t.TempDir()
	t.Chdir(wd)
	inst, err := Find()
	if err == nil {
		testsupport.Unavailable(t, "the test binary sits in a directory with an install (%s)", inst.CLI)
	}
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Find = %v, want ErrNotInstalled", err)
	}
	msg := err.Error()
	for _, s := range []string{"npm ci --prefix peers/lighthouse", "bash scripts/setup.sh", EnvVar, filepath.Join(wd, "peers", "lighthouse")} {
		if !strings.Contains(msg, s) {
			t.Errorf("error %q does not mention %q", msg, s)
		}
	}
	if exe, err := os.Executable(); err == nil {
		exe, _ = filepath.EvalSymlinks(exe)
		if want := filepath.Join(filepath.Dir(exe), "peers", "lighthouse"); !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention the executable's directory %q", msg, want)
		}
	}
}

func TestFindNode(t *testing.T) {
	root := t.TempDir()
	fakeLighthouse(t, root, "12.8.2")
	t.Setenv(EnvVar, root)
	for _, c := range []struct {
		version string
		ok      bool
	}{
		{"v18.16.0", true},
		{"v18.20.4", true},
		{"v22.1.0", true},
		{"v18.15.9", false},
		{"v16.20.2", false},
		{"v9.99.0", false},
		{"not a version", false},
	} {
		fakeNode(t, c.version)
		inst, err := Find()
		if c.ok {
			if err != nil || inst.NodeVersion != c.version {
				t.Errorf("node %s: %+v, %v", c.version, inst, err)
			}
			continue
		}
		if !errors.Is(err, ErrNotInstalled) {
			t.Errorf("node %s: %v, want ErrNotInstalled", c.version, err)
			continue
		}
		if strings.HasPrefix(c.version, "v") && !strings.Contains(err.Error(), "needs Node.js 18.16 or later") {
			t.Errorf("node %s: error %q does not say what is needed", c.version, err)
		}
	}
	// No node at all.
	t.Setenv("PATH", t.TempDir())
	if _, err := Find(); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "not on PATH") {
		t.Errorf("without node: %v", err)
	}
}

func TestParseNodeVersion(t *testing.T) {
	for v, want := range map[string][2]int{"v20.20.2": {20, 20}, "18.16.0": {18, 16}, "v21.0": {21, 0}} {
		maj, min, ok := parseNodeVersion(v)
		if !ok || maj != want[0] || min != want[1] {
			t.Errorf("%s: %d %d %v", v, maj, min, ok)
		}
	}
	for _, v := range []string{"", "v20", "vx.1.2", "v-1.2.3", "20.x"} {
		if _, _, ok := parseNodeVersion(v); ok {
			t.Errorf("%q parsed", v)
		}
	}
}

// TestFindRepository checks the real install of the repository, when it is
// there (npm ci --prefix peers/lighthouse).
func TestFindRepository(t *testing.T) {
	inst, err := Find()
	if err != nil {
		testsupport.Unavailable(t, "Lighthouse not installed: %v", err)
	}
	if inst.Version != Version {
		t.Errorf("found Lighthouse %s at %s, quicbench pins %s", inst.Version, inst.CLI, Version)
	}
	if !filepath.IsAbs(inst.CLI) || !filepath.IsAbs(inst.Node) {
		t.Errorf("paths not absolute: %+v", inst)
	}
}
