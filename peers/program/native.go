package program

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// Native is a stack whose server and client are native programs speaking
// the peer program protocol (the Rust peers of the Cargo workspace
// peers/Cargo.toml, built into peers/target/release): its folder's package
// registers it with Register in its init.
type Native struct {
	// Name is the stack's name in the registry.
	Name string
	// Server and Client are the programs' names (FindBinary).
	Server, Client string
}

// Register registers the stack's check, server launcher and client.
func (n Native) Register() {
	peers.Provide(n.Name, peers.Hooks{Check: n.check})
	endpoint.RegisterPeer(n.Name, n.launch)
	workload.RegisterClient(n.Name, n.newClient)
}

// check runs the role's program's self-check (PROGRAM --check: a JSON
// object with its version; a failure exits non-zero).
func (n Native) check(ctx context.Context, role string) (version, detail string, err error) {
	name := n.Server
	if role == peers.RoleClient {
		name = n.Client
	}
	path, err := FindBinary(name)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--check").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s --check: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	var rep struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.Version == "" {
		return "", "", fmt.Errorf("%s --check printed no version: %.200q", path, out)
	}
	return rep.Version, path, nil
}

// launch runs the server program with the server's configuration
// (endpoint.RunProgram): the QUIC congestion control the plan asks for
// when the stack runs it, full-size datagrams, quic-go's windows.
func (n Native) launch(ctx context.Context, p *endpoint.PeerServer) error {
	path, err := FindBinary(n.Server)
	if err != nil {
		return err
	}
	conf, err := p.ProgramConfig()
	if err != nil {
		return err
	}
	return p.RunProgram(ctx, []string{path}, nil, conf, nil)
}

// newClient is the agent's client: every sample runs the client program.
func (n Native) newClient(workload.ClientEnv) workload.ClientImpl {
	st, _ := peers.ClientStack(n.Name)
	return workload.ClientImpl{
		Fetch: func(ctx context.Context, req workload.Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
			path, err := FindBinary(n.Client)
			if err != nil {
				return nil, nil, err
			}
			c := &Client{Name: n.Name, Argv: []string{path}, CC: st.Client.CC, KeyLog: req.KeyLog}
			return c.Fetch(ctx, req, spec)
		},
	}
}
