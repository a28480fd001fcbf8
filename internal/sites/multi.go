package sites

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/har"
)

// PageShape is the recipe of a generated multi-origin page: a document on
// its first origin referencing style sheets, scripts and images spread
// over Origins origins, shaped like the pages of the web (a few style
// sheets, a quarter scripts, the rest mostly images; some style sheets
// pull images from yet another origin, so that some connections open
// only after others).
type PageShape struct {
	Name     string
	Origins  int   // distinct origins (host names), 1..len(originNames)
	Requests int   // entries, the document included
	Bytes    int64 // total decoded body bytes, about
	// SharedIPs makes the last hosts share a recorded server address with
	// an earlier one (as CDN host names often do), this many of them.
	SharedIPs int
	// Missing leaves the body out of this many entries (as a browser's
	// export does for cached responses).
	Missing int
	Seed    uint64
}

// originNames are the host names generated pages use, in order (reserved
// .example names: RFC 2606).
var originNames = []string{
	"www.news.example", "cdn.news.example", "static.cdnhost.example", "img.imgcdn.example",
	"api.news.example", "fonts.fontsvc.example", "js.tagmanager.example", "pix.tracker.example",
	"ads.adnet.example", "media.videocdn.example", "assets.widgets.example", "i.social.example",
	"c.comments.example", "s.search.example", "t.metrics.example", "u.uploads.example",
	"v.vendor.example", "w.weather.example", "x.extra.example", "y.yield.example",
}

// MaxPageOrigins is the most origins a generated page may have.
var MaxPageOrigins = len(originNames)

// genRes is one resource of a generated page.
type genRes struct {
	origin int
	path   string // with query
	kind   string // "css", "js", "img", "bgimg"; "import": a style sheet another imports
	enc    string // content coding of the response: "", "gzip", "br"
	size   int64
	body   []byte
}

// BuildPage generates the page as a HAR: what a browser would record
// loading it, bodies decoded and their recorded Content-Encoding in the
// headers.
func BuildPage(s PageShape) (*har.HAR, error) {
	if s.Origins < 1 || s.Origins > MaxPageOrigins {
		return nil, fmt.Errorf("page %s: %d origins (allowed 1..%d)", s.Name, s.Origins, MaxPageOrigins)
	}
	if s.Requests < s.Origins+1 {
		return nil, fmt.Errorf("page %s: %d requests cannot reach %d origins", s.Name, s.Requests, s.Origins)
	}
	if s.Missing >= s.Requests || s.SharedIPs >= s.Origins && s.SharedIPs > 0 {
		return nil, fmt.Errorf("page %s: %d missing bodies or %d shared addresses is too many", s.Name, s.Missing, s.SharedIPs)
	}
	rng := rand.New(rand.NewPCG(s.Seed, uint64(s.Requests)*1000+uint64(s.Origins)))
	n := s.Requests - 1
	nCSS := max(1, n*8/100)
	nJS := max(1, n*25/100)
	if nCSS+nJS > n {
		nCSS, nJS = min(nCSS, n), max(0, n-min(nCSS, n))
	}
	nBg := 0
	if s.Origins > 2 {
		nBg = min(nCSS, max(1, n*4/100)) // style sheets' background images on another origin
	}
	nImg := n - nCSS - nJS - nBg
	if nImg < 0 {
		nBg += nImg
		nImg = 0
	}
	var res []genRes
	// Every origin gets at least one resource; the rest spread evenly
	// after the document's origin took a larger share.
	next := 0
	pick := func() int {
		o := next % s.Origins
		next++
		return o
	}
	weights := map[string][2]float64{"css": {0.5, 1.5}, "js": {1, 4}, "img": {0.5, 9}, "bgimg": {1, 4}}
	add := func(kind string, i int) {
		o := pick()
		var path string
		switch kind {
		case "css":
			path = fmt.Sprintf("/css/style%d.css", i)
			if i%2 == 1 {
				path += "?v=" + strconv.Itoa(1000+i)
			}
		case "js":
			path = fmt.Sprintf("/js/app%d.js", i)
			if i%3 == 2 {
				path = fmt.Sprintf("/v1/config.js?lang=en&page=%d&cb=%d", i, 77+i)
			}
		case "img", "bgimg":
			path = fmt.Sprintf("/img/photo%d.png", i)
			if kind == "bgimg" {
				path = fmt.Sprintf("/bg/hero%d.png", i)
			}
			if i%4 == 1 {
				path += fmt.Sprintf("?w=%d&q=80", 160+40*i)
			}
		}
		w := weights[kind]
		res = append(res, genRes{origin: o, path: path, kind: kind, size: int64(1000 * (w[0] + (w[1]-w[0])*rng.Float64()*rng.Float64()))})
	}
	for i := 0; i < nCSS; i++ {
		add("css", i)
	}
	for i := 0; i < nJS; i++ {
		add("js", i)
	}
	for i := 0; i < nImg; i++ {
		add("img", i)
	}
	for i := 0; i < nBg; i++ {
		add("bgimg", i)
	}
	// Scale sizes to the page weight (the document is about 2% of it).
	var sum int64
	for _, r := range res {
		sum += r.size
	}
	budget := s.Bytes - s.Bytes/50
	for i := range res {
		res[i].size = max(minSize, res[i].size*budget/max(sum, 1))
	}
	// Codings: style sheets br, scripts alternately br and gzip (every
	// fifth one uncompressed), images none.
	for i := range res {
		switch res[i].kind {
		case "css":
			res[i].enc = "br"
		case "js":
			switch {
			case i%5 == 4:
				res[i].enc = ""
			case i%2 == 0:
				res[i].enc = "br"
			default:
				res[i].enc = "gzip"
			}
		}
	}
	// Background images are pulled by a style sheet of another origin.
	var bgRules []string
	cssIdx := []int{}
	for i := range res {
		if res[i].kind == "css" {
			cssIdx = append(cssIdx, i)
		}
	}
	bg := 0
	for i := range res {
		if res[i].kind != "bgimg" {
			continue
		}
		if len(cssIdx) > 0 {
			c := cssIdx[bg%len(cssIdx)]
			if res[i].origin == res[c].origin {
				res[i].origin = (res[c].origin + 1) % s.Origins
			}
		}
		bgRules = append(bgRules, fmt.Sprintf(".bg%d{background-image:url(%s);width:160px;height:90px}", bg, absURL(res[i].origin, res[i].path)))
		bg++
	}
	// Bodies.
	cssRules := make([][]string, len(res))
	for k, r := range bgRules {
		if len(cssIdx) > 0 {
			c := cssIdx[k%len(cssIdx)]
			cssRules[c] = append(cssRules[c], r)
		}
	}
	for i := range res {
		r := &res[i]
		var err error
		switch r.kind {
		case "css":
			head := "/* quicbench generated style sheet */\n" + strings.Join(cssRules[i], "\n") + "\n"
			r.body = textFile(rng, max(r.size, int64(len(head))+64), head, ".c%d{margin:%dpx;padding:%dpx;color:#%06x}\n")
		case "js":
			r.body = textFile(rng, r.size, "// quicbench generated script\n", "var v%d=%d+%d;void(%#x);\n")
		default:
			r.body, err = pngOfSize(rng, r.size)
		}
		if err != nil {
			return nil, fmt.Errorf("page %s: %s: %w", s.Name, r.path, err)
		}
	}
	doc := pageHTML(s, res, bg)
	return pageHAR(s, doc, res)
}

// absURL is the URL of a path on origin o.
func absURL(o int, path string) string { return "https://" + originNames[o] + path }

// pageHTML writes the document: style sheets and one blocking script in
// the head, images and the background boxes in the body, the other scripts
// deferred at the end.
func pageHTML(s PageShape, res []genRes, bgBoxes int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>%s</title>\n<link rel=\"icon\" href=\"data:,\">\n", s.Name)
	firstJS := true
	for _, r := range res {
		switch {
		case r.kind == "css":
			fmt.Fprintf(&b, "<link rel=\"stylesheet\" href=\"%s\">\n", absURL(r.origin, r.path))
		case r.kind == "js" && firstJS:
			fmt.Fprintf(&b, "<script src=\"%s\"></script>\n", absURL(r.origin, r.path))
			firstJS = false
		}
	}
	fmt.Fprintf(&b, "</head><body>\n<h1>%s</h1>\n<p>A page generated by quicbench: %d requests to %d origins.</p>\n", s.Name, s.Requests, s.Origins)
	for i := 0; i < bgBoxes; i++ {
		fmt.Fprintf(&b, "<div class=\"bg%d\"></div>\n", i)
	}
	for i, r := range res {
		if r.kind == "img" {
			fmt.Fprintf(&b, "<img src=\"%s\" width=\"160\" height=\"120\" alt=\"image %d\">\n", absURL(r.origin, r.path), i)
		}
	}
	firstJS = true
	for _, r := range res {
		if r.kind == "js" {
			if firstJS {
				firstJS = false
				continue
			}
			fmt.Fprintf(&b, "<script src=\"%s\" defer></script>\n", absURL(r.origin, r.path))
		}
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// pageHAR writes what a browser records loading the page.
func pageHAR(s PageShape, doc []byte, res []genRes) (*har.HAR, error) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	h := &har.HAR{Log: har.Log{
		Version: "1.2",
		Creator: har.Creator{Name: "quicbench", Version: "generator"},
		Pages:   []har.Page{{StartedDateTime: har.Time(start), ID: "page_1", Title: s.Name}},
	}}
	ipOf := func(o int) string {
		if s.SharedIPs > 0 && o >= s.Origins-s.SharedIPs {
			o = o - (s.Origins - s.SharedIPs) + 1 // share with origins 1, 2, ...
		}
		return fmt.Sprintf("192.0.2.%d", 10+o)
	}
	entry := func(i int, o int, path, mime, enc string, body []byte) har.Entry {
		u := absURL(o, path)
		pu, _ := url.Parse(u)
		var q []har.NameValue
		for k, vs := range pu.Query() {
			for _, v := range vs {
				q = append(q, har.NameValue{Name: k, Value: v})
			}
		}
		headers := []har.NameValue{
			{Name: "content-type", Value: mime},
			{Name: "cache-control", Value: "max-age=3600"},
			{Name: "access-control-allow-origin", Value: "*"},
		}
		if enc != "" {
			headers = append(headers, har.NameValue{Name: "content-encoding", Value: enc}, har.NameValue{Name: "vary", Value: "Accept-Encoding"})
		}
		e := har.Entry{
			Pageref:         "page_1",
			StartedDateTime: har.Time(start.Add(time.Duration(i) * time.Millisecond)),
			Request: har.Request{Method: "GET", URL: u, HTTPVersion: "h2",
				Headers:     []har.NameValue{{Name: "accept-encoding", Value: "gzip, deflate, br"}},
				QueryString: q, HeadersSize: -1, BodySize: 0},
			Response: har.Response{Status: 200, StatusText: "OK", HTTPVersion: "h2", Headers: headers,
				Content: har.Content{MimeType: mime}, HeadersSize: -1, BodySize: -1},
			ServerIPAddress: ipOf(o),
		}
		e.Response.Content.SetBody(body)
		return e
	}
	h.Log.Entries = append(h.Log.Entries, entry(0, 0, "/", "text/html; charset=utf-8", "gzip", doc))
	for i, r := range res {
		mime := map[string]string{"css": "text/css", "import": "text/css", "js": "application/javascript", "img": "image/png", "bgimg": "image/png"}[r.kind]
		h.Log.Entries = append(h.Log.Entries, entry(i+1, r.origin, r.path, mime, r.enc, r.body))
	}
	// Leave out bodies of the last entries, as an export does for cached
	// responses.
	for k := 0; k < s.Missing; k++ {
		e := &h.Log.Entries[len(h.Log.Entries)-1-k]
		e.Response.Content.Text = nil
		e.Response.Content.Encoding = ""
	}
	return h, h.Check()
}

// ChainPage generates the page of the physics check: a document on the
// first of origins origins (3 or more), one small object on each other
// origin: a style sheet on the second, which imports a second style sheet
// from the third, and an image on each of the rest. A browser opens its
// connections in three rounds, each after the previous one's response:
// the document's, then the style sheet's and the images' (in parallel),
// then the imported style sheet's. An import, unlike a background image
// (fetched only once style is computed, which a browser may do after the
// load event), is fetched when the sheet is parsed and holds the sheet's
// load, and so the page's load event, until it arrives.
func ChainPage(origins int) (*har.HAR, error) {
	if origins < 3 || origins > MaxPageOrigins {
		return nil, fmt.Errorf("chain page: %d origins (allowed 3..%d)", origins, MaxPageOrigins)
	}
	rng := rand.New(rand.NewPCG(uint64(origins), 0xc4a1))
	img := func() []byte {
		b, _ := pngOfSize(rng, 2000)
		return b
	}
	res := []genRes{
		{origin: 1, path: "/style.css", kind: "css", enc: "gzip"},
		{origin: 2, path: "/more.css", kind: "import", enc: "gzip", body: []byte(".bg0{width:160px;height:90px;background:#8ac}\n")},
	}
	res[0].body = []byte(fmt.Sprintf("@import url(%s);\nbody{margin:0}\n", absURL(2, "/more.css")))
	for o := 3; o < origins; o++ {
		res = append(res, genRes{origin: o, path: fmt.Sprintf("/img%d.png", o), kind: "img", body: img()})
	}
	s := PageShape{Name: fmt.Sprintf("chain-%d", origins), Origins: origins, Requests: origins}
	return pageHAR(s, pageHTML(s, res, 1), res)
}
