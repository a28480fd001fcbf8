package program

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/peers"
)

// BinEnv names the environment variable that tells FindBinary where the
// native peers' programs are: a directory holding them (like
// peers/target/release, where `cargo build --release` puts them).
const BinEnv = "QUICBENCH_PEERS_BIN"

// binDir is where scripts/setup.sh builds the native peers (the Cargo
// workspace peers/Cargo.toml), relative to the repository.
const binDir = "peers/target/release"

// FindBinary returns the path of a native peer's program, name: in
// $QUICBENCH_PEERS_BIN when set (and only there), else in
// peers/target/release next to the executable and its parent directory
// (bin/quicbench in the repository), then in the working directory and
// each of its parents (tests run in a package directory). An error wraps
// peers.ErrNotInstalled and says how to build it.
func FindBinary(name string) (string, error) {
	hint := "build it with `bash scripts/setup.sh` in the quicbench repository (cargo build --release --locked --manifest-path peers/Cargo.toml), or set " + BinEnv + " to the directory holding it"
	if v := os.Getenv(BinEnv); v != "" {
		p := filepath.Join(v, name)
		if isExec(p) {
			return p, nil
		}
		return "", fmt.Errorf("%w: %s=%q holds no %s; %s", peers.ErrNotInstalled, BinEnv, v, name, hint)
	}
	var tried []string
	try := func(dir string) (string, bool) {
		p := filepath.Join(dir, binDir, name)
		if slices.Contains(tried, p) {
			return "", false
		}
		tried = append(tried, p)
		return p, isExec(p)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		for _, d := range []string{filepath.Dir(exe), filepath.Dir(filepath.Dir(exe))} {
			if p, ok := try(d); ok {
				return p, nil
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if p, ok := try(d); ok {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("%w: no %s among %s; %s", peers.ErrNotInstalled, name, strings.Join(tried, ", "), hint)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
