package lighthouse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Version is the Lighthouse version quicbench pins
// (peers/lighthouse/package.json).
const Version = "12.8.2"

// EnvVar names the environment variable that tells Find where Lighthouse
// is: a directory holding node_modules/lighthouse (like peers/lighthouse),
// the lighthouse package directory itself, or the path of its
// cli/index.js.
const EnvVar = "QUICBENCH_LIGHTHOUSE"

// peersDir is where the repository keeps the pinned install, relative to
// the repository root.
const peersDir = "peers/lighthouse"

// installHint tells how to install the pinned CLI.
const installHint = "install it with `npm ci --prefix peers/lighthouse` in the quicbench repository " +
	"(or `bash scripts/setup.sh`), or set " + EnvVar + " to its directory"

// Minimum Node.js version of Lighthouse 12 (the "engines" field of its
// package.json: ">=18.16").
const (
	minNodeMajor = 18
	minNodeMinor = 16
)

// Install is a located Lighthouse CLI and the node that runs it.
type Install struct {
	Node        string // node executable
	CLI         string // absolute path of lighthouse/cli/index.js
	Version     string // "version" of that lighthouse/package.json
	NodeVersion string // output of node --version, e.g. "v20.20.2"
}

// ErrNotInstalled is wrapped by every error of Find: Lighthouse or a
// suitable node is missing.
var ErrNotInstalled = errors.New("lighthouse: Lighthouse CLI not installed")

// Find locates the Lighthouse CLI and node. It looks, in this order, at
//
//  1. $QUICBENCH_LIGHTHOUSE (EnvVar), when set: a directory holding
//     node_modules/lighthouse, the lighthouse package directory or the
//     path of its cli/index.js; when set but wrong, Find fails rather than
//     look elsewhere;
//  2. peers/lighthouse next to the running executable and in its parent
//     directory (the binary is bin/quicbench in the repository);
//  3. peers/lighthouse in the working directory and in each of its parents
//     (tests run in a package directory of the repository).
//
// node is looked up on PATH and must be at least 18.16 (Lighthouse 12's
// engines field). Find does not insist on Version: Install.Version says
// which Lighthouse was found. Every error wraps ErrNotInstalled, names the
// places looked at and tells how to install.
func Find() (Install, error) {
	pkg, err := findPackage()
	if err != nil {
		return Install{}, err
	}
	inst := Install{CLI: filepath.Join(pkg, "cli", "index.js")}
	if inst.Version, err = packageVersion(pkg); err != nil {
		return Install{}, fmt.Errorf("%w: %v", ErrNotInstalled, err)
	}
	if inst.Node, inst.NodeVersion, err = findNode(); err != nil {
		return Install{}, err
	}
	return inst, nil
}

// findPackage returns the absolute directory of the lighthouse package.
func findPackage() (string, error) {
	if v, ok := os.LookupEnv(EnvVar); ok && v != "" {
		if pkg, ok := packageAt(v); ok {
			return pkg, nil
		}
		return "", fmt.Errorf("%w: %s=%q holds neither node_modules/lighthouse, nor the lighthouse package, nor its cli/index.js; %s",
			ErrNotInstalled, EnvVar, v, installHint)
	}
	var tried []string
	try := func(dir string) (string, bool) {
		cand := filepath.Join(dir, peersDir)
		for _, t := range tried {
			if t == cand {
				return "", false
			}
		}
		tried = append(tried, cand)
		return packageAt(cand)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		dir := filepath.Dir(exe)
		for _, d := range []string{dir, filepath.Dir(dir)} {
			if pkg, ok := try(d); ok {
				return pkg, nil
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if pkg, ok := try(d); ok {
				return pkg, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("%w: %s is not set and no %s/node_modules/lighthouse in %s; %s",
		ErrNotInstalled, EnvVar, peersDir, strings.Join(tried, ", "), installHint)
}

// packageAt resolves p (a directory holding node_modules/lighthouse, the
// package directory or its cli/index.js) to the absolute package directory.
func packageAt(p string) (string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", false
	}
	var cands []string
	if fi, err := os.Stat(abs); err != nil {
		return "", false
	} else if fi.Mode().IsRegular() {
		if filepath.Base(abs) == "index.js" && filepath.Base(filepath.Dir(abs)) == "cli" {
			cands = append(cands, filepath.Dir(filepath.Dir(abs)))
		}
	} else {
		cands = append(cands, filepath.Join(abs, "node_modules", "lighthouse"), abs)
	}
	for _, c := range cands {
		if isPackage(c) {
			return c, true
		}
	}
	return "", false
}

// isPackage reports whether dir is the lighthouse npm package: a
// package.json named "lighthouse" and a cli/index.js file.
func isPackage(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "cli", "index.js"))
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	var pj struct {
		Name string `json:"name"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	return err == nil && json.Unmarshal(b, &pj) == nil && pj.Name == "lighthouse"
}

// packageVersion reads the "version" of dir/package.json.
func packageVersion(dir string) (string, error) {
	var pj struct {
		Version string `json:"version"`
	}
	p := filepath.Join(dir, "package.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		return "", fmt.Errorf("%s: %v", p, err)
	}
	if pj.Version == "" {
		return "", fmt.Errorf("%s has no version", p)
	}
	return pj.Version, nil
}

// findNode looks node up on PATH and checks its version.
func findNode() (path, version string, err error) {
	path, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("%w: Node.js (node, >= %d.%d) is not on PATH: %v; install Node.js 18.16 or later (e.g. `apt-get install nodejs`)",
			ErrNotInstalled, minNodeMajor, minNodeMinor, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s --version: %v", ErrNotInstalled, path, err)
	}
	version = strings.TrimSpace(string(out))
	major, minor, ok := parseNodeVersion(version)
	if !ok {
		return "", "", fmt.Errorf("%w: %s --version printed %q, not a version", ErrNotInstalled, path, version)
	}
	if major < minNodeMajor || major == minNodeMajor && minor < minNodeMinor {
		return "", "", fmt.Errorf("%w: %s is Node.js %s but Lighthouse %s needs Node.js %d.%d or later",
			ErrNotInstalled, path, version, Version, minNodeMajor, minNodeMinor)
	}
	return path, version, nil
}

// parseNodeVersion parses "v20.20.2" into 20, 20.
func parseNodeVersion(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil && major >= 0 && minor >= 0
}
