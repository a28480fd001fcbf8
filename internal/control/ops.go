package control

import "slices"

// Op names an operation on the wire. Every operation of every role is in
// the table below: no other package spells an operation's name.
type Op string

// Role is one kind of child process that serves the protocol.
type Role string

// The roles: each is a child process serving the operations Table lists
// for it on its standard input and output.
const (
	// RoleServer is `quicbench serve --control` (endpoint.ServeControl),
	// driven by the runner. Its hello is its endpoint.ServerInfo.
	RoleServer Role = "server"
	// RoleAgent is `quicbench agent` (package cli), the client agent
	// driven by the runner.
	RoleAgent Role = "agent"
	// RoleBulkServer is `quicbench calibrate-bulk server`: calibrate's
	// bulk servers, serving until their input ends.
	RoleBulkServer Role = "bulk-server"
	// RoleBulkClient is `quicbench calibrate-bulk client`: one bulk
	// transfer of calibrate's throughput phase.
	RoleBulkClient Role = "bulk-client"
	// RoleSoaker is `quicbench calibrate-bulk soak`: calibrate's soaker,
	// which counts the CPU left over.
	RoleSoaker Role = "soaker"
)

// The operations, with their request and response bodies ("nothing" is
// an absent body).
const (
	// Ping checks that the peer answers. Server: nothing -> nothing;
	// agent: nothing -> the string "pong".
	Ping Op = "ping"
	// CPU reads the peer process's cumulative CPU time: nothing ->
	// endpoint.CPUTime.
	CPU Op = "cpu"
	// Stats asks the server for the statistics of connections:
	// endpoint.StatsRequest -> []endpoint.ConnStatsReply.
	Stats Op = "stats"
	// Quit ends the server: nothing -> nothing, then the server closes.
	Quit Op = "quit"
	// Run runs one test in the agent: workload.Request -> workload.Result.
	Run Op = "run"
	// ClientVersion asks the agent which program its samples of a client
	// run, by starting it once in the agent's namespace: the client's name
	// -> its product, e.g. "Chrome/156.0.8078.79" or "Firefox/153.7.0"
	// (workload.ClientImpl.Version).
	ClientVersion Op = "client-version"
	// Listen starts calibrate's bulk servers, the bulk server's first
	// request: its configuration -> their addresses and CA certificate.
	Listen Op = "listen"
	// Transfer is a bulk client's one download, its only request: its
	// configuration -> the goodput, with notes when the measured window
	// starts and ends.
	Transfer Op = "transfer"
	// Mark reads the soaker's counts: nothing -> the time and each CPU's
	// units so far.
	Mark Op = "mark"
)

// Table is every role's operations, the protocol in one place: the
// serving side of each role handles exactly these (its tests check it),
// and a Client of the role sends no other.
var Table = map[Role][]Op{
	RoleServer:     {Ping, CPU, Stats, Quit},
	RoleAgent:      {Ping, CPU, Run, ClientVersion},
	RoleBulkServer: {Listen},
	RoleBulkClient: {Transfer},
	RoleSoaker:     {Mark},
}

// serves reports whether op is an operation of role.
func (r Role) serves(op Op) bool { return slices.Contains(Table[r], op) }
