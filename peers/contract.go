package peers

import (
	"fmt"
	"os"
	"os/exec"
)

// checkCommand checks a contract stack: its command exists and is
// executable (a name without a slash is looked up on PATH).
func checkCommand(s *Stack) (version, detail string, err error) {
	path, err := exec.LookPath(s.Command)
	if err != nil {
		return "", "", fmt.Errorf("%s: command %s: %w: %v", s.Name, s.Command, ErrNotInstalled, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("%s: command %s: %w", s.Name, s.Command, err)
	}
	return s.Name + " (contract)", fmt.Sprintf("%s (%d bytes), declared in %s", path, fi.Size(), s.Origin), nil
}
