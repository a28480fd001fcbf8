// Package caddy is the Caddy stack (stack.yaml beside this file): Debian's
// caddy, a production web server, serving HTTP/1.1, HTTP/2 and HTTP/3 (its
// quic-go) from files. `quicbench serve --impl caddy` writes the files its
// cells request (endpoint.Materialize: /bytes/N, /page/N/S with its
// objects, byte-identical to quicbench's server) and a Caddyfile into the
// server's scratch directory, and runs caddy with them.
package caddy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/peers"
)

// Name is the stack's name in the registry.
const Name = "caddy"

func init() {
	peers.Provide(Name, peers.Hooks{Check: func(ctx context.Context, _ string) (string, string, error) {
		path, v, err := Find(ctx)
		if err != nil {
			return "", "", err
		}
		return "caddy " + v, path, nil
	}})
	endpoint.RegisterPeer(Name, launch)
}

// Find returns the caddy executable on PATH and its version (as `caddy
// version` prints its first word, e.g. "2.6.2" or "v2.7.6").
func Find(ctx context.Context) (path, version string, err error) {
	path, err = exec.LookPath("caddy")
	if err != nil {
		return "", "", fmt.Errorf("%w: caddy is not on PATH: install it with `apt-get install caddy` (or `bash scripts/setup.sh`)", peers.ErrNotInstalled)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s version: %v", peers.ErrNotInstalled, path, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", "", fmt.Errorf("%w: %s version printed nothing", peers.ErrNotInstalled, path)
	}
	return path, f[0], nil
}

// The site: everything under www/, /page/N/S answered by
// www/page/N/S/index.html (the page's objects sit beside it), sites from
// their own directories, every response uncacheable.
const caddyfileTemplate = `{
	admin off
	auto_https disable_redirects
	servers {
		protocols h1 h2 h3
	}
}
https://:{{PORT}} {
{{BIND}}	tls {{CERT}} {{KEY}}
	header Cache-Control no-store
	@pagedoc path_regexp ^/page/[^/]+/[^/]+$
	rewrite @pagedoc {path}/index.html
{{SITES}}	handle {
		root * {{WWW}}
		file_server
	}
}
`

// quote quotes a Caddyfile token.
func quote(s string) string { return strconv.Quote(s) }

func launch(ctx context.Context, p *endpoint.PeerServer) error {
	cfg := p.Config()
	caddy, version, err := Find(ctx)
	if err != nil {
		return err
	}
	www := filepath.Join(p.Dir(), "www")
	if err := endpoint.Materialize(www, cfg.Paths); err != nil {
		return err
	}
	port, err := p.FreePort()
	if err != nil {
		return err
	}
	// Caddy cannot choose its sockets' congestion control: they take the
	// namespace's default (in a testbed the routes impose the cell's).
	tcpCC, err := p.NamespaceCC()
	if err != nil {
		return err
	}
	p.SetInfo(port, "caddy "+version, map[string]string{"tcp_cc": tcpCC, "quic_cc": p.QUICCC() + " (quic-go's, not selectable)"})
	bind := ""
	if cfg.Host != "" {
		bind = "\tbind " + cfg.Host + "\n"
	}
	var sites strings.Builder
	names := make([]string, 0, len(cfg.Sites))
	for n := range cfg.Sites {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		dir, err := filepath.Abs(cfg.Sites[n])
		if err != nil {
			return err
		}
		fmt.Fprintf(&sites, "\thandle_path /site/%s/* {\n\t\troot * %s\n\t\tfile_server\n\t}\n", n, quote(dir))
	}
	certFile, keyFile := p.CertFiles()
	conf := strings.NewReplacer("{{PORT}}", strconv.Itoa(port), "{{BIND}}", bind,
		"{{CERT}}", quote(certFile), "{{KEY}}", quote(keyFile),
		"{{SITES}}", sites.String(), "{{WWW}}", quote(www)).Replace(caddyfileTemplate)
	confFile := filepath.Join(p.Dir(), "Caddyfile")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	home := filepath.Join(p.Dir(), "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	cmd := exec.Command(caddy, "run", "--config", confFile, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
	up := make(chan struct{})
	var upOnce sync.Once
	out := p.Stderr(func(l string) bool {
		if strings.Contains(l, `"serving initial configuration"`) {
			upOnce.Do(func() { close(up) })
		}
		return strings.Contains(l, `"level":"error"`) || !strings.HasPrefix(l, "{")
	})
	cmd.Stdout, cmd.Stderr = out, out
	if err := p.Start(cmd); err != nil {
		return err
	}
	select {
	case <-up:
	case <-p.Exited():
		return errors.New("exited before it listened")
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("not listening after 30 s")
	}
	if err := p.WaitTCP(ctx, port, 5*time.Second); err != nil {
		return fmt.Errorf("reported its start but %w", err)
	}
	return nil
}
