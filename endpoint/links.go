package endpoint

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// Subresources returns, in document order and without duplicates, the
// same-origin resources an HTML page loads while it is parsed: img, script,
// stylesheet/icon/preload/modulepreload links, media and frame sources,
// embeds, objects and image inputs. References are resolved against
// pagePath. References with a scheme or host (including same-host absolute
// URLs) and data:, blob: and javascript: URLs are skipped; CSS url() and
// script-initiated loads are not followed (see docs/metrics.md).
func Subresources(pagePath string, page []byte) ([]string, error) {
	base, err := url.Parse("http://page.invalid" + pagePath)
	if err != nil {
		return nil, fmt.Errorf("page path %q: %w", pagePath, err)
	}
	seen := map[string]bool{}
	var out []string
	add := func(ref string) {
		ref = strings.TrimSpace(ref)
		if ref == "" || strings.HasPrefix(ref, "#") {
			return
		}
		u, err := url.Parse(ref)
		if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
			return
		}
		p := base.ResolveReference(u)
		p.Fragment = ""
		s := p.RequestURI()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	z := html.NewTokenizer(bytes.NewReader(page))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if z.Err() == io.EOF {
				return out, nil
			}
			return out, fmt.Errorf("parsing HTML: %w", z.Err())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			if !hasAttr {
				continue
			}
			attrs := map[string]string{}
			for {
				k, v, more := z.TagAttr()
				attrs[string(k)] = string(v)
				if !more {
					break
				}
			}
			switch string(name) {
			case "img", "script", "iframe", "embed", "audio", "source", "track":
				add(attrs["src"])
			case "video":
				add(attrs["poster"])
				add(attrs["src"])
			case "input":
				if strings.EqualFold(attrs["type"], "image") {
					add(attrs["src"])
				}
			case "object":
				add(attrs["data"])
			case "link":
				for _, rel := range strings.Fields(strings.ToLower(attrs["rel"])) {
					if rel == "stylesheet" || rel == "icon" || rel == "preload" || rel == "modulepreload" {
						add(attrs["href"])
						break
					}
				}
			}
		}
	}
}
