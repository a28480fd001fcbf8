package content

import (
	"bytes"
	"image/png"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestWriteBodyAndReaderCarryThePattern(t *testing.T) {
	for _, n := range []int64{0, 1, 7, blockSize - 1, blockSize, blockSize + 1, 3*blockSize + 12345} {
		var b bytes.Buffer
		got, err := WriteBody(&b, n)
		if err != nil || got != n || int64(b.Len()) != n {
			t.Fatalf("WriteBody(%d) = %d, %v; buffer %d", n, got, err, b.Len())
		}
		for i := int64(0); i < n; i += 997 {
			if b.Bytes()[i] != Pattern(i) {
				t.Fatalf("WriteBody(%d): byte %d differs from Pattern", n, i)
			}
		}
		r, err := io.ReadAll(iotest.OneByteReader(Reader(n)))
		if err != nil || !bytes.Equal(r, b.Bytes()) {
			t.Fatalf("Reader(%d) differs from WriteBody (err %v)", n, err)
		}
	}
}

func TestWriteBodyChunkedOffsetsAndChunkSizes(t *testing.T) {
	var writes []int
	w := writerFunc(func(p []byte) (int, error) { writes = append(writes, len(p)); return len(p), nil })
	if _, err := WriteBodyChunked(w, blockSize-10, 100, 30); err != nil {
		t.Fatal(err)
	}
	// 10 bytes to the block end, then 30-byte writes.
	want := []int{10, 30, 30, 30}
	if len(writes) != len(want) {
		t.Fatalf("writes %v, want %v", writes, want)
	}
	for i := range want {
		if writes[i] != want[i] {
			t.Fatalf("writes %v, want %v", writes, want)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestVerifier(t *testing.T) {
	var b bytes.Buffer
	_, _ = WriteBody(&b, 200000)
	var v Verifier
	data := b.Bytes()
	for len(data) > 0 {
		n := min(len(data), 4099)
		if err := v.Check(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	if v.Offset() != 200000 {
		t.Fatalf("offset %d", v.Offset())
	}
	bad := append([]byte(nil), b.Bytes()[:100]...)
	bad[42] ^= 1
	var v2 Verifier
	err := v2.Check(bad)
	if err == nil || !strings.Contains(err.Error(), "offset 42") {
		t.Fatalf("corrupt byte: err = %v", err)
	}
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{
		"0": 0, "512": 512, "8KB": 8000, "8kb": 8000, "8k": 8000, "1MiB": 1 << 20, "1.5MiB": 3 << 19,
		"10m": 10e6, "3 MB": 3e6, "2GiB": 2 << 30, "100B": 100, "1TiB": 1 << 40,
	}
	for in, want := range good {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "KB", "1.5", "0x10", "1e3", "2TiB", "9999999999999999999", "12 apples", "+5"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
}

func TestParsePageAndObjectSizes(t *testing.T) {
	p, err := ParsePage("5", "8KB")
	if err != nil || p.Objects != 5 || p.MinSize != 8000 || p.MaxSize != 8000 || p.TotalBytes() != 40000 {
		t.Fatalf("ParsePage(5, 8KB) = %+v, %v", p, err)
	}
	r, err := ParsePage("50", "400-8KB")
	if err != nil || r.MinSize != 400 || r.MaxSize != 8000 {
		t.Fatalf("ParsePage(50, 400-8KB) = %+v, %v", r, err)
	}
	distinct := map[int64]bool{}
	for i := 0; i < r.Objects; i++ {
		s := r.ObjectSize(i)
		if s < 400 || s > 8000 {
			t.Fatalf("object %d size %d outside range", i, s)
		}
		if s != r.ObjectSize(i) {
			t.Fatal("object size not deterministic")
		}
		distinct[s] = true
	}
	if len(distinct) < 10 {
		t.Fatalf("only %d distinct sizes among 50 objects", len(distinct))
	}
	for _, bad := range [][2]string{{"-1", "1KB"}, {"x", "1KB"}, {"10001", "1KB"}, {"5", "big"}, {"5", "8KB-400"}, {"5", "1-x"}} {
		if _, err := ParsePage(bad[0], bad[1]); err == nil {
			t.Errorf("ParsePage(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}

func TestPageHTML(t *testing.T) {
	p := Page{Objects: 3, MinSize: 100, MaxSize: 100}
	h := string(p.HTML("/page/3/100"))
	if h != string(p.HTML("/page/3/100")) {
		t.Fatal("HTML not deterministic")
	}
	for i := 0; i < 3; i++ {
		if !strings.Contains(h, `src="`+ObjectPath("/page/3/100", i)+`"`) {
			t.Fatalf("object %d missing from\n%s", i, h)
		}
	}
	if !strings.Contains(h, `<link rel="icon" href="data:,">`) {
		t.Fatal("data: favicon missing")
	}
	if ObjectPath("/page/3/100/", 2) != "/page/3/100/2.png" {
		t.Fatal(ObjectPath("/page/3/100/", 2))
	}
}

func TestObjectsAreValidPNGsOfExactSize(t *testing.T) {
	for _, size := range []int64{MinPNGSize, MinPNGSize + 1, 400, 8000, 128 << 10} {
		var b bytes.Buffer
		if err := WriteObject(&b, size); err != nil {
			t.Fatal(err)
		}
		if int64(b.Len()) != size {
			t.Fatalf("object of %d bytes written as %d", size, b.Len())
		}
		img, err := png.Decode(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("size %d: not a valid PNG: %v", size, err)
		}
		if img.Bounds().Dx() != 1 || img.Bounds().Dy() != 1 {
			t.Fatalf("size %d: image %v", size, img.Bounds())
		}
		if ObjectType(size) != "image/png" {
			t.Fatal(ObjectType(size))
		}
	}
	var b bytes.Buffer
	if err := WriteObject(&b, MinPNGSize-1); err != nil || int64(b.Len()) != MinPNGSize-1 {
		t.Fatalf("small object: %v, %d bytes", err, b.Len())
	}
	if ObjectType(MinPNGSize-1) != "application/octet-stream" {
		t.Fatal("small object type")
	}
	if err := WriteObject(&b, -1); err == nil {
		t.Fatal("negative size accepted")
	}
}
