// Package nginx is the nginx stack (stack.yaml beside this file): Debian's
// nginx, a production web server for HTTP/1.1 and HTTP/2 over the kernel's
// TCP. `quicbench serve --impl nginx` writes the files its cells request
// (endpoint.Materialize, byte-identical to quicbench's server) and a
// configuration into the server's scratch directory (its test certificate,
// every response uncacheable, no access log on the hot path) and runs nginx
// in the foreground with it.
package nginx

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
	"text/template"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/peers"
)

// Name is the stack's name in the registry.
const Name = "nginx"

func init() {
	peers.Provide(Name, peers.Hooks{Check: func(ctx context.Context, _ string) (string, string, error) {
		path, v, err := Find(ctx)
		if err != nil {
			return "", "", err
		}
		return "nginx " + v, path, nil
	}})
	endpoint.RegisterPeer(Name, launch)
}

// Find returns the nginx executable and its version ("1.22.1").
func Find(ctx context.Context) (path, version string, err error) {
	path, err = exec.LookPath("nginx")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/nginx"); e == nil {
			path, err = "/usr/sbin/nginx", nil // root's PATH may lack sbin
		}
	}
	if err != nil {
		return "", "", fmt.Errorf("%w: nginx is not on PATH: install it with `apt-get install nginx-light` (or `bash scripts/setup.sh`)", peers.ErrNotInstalled)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, path, "-v").CombinedOutput() // "nginx version: nginx/1.22.1"
	if err != nil {
		return "", "", fmt.Errorf("%w: %s -v: %v", peers.ErrNotInstalled, path, err)
	}
	_, v, ok := strings.Cut(strings.TrimSpace(string(b)), "nginx/")
	if !ok {
		return "", "", fmt.Errorf("%w: %s -v printed %q", peers.ErrNotInstalled, path, b)
	}
	return path, strings.Fields(v)[0], nil
}

// The configuration: one worker per CPU as nginx's own default, files
// under www/, /page/N/S answered by www/page/N/S/index.html (its objects
// beside it), sites from their own directories, every response
// uncacheable, keep-alive long enough for a sample, no access log.
var conf = template.Must(template.New("nginx.conf").Parse(`daemon off;
master_process on;
worker_processes auto;
user root;
pid {{.Dir}}/nginx.pid;
error_log stderr warn;
events { worker_connections 4096; }
http {
	access_log off;
	include /etc/nginx/mime.types;
	default_type application/octet-stream;
	sendfile on;
	tcp_nopush on;
	keepalive_timeout 120s;
	keepalive_requests 100000;
	client_body_temp_path {{.Dir}}/body;
	proxy_temp_path {{.Dir}}/proxy;
	fastcgi_temp_path {{.Dir}}/fastcgi;
	uwsgi_temp_path {{.Dir}}/uwsgi;
	scgi_temp_path {{.Dir}}/scgi;
	server {
		listen {{.Listen}} ssl http2;
		ssl_certificate {{.Cert}};
		ssl_certificate_key {{.Key}};
		ssl_protocols TLSv1.3;
		add_header Cache-Control no-store always;
		root {{.WWW}};
		location ~ ^/page/[^/]+/[^/]+$ {
			try_files $uri/index.html =404;
		}
{{range .Sites}}		location /site/{{.Name}}/ {
			alias {{.Dir}}/;
			index index.html;
		}
{{end}}	}
}
`))

type site struct{ Name, Dir string }

func launch(ctx context.Context, p *endpoint.PeerServer) error {
	cfg := p.Config()
	path, version, err := Find(ctx)
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
	// nginx cannot choose its sockets' congestion control: they take the
	// namespace's default (in a testbed the routes impose the cell's).
	tcpCC, err := p.NamespaceCC()
	if err != nil {
		return err
	}
	listen := strconv.Itoa(port)
	if cfg.Host != "" {
		listen = cfg.Host + ":" + listen
	}
	var sites []site
	for name, dir := range cfg.Sites {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		sites = append(sites, site{name, abs})
	}
	sort.Slice(sites, func(i, j int) bool { return sites[i].Name < sites[j].Name })
	certFile, keyFile := p.CertFiles()
	var b strings.Builder
	if err := conf.Execute(&b, map[string]any{"Dir": p.Dir(), "Listen": listen, "Cert": certFile, "Key": keyFile, "WWW": www, "Sites": sites}); err != nil {
		return err
	}
	confFile := filepath.Join(p.Dir(), "nginx.conf")
	if err := os.WriteFile(confFile, []byte(b.String()), 0o600); err != nil {
		return err
	}
	p.SetInfo(port, "nginx "+version, map[string]string{"tcp_cc": tcpCC, "workers": "one per CPU"})
	cmd := exec.Command(path, "-c", confFile, "-p", p.Dir(), "-e", "stderr")
	cmd.Stdout, cmd.Stderr = p.Stderr(nil), p.Stderr(nil)
	if err := p.Start(cmd); err != nil {
		return err
	}
	if err := p.WaitTCP(ctx, port, 20*time.Second); err != nil {
		return err
	}
	select {
	case <-p.Exited():
		return errors.New("exited after it listened")
	default:
	}
	return nil
}
