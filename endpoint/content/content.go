// Package content generates everything quicbench's servers send: payload
// bytes (a fixed pseudo-random pattern, never read from disk, so that disk
// and page cache play no part), the same pattern for uploads, and synthetic
// web pages whose objects are valid PNG images of an exact size.
//
// All content is deterministic: the byte at offset i of every body is
// Pattern(i), so a client can verify what it received.
package content

import (
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/quicbench/quicbench/model"
)

// blockSize is the period of the pattern. A power of two so the offset
// reduces with a mask.
const blockSize = 1 << 16

// block holds one period of the pattern: xorshift64* output from a fixed
// seed, so it is incompressible within a period and identical everywhere.
var block = func() []byte {
	b := make([]byte, blockSize)
	x := uint64(0x9E3779B97F4A7C15)
	for i := 0; i < blockSize; i += 8 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		v := x * 0x2545F4914F6CDD1D
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}()

// Pattern returns the byte at offset off of every generated body.
func Pattern(off int64) byte { return block[off&(blockSize-1)] }

// WriteBody writes n pattern bytes (offsets 0..n-1) to w in writes of at most
// 64 KiB and returns how many bytes were written.
func WriteBody(w io.Writer, n int64) (int64, error) {
	return WriteBodyChunked(w, 0, n, blockSize)
}

// WriteBodyChunked writes the pattern bytes at offsets off..off+n-1 to w in
// writes of at most chunk bytes.
func WriteBodyChunked(w io.Writer, off, n int64, chunk int) (int64, error) {
	if chunk <= 0 || chunk > blockSize {
		chunk = blockSize
	}
	var done int64
	for done < n {
		start := int((off + done) & (blockSize - 1))
		end := min(start+chunk, blockSize)
		if rem := n - done; int64(end-start) > rem {
			end = start + int(rem)
		}
		m, err := w.Write(block[start:end])
		done += int64(m)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// Reader returns a reader of n pattern bytes (offsets 0..n-1), used as the
// body of uploads.
func Reader(n int64) io.Reader { return &patternReader{n: n} }

type patternReader struct{ off, n int64 }

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.n {
		return 0, io.EOF
	}
	if rem := r.n - r.off; int64(len(p)) > rem {
		p = p[:rem]
	}
	total := 0
	for len(p) > 0 {
		start := int(r.off & (blockSize - 1))
		m := copy(p, block[start:])
		p = p[m:]
		r.off += int64(m)
		total += m
	}
	return total, nil
}

// Verifier checks that consecutive writes carry the pattern, starting at
// offset 0. The zero value is ready to use.
type Verifier struct {
	off int64
}

// Check verifies p as the next bytes of the pattern. It returns an error
// naming the first wrong offset.
func (v *Verifier) Check(p []byte) error {
	for len(p) > 0 {
		start := int(v.off & (blockSize - 1))
		ref := block[start:]
		m := min(len(ref), len(p))
		if string(ref[:m]) != string(p[:m]) {
			for i := 0; i < m; i++ {
				if ref[i] != p[i] {
					return fmt.Errorf("content: byte at offset %d is %#02x, want %#02x", v.off+int64(i), p[i], ref[i])
				}
			}
		}
		p = p[m:]
		v.off += int64(m)
	}
	return nil
}

// Offset returns how many bytes were checked so far.
func (v *Verifier) Offset() int64 { return v.off }

// MaxSize is the largest size ParseSize accepts (1 TiB).
const MaxSize = int64(1) << 40

// ParseSize parses a byte count as URLs and flags write it: model.ParseSize
// (a non-negative decimal number with an optional unit, case-insensitive:
// B, KB, MB, GB, TB in powers of 1000, KiB, MiB, GiB, TiB in powers of
// 1024) plus the one-letter units k, M, G, T (powers of 1000), without a
// sign. Examples: "512", "8KB", "1.5MiB", "10m". The result must not exceed
// MaxSize.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "+") {
		return 0, fmt.Errorf("size %q: want a number without a sign", s)
	}
	i := len(t)
	for i > 0 && unicode.IsLetter(rune(t[i-1])) {
		i--
	}
	if len(t)-i == 1 && strings.ContainsAny(t[i:], "kKmMgGtT") {
		t += "B" // "8k" is "8kB"
	}
	n, err := model.ParseSize(t)
	if err != nil {
		return 0, err
	}
	if n > MaxSize {
		return 0, fmt.Errorf("size %q exceeds the maximum of 1 TiB", s)
	}
	return n, nil
}
