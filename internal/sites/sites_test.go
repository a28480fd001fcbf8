package sites

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestBuiltinShapes(t *testing.T) {
	for _, s := range Builtin {
		files, err := Build(s)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if len(files) != s.Requests {
			t.Errorf("%s: %d files, want %d", s.Name, len(files), s.Requests)
		}
		var total int64
		for _, f := range files {
			total += int64(len(f.Data))
		}
		if total != s.Bytes {
			t.Errorf("%s: %d bytes, want exactly %d", s.Name, total, s.Bytes)
		}
		// every resource is referenced by the document, once
		doc := string(files[0].Data)
		refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(doc, -1)
		seen := map[string]int{}
		for _, r := range refs {
			if !strings.HasPrefix(r[1], "data:") {
				seen[r[1]]++
			}
		}
		for _, f := range files[1:] {
			if seen[f.Path] != 1 {
				t.Errorf("%s: %s referenced %d times", s.Name, f.Path, seen[f.Path])
			}
			if strings.HasSuffix(f.Path, ".png") {
				if _, err := png.Decode(bytes.NewReader(f.Data)); err != nil {
					t.Errorf("%s: %s is not a valid PNG: %v", s.Name, f.Path, err)
				}
			}
		}
		if len(seen) != s.Requests-1 {
			t.Errorf("%s: document references %d resources, want %d", s.Name, len(seen), s.Requests-1)
		}
	}
}

func TestDeterministic(t *testing.T) {
	a, _ := Build(Builtin[0])
	b, _ := Build(Builtin[0])
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Data, b[i].Data) {
			t.Fatalf("file %d differs between two builds", i)
		}
	}
}

func TestBadShape(t *testing.T) {
	if _, err := Build(Shape{Name: "x", Requests: 3, Bytes: 1e6, CSS: 2, JS: 2}); err == nil {
		t.Fatal("want an error when styles and scripts exceed the requests")
	}
	if _, err := Build(Shape{Name: "x", Requests: 20, Bytes: 5000}); err == nil {
		t.Fatal("want an error when the weight is too small for the requests")
	}
}

func TestWriteAll(t *testing.T) {
	root := t.TempDir()
	dirs, err := WriteAll(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) != len(Builtin) {
		t.Fatalf("got %d dirs", len(dirs))
	}
	if _, err := os.Stat(filepath.Join(dirs["site-19x1mb"], "index.html")); err != nil {
		t.Fatal(err)
	}
}
