package sites

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/quicbench/quicbench/har"
)

// BuiltinPages are the recorded pages shipped with quicbench (the site
// test's har-* sites): generated multi-origin pages (BuildPage, shaped
// like typical pages: 1 origin and 20 requests, 6 origins and 70, 15 and
// 120; text compressed with gzip and brotli, binary images, query
// strings), loaded in headless Chromium from a replay and recorded with
// quicbench record (scripts/record-builtin-pages.sh). The files are
// pages/NAME.har.gz.
var BuiltinPages = []PageShape{
	{Name: "har-1x20", Origins: 1, Requests: 20, Bytes: 600_000, Seed: 1},
	{Name: "har-6x70", Origins: 6, Requests: 70, Bytes: 1_600_000, SharedIPs: 1, Seed: 2},
	{Name: "har-15x120", Origins: 15, Requests: 120, Bytes: 2_600_000, SharedIPs: 3, Seed: 3},
}

//go:embed pages/*.har.gz
var pageFiles embed.FS

// PageNames returns the names of the built-in recorded pages.
func PageNames() []string {
	var n []string
	for _, s := range BuiltinPages {
		n = append(n, s.Name)
	}
	return n
}

// IsPage reports whether name is a built-in recorded page.
func IsPage(name string) bool {
	for _, s := range BuiltinPages {
		if s.Name == name {
			return true
		}
	}
	return false
}

var (
	pageMu    sync.Mutex
	pageCache = map[string][]byte{}
)

// PageHAR returns the HAR file (JSON) of a built-in page.
func PageHAR(name string) ([]byte, error) {
	if !IsPage(name) {
		return nil, fmt.Errorf("no built-in page %q (built in: %s)", name, strings.Join(PageNames(), ", "))
	}
	pageMu.Lock()
	defer pageMu.Unlock()
	if b, ok := pageCache[name]; ok {
		return b, nil
	}
	gz, err := pageFiles.ReadFile("pages/" + name + ".har.gz")
	if err != nil {
		return nil, fmt.Errorf("built-in page %s: %w", name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("built-in page %s: %w", name, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("built-in page %s: %w", name, err)
	}
	pageCache[name] = b
	return b, nil
}

// Page returns a built-in page, parsed.
func Page(name string) (*har.HAR, error) {
	b, err := PageHAR(name)
	if err != nil {
		return nil, err
	}
	h, err := har.Read(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("built-in page %s: %w", name, err)
	}
	return h, nil
}

var summaries sync.Map // name -> har.Summary

// PageSummary returns what a built-in page holds.
func PageSummary(name string) (har.Summary, error) {
	if s, ok := summaries.Load(name); ok {
		return s.(har.Summary), nil
	}
	h, err := Page(name)
	if err != nil {
		return har.Summary{}, err
	}
	s := h.Summarize()
	summaries.Store(name, s)
	return s, nil
}

// PageShapeOf returns the shape a built-in page was generated from.
func PageShapeOf(name string) (PageShape, bool) {
	for _, s := range BuiltinPages {
		if s.Name == name {
			return s, true
		}
	}
	return PageShape{}, false
}
