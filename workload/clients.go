package workload

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// ClientEnv is what a client's constructor may read: the agent's
// environment.
type ClientEnv struct {
	Getenv func(string) string
}

// ClientImpl is how a client of the registry of stacks (package peers)
// takes samples in the client agent. Which fields are set follows the
// client's kind: Fetch for a fetch client, Load for a browser or audit
// client, Bench for a browser that runs the bench page.
type ClientImpl struct {
	// Fetch makes the built-in client's requests with the client's own
	// program (a fetch client).
	Fetch PeerFetch
	// Load loads a page (a browser or audit client).
	Load BrowserLoader
	// Bench runs the bench page (a browser client with bench).
	Bench BrowserBench
	// Version starts the client's program once and returns its product
	// ("Chrome/156.0.8078.73", "Firefox/153.8.0"), recorded with the run;
	// nil when the samples report it themselves.
	Version func(ctx context.Context) (string, error)
	// Close releases what the client keeps across samples (a running
	// browser) when the agent ends; nil when nothing is kept.
	Close func()
	// FetchPage loads pages for `quicbench fetch --client NAME` (a browser
	// client), and FetchFlags names the fetch flags it takes beyond
	// --proto, --addr, --ca, --insecure, --timeout and --json.
	FetchPage  PageFetcher
	FetchFlags []string
}

var (
	clientsMu sync.Mutex
	clientMk  = map[string]func(ClientEnv) ClientImpl{}
)

// RegisterClient registers the client of stack name (its client name in
// the registry): mk builds it for an agent. The stack's package calls it
// at init.
func RegisterClient(name string, mk func(ClientEnv) ClientImpl) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if _, dup := clientMk[name]; dup {
		panic("workload: client " + name + " registered twice")
	}
	clientMk[name] = mk
}

// Clients builds every registered client for an agent whose environment
// is env.
func Clients(env ClientEnv) map[string]ClientImpl {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	clientsMu.Lock()
	defer clientsMu.Unlock()
	out := map[string]ClientImpl{}
	for name, mk := range clientMk {
		out[name] = mk(env)
	}
	return out
}

// RegisteredClients lists the clients whose code is linked into this
// program, sorted.
func RegisteredClients() []string {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	var out []string
	for n := range clientMk {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// clientFor returns the registry's description of a request's client (nil
// for quicbench's own) and what this agent has for it.
func (e *Executor) clientFor(client string, contract *ContractDecl) (*peers.Stack, ClientImpl, error) {
	if client == "" || client == model.ClientBuiltin {
		return nil, ClientImpl{}, nil
	}
	if contract != nil {
		if contract.Name != client {
			return nil, ClientImpl{}, fmt.Errorf("client %s: the request declares stack %q", client, contract.Name)
		}
		st, err := peers.Contract(*contract, "/", "the runner's request")
		if err == nil {
			err = peers.Declare(st)
		}
		if err != nil {
			return nil, ClientImpl{}, err
		}
		return st, ClientImpl{}, nil
	}
	st, ok := peers.ClientStack(client)
	if !ok {
		return nil, ClientImpl{}, fmt.Errorf("unknown client %q (known: %s)", client, strings.Join(peers.Clients(), ", "))
	}
	impl, ok := e.Clients[client]
	if !ok {
		return st, impl, fmt.Errorf("client %s: not available in this agent (see quicbench doctor)", client)
	}
	return st, impl, nil
}

// fetchUnsupported says why a fetch client cannot take a sample of test
// over proto ("" if it can).
func fetchUnsupported(st *peers.Stack, test, proto string) string {
	c := st.Client
	if !slices.Contains(c.Tests, test) || !slices.Contains(c.Protocols, proto) {
		return fmt.Sprintf("client %s runs %s over %s only, not %s over %s", st.ClientName(),
			peers.List(c.Tests), peers.List(c.Protocols), test, proto)
	}
	return ""
}

// PageFetch is what `quicbench fetch` asks a browser client for: to load a
// page once, cold, in a fresh browser, and say what it measured.
type PageFetch struct {
	Proto      string        // h1, h1c, h2 or h3
	Addr       string        // the server's host:port
	ServerName string        // the name to verify the certificate against ("" = the host)
	CAPEM      []byte        // the CA to trust (nil with Insecure or SPKI)
	Insecure   bool          // accept any certificate
	SPKI       string        // a certificate pin (base64 SHA-256 of its SubjectPublicKeyInfo), for browsers that take one
	KeyLog     string        // a file to append TLS secrets to, for browsers that write them
	Timeout    time.Duration // the load's limit (0: the browser's default)
}

// PageFetcher loads url as o says and returns what the browser measured.
// Its error wraps peers.ErrNotInstalled when the browser is missing, and is
// an *OptionError when o cannot be done.
type PageFetcher func(ctx context.Context, o PageFetch, url string) (*browser.Result, error)

// OptionError is a PageFetch a browser cannot do (a usage error).
type OptionError struct{ Err error }

func (e *OptionError) Error() string { return e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }
