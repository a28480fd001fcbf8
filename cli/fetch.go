package cli

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

func init() { Register("fetch", newFetchCommand) }

func newFetchCommand(env *Env) *cobra.Command {
	var (
		spec                     endpoint.FetchSpec
		addr, upload, caFile     string
		keyLog, client, spki     string
		jsonOut, zeroRTT, resume bool
		caPEM                    []byte
	)
	cmd := &cobra.Command{
		Use:   "fetch URL-or-PATH...",
		Short: "Request resources from a quicbench server over one protocol and show what was measured",
		Long: `Requests the given resources from a quicbench server (quicbench serve) over
--proto h1|h1c|h2|h3|tcp|quic, with a fresh connection and no cached TLS
session, and prints per connection what was negotiated and the transport's
final statistics, and per request its timeline. --json prints everything
(every received chunk too), as defined in docs/metrics.md.

Arguments are URLs (https://HOST:PORT/PATH, all on one server; the scheme is
ignored, --proto decides) or paths with --addr HOST:PORT. h1c uses the
server's cleartext port; every other protocol its TLS port (TCP and UDP).
The raw protocols (tcp, quic) take /bytes/N, /echo and /upload.

A connection that negotiates another protocol than --proto is an error
(exit status 1), never a measurement.

--client NAME with a browser client of the registry of stacks (see
quicbench doctor) loads each URL as a page in that headless browser instead
(a fresh browser and profile per page, no cache) over --proto h1, h1c, h2 or
h3, and prints the page timings (navigation TTFB, DOMContentLoaded, load,
first and largest contentful paint) and every resource with the protocol it
used; --json prints the browser's result per page (one JSON object after the
other). Any resource fetched with another protocol than --proto fails the
command (exit status 1, naming the resources). A browser that takes a
certificate pin accepts the server's certificate by its SPKI hash: give
--spki (quicbench serve prints it), or let fetch read the certificate from
the server first (over TLS on TCP, or QUIC for h3), verified with --ca, or
not at all with --insecure; the others trust --ca in each fresh profile (or,
with --insecure, accept any certificate). For h3 the origin is reached over
HTTP/3 from the first request. Options of the built-in client (--parallel,
--upload, --0rtt, --warm...) do not apply.

--client NAME with a client program of the registry (a fetch client) makes
the built-in client's requests with that program and prints the same
record.`,
		Example: `  quicbench fetch --proto h3 --ca ca.pem https://10.0.0.2:4433/bytes/10MB
  quicbench fetch --proto h1 --parallel 6 --addr 10.0.0.2:4433 --insecure /bytes/1MB /bytes/1MB /bytes/1MB
  quicbench fetch --proto h2 --page --json --ca ca.pem https://10.0.0.2:4433/page/50/8KB
  quicbench fetch --proto quic --0rtt --ca ca.pem https://10.0.0.2:4433/bytes/100KB
  quicbench fetch --proto tcp --upload 10MB --ca ca.pem https://10.0.0.2:4433/upload
  quicbench fetch --client BROWSER --proto h3 --ca ca.pem https://10.0.0.2:4433/page/50/8KB`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return Usage(errors.New("fetch needs at least one URL or path"), "quicbench fetch --proto h2 https://HOST:PORT/bytes/1MB")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(model.Protocols, spec.Proto) {
				return Usage(fmt.Errorf("--proto %q: unknown protocol", spec.Proto), "protocols: "+strings.Join(model.Protocols, ", "))
			}
			if keyLog == "" {
				keyLog = os.Getenv("SSLKEYLOGFILE") // as curl and browsers do
			}
			spec.CongestionControl = ccFlag(env, cmd, spec.CongestionControl)
			var peer workload.ClientImpl
			var peerStack *peers.Stack
			if client != model.ClientBuiltin {
				st, ok := peers.ClientStack(client)
				if !ok {
					return Usage(fmt.Errorf("--client %q: unknown client", client), "clients: "+strings.Join(peers.Clients(), ", "))
				}
				impl, ok := workload.Clients(workload.ClientEnv{Getenv: env.Getenv})[client]
				if !ok {
					return &ExitError{Code: ExitEnv, Err: fmt.Errorf("--client %s: its code is not linked into this program", client)}
				}
				switch st.Client.Kind {
				case peers.KindBrowser, peers.KindAudit:
					if impl.FetchPage == nil {
						return Usage(fmt.Errorf("--client %s loads no pages by hand", client), "use --client "+model.ClientBuiltin+" or a browser client")
					}
					return fetchPages(cmd, env, st, impl, pageFetchArgs{
						proto: spec.Proto, addr: addr, args: args, caFile: caFile, insecure: spec.Insecure,
						serverName: spec.ServerName, spki: spki, keyLog: keyLog, jsonOut: jsonOut, timeout: spec.Timeout,
					})
				case peers.KindFetch:
					if !slices.Contains(st.Client.Protocols, spec.Proto) {
						return Usage(fmt.Errorf("--client %s speaks %s, not %s", client, peers.List(st.Client.Protocols), spec.Proto), "add --proto "+st.Client.Protocols[0])
					}
					for _, name := range []string{"conns", "page", "resume", "0rtt", "verify", "insecure", "keylog", "no-quic-events", "spki"} {
						if cmd.Flags().Changed(name) {
							return Usage(fmt.Errorf("--%s does not apply to --client %s", name, client), "a client program takes --parallel, --repeat, --upload, --warm, --ca, --cc, --qlog and the timeouts")
						}
					}
					keyLog = "" // not $SSLKEYLOGFILE either: its keys are the program's to write
				default:
					return Usage(fmt.Errorf("--client %s (a %s client) fetches nothing by hand", client, st.Client.Kind), "clients: "+strings.Join(peers.Clients(), ", "))
				}
				peer, peerStack = impl, st
			} else if spki != "" {
				return Usage(errors.New("--spki only applies to a browser client that takes a certificate pin"), "the built-in client verifies the certificate with --ca (or not at all with --insecure)")
			}
			a, paths, err := fetchTargets(addr, args)
			if err != nil {
				return Usage(err, "give URLs on one server, or paths with --addr HOST:PORT")
			}
			spec.Addr, spec.Paths = a, paths
			if upload != "" {
				n, err := content.ParseSize(upload)
				if err != nil {
					return Usage(fmt.Errorf("--upload: %w", err), "a size such as 10MB or 1MiB")
				}
				spec.Upload = n
			}
			spec.Resume, spec.ZeroRTT = resume, zeroRTT
			if caFile != "" && spec.Insecure {
				return Usage(errors.New("--ca and --insecure exclude each other"), "give the server's CA, or skip verification")
			}
			if caFile != "" {
				pem, err := os.ReadFile(caFile)
				caPEM = pem
				if err != nil {
					return Usage(fmt.Errorf("--ca: %w", err), "the CA file written by quicbench serve --ca-out")
				}
				if spec.RootCAs, err = certs.PoolFromPEM(pem); err != nil {
					return Usage(fmt.Errorf("--ca %s: %w", caFile, err), "the CA file written by quicbench serve --ca-out")
				}
			}
			if keyLog != "" {
				f, err := openKeyLog(keyLog)
				if err != nil {
					return err
				}
				defer f.Close()
				spec.KeyLog = f
			}
			var res *endpoint.FetchResult
			var extra map[string]float64
			if peerStack != nil {
				res, extra, err = fetchWithProgram(cmd.Context(), peer, peerStack.ClientName(), spec, caPEM)
			} else {
				res, err = endpoint.Fetch(cmd.Context(), spec)
			}
			if res == nil && err != nil {
				if errors.Is(err, errors.ErrUnsupported) || strings.HasPrefix(err.Error(), "fetch: ") {
					return Usage(err, "see quicbench fetch --help")
				}
				return err
			}
			if jsonOut {
				out := struct {
					*endpoint.FetchResult
					Client map[string]float64 `json:"client,omitempty"` // a client program's configuration
					Error  string             `json:"error,omitempty"`
				}{FetchResult: res, Client: extra}
				if err != nil {
					out.Error = err.Error()
				}
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(out); jerr != nil {
					return jerr
				}
			} else {
				printFetch(env.Stdout, spec, res)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&client, "client", model.ClientBuiltin, "who fetches: "+fetchClientsHelp())
	f.StringVar(&spki, "spki", "", "a browser that takes a certificate pin: base64 SHA-256 of the server certificate's SubjectPublicKeyInfo (as quicbench serve prints it; several joined by commas); default: read the certificate from the server, verified with --ca unless --insecure")
	f.StringVar(&spec.Proto, "proto", model.ProtoH2, "protocol: "+strings.Join(model.Protocols, ", "))
	f.StringVar(&addr, "addr", "", "server HOST:PORT for path arguments")
	f.StringVar(&spec.ServerName, "server-name", "", "name to verify the certificate against (default: the host; a browser with a pin: only when reading the certificate for the SPKI hash)")
	f.IntVar(&spec.Parallel, "parallel", 1, "requests in flight at once (h2/h3/quic: streams of one connection)")
	f.IntVar(&spec.Conns, "conns", endpoint.DefaultConns, "h1/h1c/tcp: at most this many parallel connections (browser-like)")
	f.IntVar(&spec.Repeat, "repeat", 1, "request the list of resources this many times")
	f.StringVar(&upload, "upload", "", "send this many bytes with each request (POST body / raw upload), e.g. 10MB")
	f.BoolVar(&spec.Page, "page", false, "treat the one resource as an HTML page and fetch its subresources like a browser")
	f.BoolVar(&spec.Warm, "warm", false, "establish the connection(s) first; measure only the requests")
	f.BoolVar(&resume, "resume", false, "prime a connection for a TLS session ticket, then measure a resumed connection")
	f.BoolVar(&zeroRTT, "0rtt", false, "as --resume, sending requests in 0-RTT (h3 and quic only: Go has no TLS early data over TCP)")
	f.BoolVar(&spec.Verify, "verify", false, "check every byte of /bytes and raw bodies")
	f.BoolVar(&jsonOut, "json", false, "print the full result as JSON")
	f.StringVar(&caFile, "ca", "", "trust this CA certificate (PEM), e.g. the file of quicbench serve --ca-out")
	f.BoolVar(&spec.Insecure, "insecure", false, "do not verify the server certificate")
	f.DurationVar(&spec.HandshakeTimeout, "handshake-timeout", endpoint.DefaultHandshakeTimeout, "limit for connection establishment")
	f.DurationVar(&spec.FirstByteTimeout, "first-byte-timeout", endpoint.DefaultFirstByteTimeout, "limit from request sent to first response byte")
	f.DurationVar(&spec.IdleTimeout, "idle-timeout", endpoint.DefaultIdleTimeout, "limit without progress while sending or receiving a body")
	f.DurationVar(&spec.Timeout, "timeout", endpoint.DefaultTimeout, "limit for the whole fetch (a browser: for each page load, default "+browser.DefaultTimeout.String()+")")
	f.StringVar(&spec.CongestionControl, "cc", "", "congestion control: the client's TCP sockets' (default: $QUICBENCH_CC, set by testbed exec; else the system's), and a client program's QUIC stack's where it can choose")
	f.StringVar(&keyLog, "keylog", "", "append TLS secrets to this file (SSLKEYLOGFILE format; default: $SSLKEYLOGFILE); also for a browser client that writes them")
	f.StringVar(&spec.QlogDir, "qlog", "", "write a qlog file per QUIC connection into this directory")
	f.BoolVar(&spec.NoQUICEvents, "no-quic-events", false, "turn quic-go's per-packet event tracing off (QUIC PTO, congestion-event and congestion-state counts are then not measured: stored as -1, shown as missing)")
	return cmd
}

// fetchTargets splits URL-or-path arguments into one server address and
// request paths.
func fetchTargets(addr string, args []string) (string, []string, error) {
	var paths []string
	for _, a := range args {
		if strings.HasPrefix(a, "/") {
			if addr == "" {
				return "", nil, fmt.Errorf("path %q needs --addr HOST:PORT (or give a full URL)", a)
			}
			paths = append(paths, a)
			continue
		}
		u, err := url.Parse(a)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return "", nil, fmt.Errorf("%q is neither a path nor an http(s) URL", a)
		}
		host := u.Host
		if u.Port() == "" {
			port := "443"
			if u.Scheme == "http" {
				port = "80"
			}
			host = net.JoinHostPort(u.Hostname(), port)
		}
		if addr != "" && addr != host {
			return "", nil, fmt.Errorf("%q is on %s, other resources on %s: one fetch talks to one server", a, host, addr)
		}
		addr = host
		p := u.EscapedPath()
		if p == "" {
			p = "/"
		}
		if u.RawQuery != "" {
			p += "?" + u.RawQuery
		}
		paths = append(paths, p)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", nil, fmt.Errorf("--addr %q: want HOST:PORT", addr)
	}
	return addr, paths, nil
}

func ms(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", float64(ns)/1e6)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printFetch(w io.Writer, spec endpoint.FetchSpec, res *endpoint.FetchResult) {
	n := res.Negotiated
	fmt.Fprintf(w, "%s to %s", res.Proto, spec.Addr)
	if n.ALPN != "" || n.HTTPVersion != "" {
		fmt.Fprintf(w, ": ALPN %q %s %s %s", n.ALPN, n.HTTPVersion, n.TLSVersion, n.Cipher)
	}
	if n.QUICVersion != "" {
		fmt.Fprintf(w, " QUIC %s", n.QUICVersion)
	}
	fmt.Fprintf(w, ", resumed %s, 0-RTT %s\n", yesNo(n.Resumed), yesNo(n.ZeroRTT))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "conn\tlocal\tstart ms\tconnected ms\thandshake ms\tsrtt ms\tmin rtt ms\tcwnd B\tsent pkts\tlost\tretrans\tPTO/RTO\tcc\trequests\t")
	for i, c := range res.Conns {
		t := c.Transport
		pto := "–" // not measured (QUIC without event tracing)
		if t.PTOCount != model.NotMeasured {
			pto = strconv.FormatInt(t.PTOCount, 10)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t\n", i, c.Local, ms(c.Start), ms(c.Connected), ms(c.Handshake),
			t.SmoothedRTTms, t.MinRTTms, t.CwndBytes, t.PacketsSent, t.PacketsLost, t.Retransmits, pto, t.CongestionAlgo, c.Requests)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#\tconn\tstatus\tbytes\tstart ms\tTTFB ms\tduration ms\tchunks\tpath\t")
	for i, r := range res.Requests {
		ttfb, dur := int64(0), int64(0)
		if r.FirstByte != 0 {
			ttfb = r.FirstByte - r.Start
		}
		if r.End != 0 {
			dur = r.End - r.Start
		}
		path := r.Path
		if r.Error != "" {
			path += "  (" + r.Error + ")"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t\n", i, r.Conn, r.Status, r.Bytes, ms(r.Start), ms(ttfb), ms(dur), len(r.Chunks), path)
	}
	_ = tw.Flush()
	span := time.Duration(res.MeasureEnd - res.MeasureStart)
	fmt.Fprintf(w, "\n%d bytes received, %d sent in %v", res.Bytes, res.UploadBytes, span.Round(time.Microsecond))
	if span > 0 {
		fmt.Fprintf(w, ": %.2f Mbit/s", float64(res.Bytes+res.UploadBytes)*8/span.Seconds()/1e6)
	}
	fmt.Fprintf(w, "; client CPU %v user + %v system\n", res.CPU.ClientUser.Round(time.Microsecond), res.CPU.ClientSys.Round(time.Microsecond))
}

// fetchClientsHelp lists fetch's clients for its --client flag.
func fetchClientsHelp() string {
	parts := []string{model.ClientBuiltin + " (quicbench's own HTTP/QUIC client)"}
	for _, st := range peers.All() {
		if st.Client == nil || st.Name == peers.Own {
			continue
		}
		switch st.Client.Kind {
		case peers.KindBrowser:
			parts = append(parts, st.ClientName()+" (a headless browser loads each URL as a page)")
		case peers.KindFetch:
			parts = append(parts, st.ClientName()+" (its client program, --proto "+strings.Join(st.Client.Protocols, "|")+")")
		}
	}
	return strings.Join(parts, ", ")
}

// builtinOnlyFetchFlags are the options of the built-in client that mean
// nothing for a browser page load.
var builtinOnlyFetchFlags = []string{
	"parallel", "conns", "repeat", "upload", "warm", "resume", "0rtt", "verify",
	"handshake-timeout", "first-byte-timeout", "idle-timeout", "cc", "qlog", "no-quic-events",
}

// pageFetchArgs is what quicbench fetch --client BROWSER was asked.
type pageFetchArgs struct {
	proto, addr, caFile, serverName, spki, keyLog string
	args                                          []string
	insecure, jsonOut                             bool
	timeout                                       time.Duration
}

// pageFlags are the fetch flags a browser client may take
// (workload.ClientImpl.FetchFlags).
var pageFlags = []string{"spki", "server-name", "keylog"}

// fetchPages loads each page once, cold, in a fresh headless browser of
// client st and prints what it measured.
func fetchPages(cmd *cobra.Command, env *Env, st *peers.Stack, impl workload.ClientImpl, o pageFetchArgs) error {
	client := st.ClientName()
	hint := "see quicbench fetch --help (--client " + client + ")"
	if !slices.Contains(st.Client.Protocols, o.proto) && o.proto != model.ProtoH1C {
		return Usage(fmt.Errorf("--client %s --proto %s: a browser loads pages over h1, h1c, h2 or h3, not raw %s streams", client, o.proto, o.proto),
			"use the built-in client (--client builtin) for tcp and quic")
	}
	for _, name := range builtinOnlyFetchFlags {
		if cmd.Flags().Changed(name) {
			return Usage(fmt.Errorf("--%s does not apply to --client %s: the browser loads each page once, cold, as it would", name, client), hint)
		}
	}
	for _, name := range pageFlags {
		if cmd.Flags().Changed(name) && !slices.Contains(impl.FetchFlags, name) {
			return Usage(fmt.Errorf("--%s does not apply to --client %s", name, client), hint+": it trusts --ca, or any certificate with --insecure")
		}
	}
	if !slices.Contains(impl.FetchFlags, "keylog") {
		o.keyLog = "" // not $SSLKEYLOGFILE either
	}
	if o.caFile != "" && o.insecure {
		return Usage(errors.New("--ca and --insecure exclude each other"), "give the server's CA, or skip verification")
	}
	if err := checkSPKIList(o.spki); err != nil {
		return Usage(fmt.Errorf("--spki: %w", err), "the base64 SHA-256 of the certificate's SubjectPublicKeyInfo, as quicbench serve prints it")
	}
	addr, scheme, paths, timeout, err := pageTargets(cmd, o, hint)
	if err != nil {
		return err
	}
	pf := workload.PageFetch{Proto: o.proto, Addr: addr, ServerName: o.serverName, Insecure: o.insecure, SPKI: o.spki, Timeout: timeout}
	if o.keyLog != "" {
		abs, err := filepath.Abs(o.keyLog)
		if err == nil {
			var f *os.File
			if f, err = os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
				err = f.Close()
			}
		}
		if err != nil {
			return Usage(fmt.Errorf("--keylog: %w", err), "a writable file path")
		}
		pf.KeyLog = abs
	}
	if o.caFile != "" {
		if pf.CAPEM, err = os.ReadFile(o.caFile); err != nil {
			return Usage(fmt.Errorf("--ca: %w", err), "the CA file written by quicbench serve --ca-out")
		}
	}
	return loadPages(cmd.Context(), env, client, o, scheme+"://"+addr, paths,
		func(ctx context.Context, url string) (*browser.Result, error) { return impl.FetchPage(ctx, pf, url) },
		func(res *browser.Result, err error) error {
			if errors.Is(err, peers.ErrNotInstalled) {
				return &ExitError{Code: ExitEnv, Err: err, Hint: "install it: " + st.Install}
			}
			var oe *workload.OptionError
			if res == nil && errors.As(err, &oe) {
				return Usage(err, hint)
			}
			return nil
		})
}

// fetchWithProgram runs spec with a client program (a fetch client of the
// registry), verifying the server with the CA caPEM.
func fetchWithProgram(ctx context.Context, impl workload.ClientImpl, client string, spec endpoint.FetchSpec, caPEM []byte) (*endpoint.FetchResult, map[string]float64, error) {
	host, port, err := net.SplitHostPort(spec.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("server address %q: %w", spec.Addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return nil, nil, fmt.Errorf("server address %q: bad port", spec.Addr)
	}
	req := workload.Request{Protocol: spec.Proto, Client: client, CC: spec.CongestionControl,
		Target: workload.Target{Host: host, Port: p, CAPEM: string(caPEM)}}
	return impl.Fetch(ctx, req, spec)
}

// pageTargets resolves what a browser client of fetch loads: the server's
// host:port, the URL scheme the protocol takes (http for h1c, else https),
// the paths, and --timeout when it is given (0: the browser's default).
// Errors are usage errors; hint names the client's help.
func pageTargets(cmd *cobra.Command, o pageFetchArgs, hint string) (addr, scheme string, paths []string, timeout time.Duration, err error) {
	addr, paths, err = fetchTargets(o.addr, o.args)
	if err != nil {
		return "", "", nil, 0, Usage(err, "give URLs on one server, or paths with --addr HOST:PORT")
	}
	scheme = "https"
	if o.proto == model.ProtoH1C {
		scheme = "http"
	}
	if cmd.Flags().Changed("timeout") {
		if o.timeout <= 0 {
			return "", "", nil, 0, Usage(fmt.Errorf("--timeout %v: want a positive duration", o.timeout), hint)
		}
		timeout = o.timeout
	}
	return addr, scheme, paths, timeout, nil
}

// loadPages loads origin+path for each of paths with load (a browser
// client's) and prints each result, as text or JSON; fatal says when a
// load's error ends the command at once (no browser, bad options). A
// page with an error status is an error, like the built-in client's.
func loadPages(ctx context.Context, env *Env, client string, o pageFetchArgs, origin string, paths []string,
	load func(ctx context.Context, url string) (*browser.Result, error), fatal func(*browser.Result, error) error) error {
	var errs []error
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	for i, p := range paths {
		url := origin + p
		res, err := load(ctx, url)
		if ferr := fatal(res, err); ferr != nil {
			return ferr
		}
		if res != nil && res.Status >= 400 {
			// Like the built-in client: an error page is no measurement.
			err = errors.Join(err, fmt.Errorf("%s %s %s: unexpected status %d", client, o.proto, url, res.Status))
		}
		if o.jsonOut {
			var jerr error
			if res != nil {
				out := struct {
					*browser.Result
					Error string `json:"error,omitempty"`
				}{Result: res}
				if err != nil {
					out.Error = err.Error()
				}
				jerr = enc.Encode(out)
			} else {
				jerr = enc.Encode(struct {
					URL   string
					Error string `json:"error"`
				}{url, err.Error()})
			}
			if jerr != nil {
				return jerr
			}
		} else {
			if i > 0 {
				fmt.Fprintln(env.Stdout)
			}
			printBrowserLoad(env.Stdout, client, o.proto, url, res, err)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// checkSPKIList checks a comma-separated list of base64 SHA-256 digests.
func checkSPKIList(list string) error {
	if list == "" {
		return nil
	}
	for i, h := range strings.Split(list, ",") {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h))
		if err != nil || len(raw) != sha256.Size {
			return fmt.Errorf("entry %d %q is not a base64 SHA-256 digest", i+1, h)
		}
	}
	return nil
}

// printBrowserLoad prints one page load of --client chromium or firefox
// (client): the document's connection, the page timings and every
// resource with its protocol (marking those that used another one than
// proto).
func printBrowserLoad(w io.Writer, client, proto, pageURL string, res *browser.Result, err error) {
	if res == nil {
		fmt.Fprintf(w, "%s %s %s: failed: %v\n", client, proto, pageURL, err)
		return
	}
	n := res.Negotiated
	fmt.Fprintf(w, "%s %s %s (%s)", client, proto, res.URL, res.Version)
	if res.Status != 0 {
		fmt.Fprintf(w, ": status %d", res.Status)
	}
	if n.ALPN != "" {
		fmt.Fprintf(w, ", ALPN %q %s %s %s", n.ALPN, n.HTTPVersion, n.TLSVersion, n.Cipher)
	}
	fmt.Fprintln(w)
	d := func(v time.Duration) string { return ms(int64(v)) }
	fmt.Fprintf(w, "TTFB %s ms, DOMContentLoaded %s ms, load %s ms, FCP %s ms, LCP %s ms\n\n",
		d(res.TTFB), d(res.DOMContentLoaded), d(res.Load), d(res.FCP), d(res.LCP))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tprotocol\tstart ms\tresponse ms\tend ms\tbytes\tresource")
	nsMs := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e6) }
	for i, r := range res.Resources {
		p := r.Protocol
		if p == "" {
			p = "(none)"
		}
		if r.Protocol != res.Protocol {
			p += " (want " + res.Protocol + ")"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\n", i, p, nsMs(r.Start), nsMs(r.TTFB), nsMs(r.End), r.Bytes, r.Name)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\n%d resources, %d bytes transferred (%d body bytes), wall %v\n",
		len(res.Resources), res.TransferBytes, res.BodyBytes, res.Wall.Round(time.Microsecond))
}
