package capture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
)

// KeyLogs follows key log files (SSLKEYLOGFILE format: one secret per
// line, "LABEL CLIENT_RANDOM SECRET") that endpoints append to while a run
// goes on, and hands out what was appended since the last time: a
// sample's secrets are the lines its endpoints wrote since the previous
// sample ended (see Take). A file that does not exist yet is read from its
// start once it does.
type KeyLogs struct {
	mu    sync.Mutex
	files []string
	off   []int64
}

// FollowKeyLogs follows files from their current ends: lines already in
// them (a resumed run's earlier samples) are not handed out.
func FollowKeyLogs(files ...string) *KeyLogs {
	k := &KeyLogs{files: append([]string(nil), files...), off: make([]int64, len(files))}
	for i, f := range files {
		if st, err := os.Stat(f); err == nil {
			k.off[i] = st.Size()
		}
	}
	return k
}

// maxKeyLogTake bounds what one Take reads per file: a sample's
// connections write a few hundred bytes each.
const maxKeyLogTake = 16 << 20

// Take returns the complete lines appended to the files since the last
// Take, each line once (a client and a server log the same secrets), in
// file order. A line still being written stays for the next Take.
func (k *KeyLogs) Take() ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []byte
	seen := map[string]bool{}
	var errs []error
	for i, name := range k.files {
		b, err := readFrom(name, k.off[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		end := bytes.LastIndexByte(b, '\n') + 1
		k.off[i] += int64(end)
		for _, line := range bytes.SplitAfter(b[:end], []byte{'\n'}) {
			if len(bytes.TrimSpace(line)) == 0 || seen[string(line)] {
				continue
			}
			seen[string(line)] = true
			out = append(out, line...)
		}
	}
	return out, errors.Join(errs...)
}

// readFrom reads file name from offset off, at most maxKeyLogTake bytes;
// a file that does not exist reads as empty.
func readFrom(name string, off int64) ([]byte, error) {
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("key log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, fmt.Errorf("key log %s: %w", name, err)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyLogTake))
	if err != nil {
		return nil, fmt.Errorf("key log %s: %w", name, err)
	}
	return b, nil
}
