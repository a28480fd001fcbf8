package endpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
)

// Limits of the generated resources.
const (
	maxEchoBytes      = 16 << 20
	maxStreamSegments = 100000
	maxStreamInterval = time.Minute
	maxSegmentSize    = 64 << 20
)

// UploadReport is the JSON body /upload answers with.
type UploadReport struct {
	Bytes int64 `json:"bytes"` // request body bytes received
	// Nanos is the server's time from the first to the last body byte read.
	Nanos int64 `json:"nanos"`
}

// newHandler returns the HTTP handler of every protocol. Sites and files are
// opened with os.Root, so that no path (.., symlinks) escapes them.
func newHandler(sites map[string]*os.Root, files *os.Root) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", handleIndex)
	mux.HandleFunc("/bytes/{size}", handleBytes)
	mux.HandleFunc("/upload", handleUpload)
	mux.HandleFunc("/echo", handleEcho)
	mux.HandleFunc("/stream", handleStream)
	mux.HandleFunc("/page/{n}/{size}", handlePage)
	mux.HandleFunc("/page/{n}/{size}/{obj}", handlePageObject)
	mux.HandleFunc("/bench", handleBench)
	mux.HandleFunc("/bench.js", handleBenchJS)
	for name, root := range sites {
		prefix := "/site/" + name
		mux.Handle(prefix+"/", http.StripPrefix(prefix, http.FileServerFS(root.FS())))
	}
	if files != nil {
		mux.Handle("/files/", http.StripPrefix("/files", http.FileServerFS(files.FS())))
	}
	return noStore(mux)
}

// noStore marks every response uncacheable: each sample starts cold.
func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

const indexText = `quicbench server. Resources:
  /bytes/N                          N bytes (N may carry a unit: 8KB, 1MiB, 10MB)
  /upload                           POST a body; answers {"bytes":..,"nanos":..}
  /echo                             GET: "ok\n"; POST: the body back (up to 16 MiB)
  /stream?segments=K&interval=D&size=S   K segments of S bytes, flushed D apart
  /page/N/S                         HTML page with N image objects of S bytes (S may be MIN-MAX)
  /bench?test=T&PARAMS              browser bench page (runs test T with fetch())
  /site/NAME/...                    static site directories (serve --site NAME=DIR)
  /files/...                        a static directory (serve --files DIR)
`

func handleIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, indexText)
}

func badRequest(w http.ResponseWriter, format string, args ...any) {
	http.Error(w, fmt.Sprintf(format, args...), http.StatusBadRequest)
}

// drain reads and discards a request body, so that a client uploading to a
// resource that ignores the body still completes its upload.
func drain(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
}

func handleBytes(w http.ResponseWriter, r *http.Request) {
	n, err := content.ParseSize(r.PathValue("size"))
	if err != nil {
		badRequest(w, "/bytes/N: %v", err)
		return
	}
	drain(r)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = content.WriteBody(w, n)
}

func handleUpload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		w.Header().Set("Allow", "POST, PUT")
		http.Error(w, "/upload takes a POST or PUT body", http.StatusMethodNotAllowed)
		return
	}
	buf := make([]byte, 64<<10)
	var rep UploadReport
	var first time.Time
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			if rep.Bytes == 0 {
				first = time.Now()
			}
			rep.Bytes += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			http.Error(w, "reading upload: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	if rep.Bytes > 0 {
		rep.Nanos = time.Since(first).Nanoseconds()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rep)
}

func handleEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/octet-stream")
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		drain(r)
		_, _ = io.WriteString(w, "ok\n")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxEchoBytes+1))
	if err != nil {
		http.Error(w, "reading body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxEchoBytes {
		http.Error(w, "/echo takes at most 16 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// streamParams parses /stream's query: segments (default 20), interval
// (default 50ms), size (default 1000 bytes).
func streamParams(r *http.Request) (segments int, interval time.Duration, size int64, err error) {
	q := r.URL.Query()
	segments, interval, size = 20, 50*time.Millisecond, 1000
	if v := q.Get("segments"); v != "" {
		segments, err = strconv.Atoi(v)
		if err != nil || segments < 1 || segments > maxStreamSegments {
			return 0, 0, 0, fmt.Errorf("segments=%q: want an integer from 1 to %d", v, maxStreamSegments)
		}
	}
	if v := q.Get("interval"); v != "" {
		interval, err = time.ParseDuration(v)
		if err != nil || interval < 0 || interval > maxStreamInterval {
			return 0, 0, 0, fmt.Errorf("interval=%q: want a duration from 0 to 1m, e.g. 50ms", v)
		}
	}
	if v := q.Get("size"); v != "" {
		size, err = content.ParseSize(v)
		if err != nil || size < 1 || size > maxSegmentSize {
			return 0, 0, 0, fmt.Errorf("size=%q: want a size from 1 B to 64 MiB", v)
		}
	}
	return segments, interval, size, nil
}

func handleStream(w http.ResponseWriter, r *http.Request) {
	segments, interval, size, err := streamParams(r)
	if err != nil {
		badRequest(w, "/stream: %v", err)
		return
	}
	drain(r)
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported by this connection", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	var off int64
	for i := 0; i < segments; i++ {
		if i > 0 {
			// Segment i is due at start + i*interval: no drift accumulates.
			timer.Reset(time.Until(start.Add(time.Duration(i) * interval)))
			select {
			case <-timer.C:
			case <-r.Context().Done():
				return
			}
		}
		n, err := content.WriteBodyChunked(w, off, size, 64<<10)
		off += n
		if err != nil {
			return
		}
		fl.Flush()
	}
}

func handlePage(w http.ResponseWriter, r *http.Request) {
	p, err := content.ParsePage(r.PathValue("n"), r.PathValue("size"))
	if err != nil {
		badRequest(w, "/page/N/S: %v", err)
		return
	}
	drain(r)
	body := p.HTML(r.URL.Path)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

func handlePageObject(w http.ResponseWriter, r *http.Request) {
	p, err := content.ParsePage(r.PathValue("n"), r.PathValue("size"))
	if err != nil {
		badRequest(w, "/page/N/S/I.png: %v", err)
		return
	}
	obj, ok := strings.CutSuffix(r.PathValue("obj"), ".png")
	i, err := strconv.Atoi(obj)
	if !ok || err != nil || i < 0 || i >= p.Objects {
		http.Error(w, fmt.Sprintf("/page/N/S/I.png: object %q: want I.png with 0 <= I < %d", r.PathValue("obj"), p.Objects), http.StatusNotFound)
		return
	}
	drain(r)
	size := p.ObjectSize(i)
	w.Header().Set("Content-Type", content.ObjectType(size))
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		return
	}
	_ = content.WriteObject(w, size)
}

// openRoot opens dir as an os.Root after checking it is a directory.
func openRoot(what, dir string) (*os.Root, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s: %s is not a directory", what, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return root, nil
}

var errBadSiteName = errors.New("site names may use letters, digits, '-', '_' and '.' only")

func validSiteName(name string) error {
	if name == "" || name == "." || name == ".." {
		return errBadSiteName
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return errBadSiteName
		}
	}
	return nil
}
