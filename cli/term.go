package cli

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal (for the redrawn progress bar).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// context0 is the context for work that must finish even after an
// interrupt (writing the report of a completed run).
func context0() context.Context { return context.Background() }
