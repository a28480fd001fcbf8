package content

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"html"
	"io"
	"strconv"
	"strings"
)

// MaxPageObjects is the largest number of objects a synthetic page may
// reference.
const MaxPageObjects = 10000

// Page describes a synthetic web page: an HTML document referencing
// Objects images. Object i has size MinSize when MinSize == MaxSize, else a
// deterministic size in [MinSize, MaxSize] drawn from i.
type Page struct {
	Objects int
	MinSize int64
	MaxSize int64
}

// ParsePage parses the two path segments of /page/N/S: N objects, S a size
// ("8KB") or an inclusive range of sizes ("400-8KB": 400 bytes to 8 KB; each
// bound is parsed on its own, so a bare number means bytes).
func ParsePage(n, s string) (Page, error) {
	objs, err := strconv.Atoi(n)
	if err != nil || objs < 0 || objs > MaxPageObjects {
		return Page{}, fmt.Errorf("page object count %q: want an integer from 0 to %d", n, MaxPageObjects)
	}
	p := Page{Objects: objs}
	lo, hi, isRange := strings.Cut(s, "-")
	if !isRange {
		sz, err := ParseSize(s)
		if err != nil {
			return Page{}, fmt.Errorf("page object size: %w", err)
		}
		p.MinSize, p.MaxSize = sz, sz
		return p, nil
	}
	p.MaxSize, err = ParseSize(hi)
	if err != nil {
		return Page{}, fmt.Errorf("page object size range %q: %w", s, err)
	}
	p.MinSize, err = ParseSize(lo)
	if err != nil {
		return Page{}, fmt.Errorf("page object size range %q: %w", s, err)
	}
	if p.MinSize > p.MaxSize {
		return Page{}, fmt.Errorf("page object size range %q: lower bound above upper bound", s)
	}
	return p, nil
}

// ObjectSize returns the size of object i of the page.
func (p Page) ObjectSize(i int) int64 {
	if p.MaxSize == p.MinSize {
		return p.MinSize
	}
	span := uint64(p.MaxSize-p.MinSize) + 1
	return p.MinSize + int64(splitmix64(uint64(i))%span)
}

// TotalBytes returns the summed size of the page's objects (the HTML
// document excluded).
func (p Page) TotalBytes() int64 {
	var t int64
	for i := 0; i < p.Objects; i++ {
		t += p.ObjectSize(i)
	}
	return t
}

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// ObjectPath returns the URL path of object i of the page served at
// pagePath (e.g. "/page/5/8KB" -> "/page/5/8KB/3.png").
func ObjectPath(pagePath string, i int) string {
	return strings.TrimSuffix(pagePath, "/") + "/" + strconv.Itoa(i) + ".png"
}

// HTML renders the page served at pagePath: a small deterministic document
// whose body holds one <img> per object (1x1 px, so layout does not depend
// on the object), and a data: favicon so that browsers fetch nothing else.
func (p Page) HTML(pagePath string) []byte {
	var b bytes.Buffer
	title := fmt.Sprintf("quicbench page: %d objects", p.Objects)
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	b.WriteString(`<link rel="icon" href="data:,">` + "\n")
	fmt.Fprintf(&b, "<title>%s</title></head>\n<body>\n<h1>%s</h1>\n", html.EscapeString(title), html.EscapeString(title))
	for i := 0; i < p.Objects; i++ {
		fmt.Fprintf(&b, "<img src=\"%s\" width=\"1\" height=\"1\" alt=\"\">\n", html.EscapeString(ObjectPath(pagePath, i)))
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// PNG layout: signature, IHDR (1x1, 8-bit greyscale), IDAT, a private
// ancillary padding chunk "qbPd" holding pattern bytes, IEND. Decoders skip
// unknown ancillary chunks, so the image is valid at any size from
// MinPNGSize up.
var pngHead = func() []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := []byte{0, 0, 0, 1, 0, 0, 0, 1, 8, 0, 0, 0, 0}
	writeChunk(&b, "IHDR", ihdr)
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	_, _ = zw.Write([]byte{0, 0x80}) // filter none, one mid-grey pixel
	_ = zw.Close()
	writeChunk(&b, "IDAT", z.Bytes())
	return b.Bytes()
}()

var pngTail = func() []byte {
	var b bytes.Buffer
	writeChunk(&b, "IEND", nil)
	return b.Bytes()
}()

// MinPNGSize is the smallest object served as a PNG image; smaller objects
// are served as raw pattern bytes (application/octet-stream).
var MinPNGSize = int64(len(pngHead) + 12 + len(pngTail))

func writeChunk(b *bytes.Buffer, typ string, data []byte) {
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
	copy(hdr[4:], typ)
	b.Write(hdr[:])
	b.Write(data)
	crc := crc32.NewIEEE()
	crc.Write(hdr[4:])
	crc.Write(data)
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc.Sum32())
	b.Write(c[:])
}

// ObjectType returns the Content-Type of an object of the given size.
func ObjectType(size int64) string {
	if size >= MinPNGSize {
		return "image/png"
	}
	return "application/octet-stream"
}

// WriteObject streams a page object of exactly size bytes to w: a valid PNG
// when size >= MinPNGSize, else raw pattern bytes.
func WriteObject(w io.Writer, size int64) error {
	if size < 0 {
		return errors.New("content: negative object size")
	}
	if size < MinPNGSize {
		_, err := WriteBody(w, size)
		return err
	}
	if _, err := w.Write(pngHead); err != nil {
		return err
	}
	pad := size - MinPNGSize
	if pad > 1<<31-1 {
		return fmt.Errorf("content: object of %d bytes exceeds the PNG chunk limit", size)
	}
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(pad))
	copy(hdr[4:], "qbPd")
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	crc := crc32.NewIEEE()
	crc.Write(hdr[4:])
	if _, err := WriteBody(io.MultiWriter(w, crc), pad); err != nil {
		return err
	}
	var c [4]byte
	binary.BigEndian.PutUint32(c[:], crc.Sum32())
	if _, err := w.Write(c[:]); err != nil {
		return err
	}
	_, err := w.Write(pngTail)
	return err
}

// PNGFrame returns copies of the bytes every PNG object starts with
// (signature, IHDR and IDAT chunks) and ends with (IEND chunk): between
// them sits the "qbPd" padding chunk. Other implementations of the page
// objects (the aioquic peer) use them to send identical bytes.
func PNGFrame() (head, tail []byte) {
	return bytes.Clone(pngHead), bytes.Clone(pngTail)
}
