package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/internal/testsupport"
)

func TestMountsUnder(t *testing.T) {
	f := filepath.Join(t.TempDir(), "mountinfo")
	info := "22 1 8:1 / / rw - ext4 /dev/vda rw\n" +
		"30 22 0:5 / /tmp/qb-x/root rw - tmpfs tmpfs rw\n" +
		"31 30 8:1 /work /tmp/qb-x/root/work rw - ext4 /dev/vda rw\n" +
		"32 30 8:1 /a\\040b /tmp/qb-x/root/a\\040b rw - ext4 /dev/vda rw\n" +
		"33 22 8:1 / /tmp/qb-xy rw - ext4 /dev/vda rw\n"
	if err := os.WriteFile(f, []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	old := mountinfo
	mountinfo = f
	defer func() { mountinfo = old }()
	got, err := MountsUnder("/tmp/qb-x")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2] != "/tmp/qb-x/root" || got[0] == "/tmp/qb-x/root" {
		t.Fatalf("mounts %q: want the three below /tmp/qb-x (not /tmp/qb-xy), deepest first", got)
	}
	for _, m := range got {
		if m == "/tmp/qb-x/root/a b" {
			return
		}
	}
	t.Errorf("mounts %q: the escaped space not undone", got)
}

// A directory holding a bind mount of another directory is removed
// without touching what the mount showed.
func TestRemoveAllDetachesMounts(t *testing.T) {
	testsupport.RequireRoot(t, "bind mounts need root")
	base := t.TempDir()
	precious := filepath.Join(base, "precious")
	scratch := filepath.Join(base, "scratch")
	at := filepath.Join(scratch, "root", "work")
	for _, d := range []string{precious, at} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	keep := filepath.Join(precious, "keep.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(precious, at, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(at, unix.MNT_DETACH) })
	if _, err := os.Stat(filepath.Join(at, "keep.txt")); err != nil {
		t.Fatalf("the bind mount does not show the file: %v", err)
	}
	if err := RemoveAll(scratch); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scratch); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("scratch left: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("the file behind the mount was removed: %v", err)
	}
}
