package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/internal/model"
)

func init() { Register("fetch", newFetchCommand) }

func newFetchCommand(env *Env) *cobra.Command {
	var (
		spec                     endpoint.FetchSpec
		addr, upload, caFile     string
		keyLog                   string
		jsonOut, zeroRTT, resume bool
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
(exit status 1), never a measurement.`,
		Example: `  quicbench fetch --proto h3 --ca ca.pem https://10.0.0.2:4433/bytes/10MB
  quicbench fetch --proto h1 --parallel 6 --addr 10.0.0.2:4433 --insecure /bytes/1MB /bytes/1MB /bytes/1MB
  quicbench fetch --proto h2 --page --json --ca ca.pem https://10.0.0.2:4433/page/50/8KB
  quicbench fetch --proto quic --0rtt --ca ca.pem https://10.0.0.2:4433/bytes/100KB
  quicbench fetch --proto tcp --upload 10MB --ca ca.pem https://10.0.0.2:4433/upload`,
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
				if err != nil {
					return Usage(fmt.Errorf("--ca: %w", err), "the CA file written by quicbench serve --ca-out")
				}
				if spec.RootCAs, err = certs.PoolFromPEM(pem); err != nil {
					return Usage(fmt.Errorf("--ca %s: %w", caFile, err), "the CA file written by quicbench serve --ca-out")
				}
			}
			if keyLog != "" {
				f, err := os.OpenFile(keyLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
				if err != nil {
					return Usage(fmt.Errorf("--keylog: %w", err), "a writable file path")
				}
				defer f.Close()
				spec.KeyLog = f
			}
			res, err := endpoint.Fetch(cmd.Context(), spec)
			if res == nil && err != nil {
				if errors.Is(err, errors.ErrUnsupported) || strings.HasPrefix(err.Error(), "fetch: ") {
					return Usage(err, "see quicbench fetch --help")
				}
				return err
			}
			if jsonOut {
				out := struct {
					*endpoint.FetchResult
					Error string `json:"error,omitempty"`
				}{FetchResult: res}
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
	f.StringVar(&spec.Proto, "proto", model.ProtoH2, "protocol: "+strings.Join(model.Protocols, ", "))
	f.StringVar(&addr, "addr", "", "server HOST:PORT for path arguments")
	f.StringVar(&spec.ServerName, "server-name", "", "name to verify the certificate against (default: the host)")
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
	f.DurationVar(&spec.Timeout, "timeout", endpoint.DefaultTimeout, "limit for the whole fetch")
	f.StringVar(&spec.CongestionControl, "cc", "", "TCP congestion control of the client's sockets (default: the system's)")
	f.StringVar(&keyLog, "keylog", "", "append TLS secrets to this file (SSLKEYLOGFILE format)")
	f.StringVar(&spec.QlogDir, "qlog", "", "write a qlog file per QUIC connection into this directory")
	f.BoolVar(&spec.NoQUICEvents, "no-quic-events", false, "turn quic-go's per-packet event tracing off (QUIC PTO and congestion-event counts stay 0)")
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t\n", i, c.Local, ms(c.Start), ms(c.Connected), ms(c.Handshake),
			t.SmoothedRTTms, t.MinRTTms, t.CwndBytes, t.PacketsSent, t.PacketsLost, t.Retransmits, t.PTOCount, t.CongestionAlgo, c.Requests)
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
