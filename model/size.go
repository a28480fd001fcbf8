package model

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Byte size units. Decimal prefixes are powers of 1000 (as file sizes are
// quoted in the studies: "3.4 MB", "12 KB"); binary prefixes are powers of 1024.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
}

// ParseSize parses a byte size: a non-negative number with an optional unit,
// B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
// Unit letters are case-insensitive except the "i" of binary units, which
// may be either case too; "5KB", "3.4MB", "1.1MB", "1MiB", "700MB" and
// "1500" (bytes) are all sizes. The result must be a whole number of bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, errors.New("empty size")
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || t[i] == '-' || t[i] == '+') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		return 0, fmt.Errorf("size %q does not start with a number", s)
	}
	// Exact decimal arithmetic: "3.4MB" is exactly 3,400,000 bytes.
	r, ok := new(big.Rat).SetString(num)
	if !ok || strings.Count(num, ".") > 1 || strings.ContainsAny(num[1:], "+-") {
		return 0, fmt.Errorf("malformed number %q in size", num)
	}
	mult := int64(-1)
	if unit == "" {
		mult = 1
	}
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			mult = u.mult
		}
	}
	if mult < 0 {
		return 0, fmt.Errorf("unknown size unit %q (allowed: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)", unit)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if r.Sign() < 0 {
		return 0, errors.New("size must not be negative")
	}
	if !r.IsInt() {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	if r.Num().Cmp(big.NewInt(math.MaxInt64)) > 0 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return r.Num().Int64(), nil
}

// FormatSize writes n bytes in a short exact form that ParseSize reads
// back: a binary unit when n is a multiple of 1024 but not of 1000 ("1MiB",
// "16KiB"), else the largest decimal unit giving at most three decimals and
// a whole part under 1000 ("5KB", "3.4MB", "1.1MB", "700MB"), else a binary
// unit ("1000MiB"), else bytes ("12345678B").
func FormatSize(n int64) string {
	if n < 0 {
		return "-" + FormatSize(-n)
	}
	binary := func() string {
		for _, u := range []struct {
			name string
			mult int64
		}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if n >= u.mult && n%u.mult == 0 {
				return strconv.FormatInt(n/u.mult, 10) + u.name
			}
		}
		return ""
	}
	if b := binary(); b != "" && n%1000 != 0 {
		return b
	}
	for _, u := range []struct {
		name string
		mult int64
	}{{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if n >= u.mult && n%(u.mult/1000) == 0 && (n/u.mult < 1000 || u.name == "TB") {
			whole, frac := n/u.mult, (n%u.mult)/(u.mult/1000)
			if frac == 0 {
				return strconv.FormatInt(whole, 10) + u.name
			}
			return fmt.Sprintf("%d.%s%s", whole, strings.TrimRight(fmt.Sprintf("%03d", frac), "0"), u.name)
		}
	}
	if b := binary(); b != "" {
		return b
	}
	return strconv.FormatInt(n, 10) + "B"
}
