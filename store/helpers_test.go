package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/model"
)

func openTemp(t testing.TB) (*DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

func testRun() model.Run {
	return model.Run{
		PlanName: "quick",
		PlanText: "name: quick\niterations: 3\n",
		PlanHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		Seed:     0xfedcba9876543210, // above 2^63: checks the uint64 round trip
		Started:  time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.UTC),
		Status:   RunRunning,
		Env: model.Environment{
			Version: "0.1.0", Commit: "abc123", GoVersion: "go1.26.8", QuicGoVersion: "v0.65.0",
			Kernel: "6.1.0-18-amd64", CPUModel: "Intel(R) Xeon(R)", CPUs: 2, Hostname: "lab",
			CCClient: "cubic", CCServer: "bbr",
			Sysctls: map[string]string{"net.core.rmem_max": "7500000", "net.ipv4.tcp_wmem": "4096 16384 4194304"},
		},
	}
}

func testCells(n int) []model.Cell {
	protos := []string{model.ProtoH1, model.ProtoH2, model.ProtoH3}
	cells := make([]model.Cell, n)
	for i := range cells {
		p := protos[i%len(protos)]
		cells[i] = model.Cell{
			Key:      fmt.Sprintf("loss-%d/download/size=1MB/%s/builtin/cubic", i/len(protos), p),
			Group:    fmt.Sprintf("loss-%d/download/size=1MB/builtin/cubic", i/len(protos)),
			Scenario: fmt.Sprintf("loss-%d", i/len(protos)),
			LinkUp:   "rate 10mbit delay 20ms", LinkDown: "rate 10mbit delay 20ms loss 1%",
			Test:     "download",
			Factors:  []model.Factor{{Name: "loss", Value: fmt.Sprint(i / len(protos))}, {Name: "size", Value: "1MB"}},
			Protocol: p, Client: model.ClientBuiltin, Server: model.ServerQuicbench, CC: "cubic",
			Metric: "goodput_mbps", Unit: "Mbit/s", HigherIsBetter: true,
			Iterations: 10, Warmup: true,
		}
	}
	return cells
}

// fullSample returns a sample with every field set, deterministic in
// (cellID, iteration), with a timeline of points points.
func fullSample(cellID int64, iteration, points int) model.Sample {
	k := int64(iteration + 2)
	s := model.Sample{
		CellID:      cellID,
		Iteration:   iteration,
		Warmup:      iteration == -1,
		Order:       iteration % 3,
		Seed:        uint64(0x8000000000000000) | uint64(cellID)<<20 | uint64(iteration+1),
		Started:     time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC).Add(time.Duration(k) * 1234567891),
		Wall:        time.Duration(k) * 3141592,
		Overhead:    time.Duration(k) * 2718,
		Drain:       time.Duration(k) * 1414,
		Prep:        time.Duration(k) * 1000,
		Slot:        int(k % 3),
		Concurrency: int(1 + k%4),
		Status:      model.StatusOK,
		Value:       9.25 + float64(k)/7,
		Metrics: map[string]float64{
			"goodput_mbps": 9.25 + float64(k)/7, "completion_ms": 812.5 * float64(k), "ttfb_ms": 41.0625,
			"bytes": 1 << 20, "retransmits": 3,
		},
		Negotiated: model.Negotiated{ALPN: "h3", HTTPVersion: "HTTP/3.0", TLSVersion: "TLS 1.3",
			Cipher: "TLS_AES_128_GCM_SHA256", QUICVersion: "v1", Resumed: true, ZeroRTT: true},
		Transport: []model.TransportStats{
			{Kind: "quic", CongestionAlgo: "cubic", SmoothedRTTms: 40.5, RTTVarms: 2.25, MinRTTms: 40.0625,
				CwndBytes: 123456, SsthreshBytes: 65536, PacketsSent: 900 + k, PacketsLost: 9, Retransmits: 8,
				BytesRetransmitted: 11000, DeliveryRateBps: 9_500_000, CongestionEvents: 2, PTOCount: 1,
				CongestionStateChanges: 5 + k},
			{Kind: "tcp", CongestionAlgo: "bbr", SmoothedRTTms: 41, RTTVarms: 1.5, MinRTTms: 40,
				CwndBytes: 1, SsthreshBytes: 2, PacketsSent: 3, PacketsLost: 4, Retransmits: 5,
				BytesRetransmitted: 6, DeliveryRateBps: 7, CongestionEvents: 8, PTOCount: 9},
		},
		CPU: model.CPUUsage{ClientUser: 11 * time.Millisecond, ClientSys: 12 * time.Millisecond,
			ServerUser: 13 * time.Millisecond, ServerSys: 14*time.Millisecond + time.Duration(k)},
		LinkUp: emu.Counters{PacketsIn: 1, BytesIn: 2, PacketsOut: 3, BytesOut: 4, DropLoss: 5, DropQueue: 6,
			DropCorrupt: 7, DropOff: 8, Duplicated: 9, Reordered: 10, QueueDelaySumNs: 11, QueueDelayMaxNs: 12, DropMTU: 13},
		LinkDown: emu.Counters{PacketsIn: 1 << 63, BytesIn: 1<<64 - 1, PacketsOut: 103, BytesOut: 104,
			DropLoss: 105, DropQueue: 106, DropCorrupt: 107, DropOff: 108, Duplicated: 109, Reordered: 110,
			QueueDelaySumNs: 111, QueueDelayMaxNs: 112, DropMTU: 113},
		Warnings: []string{"cpu saturated: 97% busy", fmt.Sprintf("emulator dropped %d packets beyond loss", k)},
		Resources: []model.Resource{
			{Name: "/index.html", Protocol: "h3", Start: 0, TTFB: 45_000_000, End: 60_000_000, Bytes: 14000},
			{Name: "/img/1.jpg", Protocol: "h3", Start: 61_000_000, TTFB: 101_000_000, End: 180_000_000, Bytes: 90000 + k},
		},
	}
	hol := model.Series{Kind: model.SeriesHOL, Label: "stream-4", Points: make([]model.Point, points)}
	for i := range hol.Points {
		hol.Points[i] = model.Point{T: int64(i) * 10_000_000, V: float64(i*1350) + 0.125 + float64(k)}
	}
	s.Timelines = []model.Series{
		hol,
		{Kind: model.SeriesCPUClient, Label: "", Points: []model.Point{{T: 0, V: 0.5}, {T: 1e8, V: 1.0 / 3}, {T: 2e8, V: 1e-300}}},
	}
	return s
}

// mustRunWithCells creates a run with n test cells (testCells) in db.
func mustRunWithCells(t testing.TB, db *DB, n int) (model.Run, []model.Cell) {
	t.Helper()
	r := mustCreateRun(t, db)
	cells := testCells(n)
	if err := db.InsertCells(context.Background(), r.ID, cells); err != nil {
		t.Fatal(err)
	}
	return r, cells
}

func mustCreateRun(t testing.TB, db *DB) model.Run {
	t.Helper()
	r := testRun()
	if err := db.CreateRun(context.Background(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// closedWithOneSample writes a database holding a run of one test cell with
// one sample (fullSample at iteration 0), closes it and returns its path,
// the run and the cells.
func closedWithOneSample(t testing.TB) (string, model.Run, []model.Cell) {
	t.Helper()
	db, path := openTemp(t)
	r, cells := mustRunWithCells(t, db, 1)
	s := fullSample(cells[0].ID, 0, 3)
	if err := db.InsertSample(context.Background(), &s); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, r, cells
}

// foreignDatabase writes an SQLite database that is not quicbench's (a
// table of customers) in a temporary directory and returns its path.
func foreignDatabase(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "other.db")
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(`CREATE TABLE customers (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	other.Close()
	return path
}
