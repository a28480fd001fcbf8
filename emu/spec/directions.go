package spec

import "errors"

// ParseDirections parses the link flags of a CLI: either link, applied to
// both directions independently (like netem on both ends), or up
// (client->server) and/or down (server->client), each defaulting to the
// perfect link. Giving link together with up or down is an error. Errors
// about a spec are *Error values whose Spec field is "link", "up" or "down".
func ParseDirections(link, up, down string) (upLink, downLink Link, err error) {
	if link != "" && (up != "" || down != "") {
		return Link{}, Link{}, errors.New("link spec: give either a link spec for both directions or up/down specs, not both")
	}
	parse := func(name, s string) (Link, error) {
		l, err := Parse(s)
		if e, ok := err.(*Error); ok {
			e.Spec = name
		}
		return l, err
	}
	if link != "" {
		l, err := parse("link", link)
		return l, l, err
	}
	if upLink, err = parse("up", up); err != nil {
		return Link{}, Link{}, err
	}
	if downLink, err = parse("down", down); err != nil {
		return Link{}, Link{}, err
	}
	return upLink, downLink, nil
}
