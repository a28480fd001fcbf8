package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/model"
)

// LoadDataset reads everything about a run: the run, its cells in plan
// order and all its samples (warm-up, failed and invalid ones included)
// ordered by cell then iteration, each with its metrics, transport
// statistics, timelines, resources and warnings. It may be called while the
// run is still writing: it returns the samples committed when it started,
// each complete.
//
// Loading is built for speed (see BenchmarkLoadDataset100k): every table is
// read sequentially in primary-key order over the run's range of sample
// IDs, with no join and no sort in SQLite, and the tables (and, for a large
// run, parts of the samples table) are read in parallel, each on its own
// connection. Rows
// of other runs that fall in the range (runs written concurrently) are
// skipped, and samples are put in cell-then-iteration order in Go.
//
// Consistency across connections holds because a stored sample never
// changes (it is written whole in one transaction, never updated or
// deleted, and IDs only grow): the per-sample tables are read in snapshots
// taken after the samples table's, so they hold every row of every sample
// that snapshot holds.
func (db *DB) LoadDataset(ctx context.Context, runID int64) (*model.Dataset, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ds := &model.Dataset{}
	if ds.Run, err = runByID(ctx, tx, runID); err != nil {
		return nil, err
	}
	if ds.Cells, err = cellsOf(ctx, tx, runID); err != nil {
		return nil, err
	}
	if ds.Stops, err = groupStops(ctx, tx, runID); err != nil {
		return nil, err
	}
	var (
		n          int
		minID, max sql.NullInt64
	)
	// Index-only (samples_cell_iteration holds the sample IDs); this first
	// read of the samples table fixes the transaction's snapshot.
	if err := tx.QueryRowContext(ctx, `SELECT count(*), min(s.id), max(s.id) FROM samples s
		JOIN cells c ON c.id = s.cell_id WHERE c.run_id = ?`, runID).Scan(&n, &minID, &max); err != nil {
		return nil, fmt.Errorf("store: loading run %d: %w", runID, err)
	}
	if n == 0 {
		return ds, nil
	}
	r := idRange{minID.Int64, max.Int64}

	parts := []childPart{readTransport, readResources, readWarnings, readTimelines}
	attach := make([]func(map[int64]*model.Sample), len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attach[i], errs[i] = db.readChildren(ctx, part, r)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	samples, err := db.readSamplesParallel(ctx, tx, r, n, ds.Cells)
	if err != nil {
		cancel()
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("store: loading samples of run %d: %w", runID, err)
	}
	for _, e := range errs {
		if e != nil {
			return nil, fmt.Errorf("store: loading run %d: %w", runID, e)
		}
	}
	byID := make(map[int64]*model.Sample, len(samples))
	for i := range samples {
		byID[samples[i].ID] = &samples[i]
	}
	for _, a := range attach {
		a(byID)
	}
	ds.Samples = samples
	return ds, nil
}

// idRange bounds the sample IDs of a run.
type idRange struct{ min, max int64 }

// interner shares one string among equal names, kinds, protocols..., so
// that a run's thousands of copies are allocated once.
type interner map[string]string

func (in interner) bytes(b sql.RawBytes) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	s := string(b)
	in[s] = s
	return s
}

// str is bytes for a string that may share memory with a larger one.
func (in interner) str(name string) string {
	if s, ok := in[name]; ok {
		return s
	}
	s := strings.Clone(name)
	in[s] = s
	return s
}

// parallelLoadMin is the sample count from which the samples table is read
// in parallel parts (a variable for tests).
var parallelLoadMin = 20_000

// readSamplesParallel reads the samples table over r, split into ID
// sub-ranges read concurrently (the first on tx, the others on their own
// connections) when the run is large, and sorts them by cell position then
// iteration.
func (db *DB) readSamplesParallel(ctx context.Context, tx *sql.Tx, r idRange, n int, cells []model.Cell) ([]model.Sample, error) {
	pos := make(map[int64]int, len(cells))
	for i, c := range cells {
		pos[c.ID] = i
	}
	k := 1
	if n >= parallelLoadMin {
		k = max(2, min(runtime.GOMAXPROCS(0), 4))
	}
	parts := make([][]model.Sample, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	span := (r.max - r.min + 1 + int64(k) - 1) / int64(k)
	for i := 0; i < k; i++ {
		sub := idRange{r.min + int64(i)*span, min(r.min+int64(i+1)*span-1, r.max)}
		read := func() {
			if i == 0 {
				parts[i], errs[i] = readSamples(ctx, tx, sub, n/k, pos)
				return
			}
			var t *sql.Tx
			if t, errs[i] = db.r.BeginTx(ctx, nil); errs[i] != nil {
				return
			}
			defer t.Rollback()
			parts[i], errs[i] = readSamples(ctx, t, sub, n/k, pos)
		}
		if i == k-1 {
			read()
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); read() }()
	}
	wg.Wait()
	samples := parts[0]
	for i := 1; i < k; i++ {
		samples = append(samples, parts[i]...)
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(samples, func(a, b model.Sample) int {
		if c := cmp.Compare(pos[a.CellID], pos[b.CellID]); c != 0 {
			return c
		}
		return cmp.Compare(a.Iteration, b.Iteration)
	})
	return samples, nil
}

// readSamples reads the samples of the cells in pos with IDs in r.
func readSamples(ctx context.Context, tx *sql.Tx, r idRange, n int, pos map[int64]int) ([]model.Sample, error) {
	rows, err := tx.QueryContext(ctx, `SELECT s.id, s.cell_id, s.iteration, s.warmup, s.ord, s.seed,
		s.started_ns, s.wall_ns, s.overhead_ns, s.drain_ns, s.prep_ns, s.status, s.error, s.value, s.alpn,
		s.slot, s.concurrency, s.http_version, s.tls_version, s.cipher, s.quic_version, s.resumed, s.zero_rtt, s.cpu_client_user_ns,
		s.cpu_client_sys_ns, s.cpu_server_user_ns, s.cpu_server_sys_ns,
		s.up_packets_in, s.up_bytes_in, s.up_packets_out, s.up_bytes_out, s.up_drop_loss,
		s.up_drop_queue, s.up_drop_corrupt, s.up_drop_off, s.up_duplicated, s.up_reordered,
		s.up_queue_delay_sum_ns, s.up_queue_delay_max_ns, s.up_drop_mtu,
		s.down_packets_in, s.down_bytes_in, s.down_packets_out, s.down_bytes_out, s.down_drop_loss,
		s.down_drop_queue, s.down_drop_corrupt, s.down_drop_off, s.down_duplicated, s.down_reordered,
		s.down_queue_delay_sum_ns, s.down_queue_delay_max_ns, s.down_drop_mtu, s.metrics
		FROM samples s WHERE s.id BETWEEN ? AND ?`, r.min, r.max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		in                                       = interner{}
		samples                                  = make([]model.Sample, 0, n)
		warm, seed, wall, overhead, drain, zrtt  int64
		prep, resumed                            int64
		cu, cs, su, ss                           int64
		started                                  sql.NullInt64
		value                                    sql.NullFloat64
		status, alpn, httpv, tlsv, cipher, quicv sql.RawBytes
		up, down                                 [13]int64
		metrics                                  sql.RawBytes
	)
	dest := []any{nil, nil, nil, &warm, nil, &seed, &started, &wall, &overhead, &drain, &prep, &status, nil, &value,
		&alpn, nil, nil, &httpv, &tlsv, &cipher, &quicv, &resumed, &zrtt, &cu, &cs, &su, &ss}
	for i := range up {
		dest = append(dest, &up[i])
	}
	for i := range down {
		dest = append(dest, &down[i])
	}
	dest = append(dest, &metrics)
	for rows.Next() {
		samples = append(samples, model.Sample{})
		s := &samples[len(samples)-1]
		dest[0], dest[1], dest[2], dest[4], dest[12] = &s.ID, &s.CellID, &s.Iteration, &s.Order, &s.Error
		dest[15], dest[16] = &s.Slot, &s.Concurrency
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if _, ok := pos[s.CellID]; !ok {
			samples = samples[:len(samples)-1] // another run's sample
			continue
		}
		s.Warmup = warm != 0
		s.Seed = uint64(seed)
		s.Started = nsToTime(started)
		s.Wall, s.Overhead = time.Duration(wall), time.Duration(overhead)
		s.Drain, s.Prep = time.Duration(drain), time.Duration(prep)
		s.Status = model.Status(in.bytes(status))
		s.Value = floatOrNaN(value)
		s.Negotiated = model.Negotiated{ALPN: in.bytes(alpn), HTTPVersion: in.bytes(httpv),
			TLSVersion: in.bytes(tlsv), Cipher: in.bytes(cipher), QUICVersion: in.bytes(quicv),
			Resumed: resumed != 0, ZeroRTT: zrtt != 0}
		s.CPU = model.CPUUsage{ClientUser: time.Duration(cu), ClientSys: time.Duration(cs),
			ServerUser: time.Duration(su), ServerSys: time.Duration(ss)}
		s.LinkUp, s.LinkDown = counters(up), counters(down)
		if s.Metrics, err = parseMetrics(string(metrics), in.str); err != nil {
			return nil, fmt.Errorf("sample %d: %w", s.ID, err)
		}
	}
	return samples, rows.Err()
}

func counters(v [13]int64) emu.Counters {
	return emu.Counters{PacketsIn: uint64(v[0]), BytesIn: uint64(v[1]), PacketsOut: uint64(v[2]),
		BytesOut: uint64(v[3]), DropLoss: uint64(v[4]), DropQueue: uint64(v[5]), DropCorrupt: uint64(v[6]),
		DropOff: uint64(v[7]), Duplicated: uint64(v[8]), Reordered: uint64(v[9]),
		QueueDelaySumNs: uint64(v[10]), QueueDelayMaxNs: uint64(v[11]), DropMTU: uint64(v[12])}
}

// childPart reads one per-sample table over an ID range and returns a
// function that attaches its rows, in order, to the samples (by ID).
type childPart func(ctx context.Context, tx *sql.Tx, r idRange) (func(map[int64]*model.Sample), error)

func (db *DB) readChildren(ctx context.Context, part childPart, r idRange) (func(map[int64]*model.Sample), error) {
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return part(ctx, tx, r)
}

// child is one row of a per-sample table.
type child[T any] struct {
	id int64
	v  T
}

// queryChildren runs query over r (its first column is the sample ID, the
// rest are scanned into dest) and collects make() for each row.
func queryChildren[T any](ctx context.Context, tx *sql.Tx, r idRange, query string, dest []any,
	make func() (T, error)) ([]child[T], error) {
	rows, err := tx.QueryContext(ctx, query, r.min, r.max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		id  int64
		out []child[T]
	)
	dest = append([]any{&id}, dest...)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		v, err := make()
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", id, err)
		}
		out = append(out, child[T]{id, v})
	}
	return out, rows.Err()
}

// attachAll returns the function that appends each row to its sample's
// slice (skipping rows of samples not loaded: other runs').
func attachAll[T any](rows []child[T], field func(*model.Sample) *[]T) func(map[int64]*model.Sample) {
	return func(byID map[int64]*model.Sample) {
		for _, c := range rows {
			if s := byID[c.id]; s != nil {
				f := field(s)
				*f = append(*f, c.v)
			}
		}
	}
}

const inRange = ` WHERE x.sample_id BETWEEN ? AND ?`

func readTransport(ctx context.Context, tx *sql.Tx, r idRange) (func(map[int64]*model.Sample), error) {
	var (
		in                = interner{}
		t                 model.TransportStats
		kind, side, algo  sql.RawBytes
		srtt, rttvar, min sql.NullFloat64
	)
	rows, err := queryChildren(ctx, tx, r, `SELECT x.sample_id, x.kind, x.side, x.congestion_algo, x.srtt_ms,
		x.rttvar_ms, x.min_rtt_ms, x.cwnd_bytes, x.ssthresh_bytes, x.packets_sent, x.packets_lost,
		x.retransmits, x.bytes_retransmitted, x.delivery_rate_bps, x.congestion_events, x.pto_count,
		x.congestion_state_changes
		FROM transport_stats x`+inRange+` ORDER BY x.sample_id, x.conn`,
		[]any{&kind, &side, &algo, &srtt, &rttvar, &min, &t.CwndBytes, &t.SsthreshBytes, &t.PacketsSent,
			&t.PacketsLost, &t.Retransmits, &t.BytesRetransmitted, &t.DeliveryRateBps,
			&t.CongestionEvents, &t.PTOCount, &t.CongestionStateChanges},
		func() (model.TransportStats, error) {
			t.Kind, t.Side, t.CongestionAlgo = in.bytes(kind), in.bytes(side), in.bytes(algo)
			t.SmoothedRTTms, t.RTTVarms, t.MinRTTms = floatOrNaN(srtt), floatOrNaN(rttvar), floatOrNaN(min)
			return t, nil
		})
	return attachAll(rows, func(s *model.Sample) *[]model.TransportStats { return &s.Transport }), err
}

func readTimelines(ctx context.Context, tx *sql.Tx, r idRange) (func(map[int64]*model.Sample), error) {
	var (
		in          = interner{}
		kind, label sql.RawBytes
		n           int
		points      sql.RawBytes
	)
	rows, err := queryChildren(ctx, tx, r, `SELECT x.sample_id, x.kind, x.label, x.n_points, x.points
		FROM timelines x`+inRange+` ORDER BY x.sample_id, x.series`,
		[]any{&kind, &label, &n, &points}, func() (model.Series, error) {
			pts, err := parsePoints(string(points), n)
			if err != nil {
				return model.Series{}, fmt.Errorf("timeline %s/%s: %w", kind, label, err)
			}
			return model.Series{Kind: in.bytes(kind), Label: in.bytes(label), Points: pts}, nil
		})
	return attachAll(rows, func(s *model.Sample) *[]model.Series { return &s.Timelines }), err
}

func readResources(ctx context.Context, tx *sql.Tx, r idRange) (func(map[int64]*model.Sample), error) {
	var (
		in          = interner{}
		res         model.Resource
		name, proto sql.RawBytes
	)
	rows, err := queryChildren(ctx, tx, r, `SELECT x.sample_id, x.name, x.protocol, x.start_ns, x.ttfb_ns,
		x.end_ns, x.bytes FROM resources x`+inRange+` ORDER BY x.sample_id, x.idx`,
		[]any{&name, &proto, &res.Start, &res.TTFB, &res.End, &res.Bytes}, func() (model.Resource, error) {
			res.Name, res.Protocol = in.bytes(name), in.bytes(proto)
			return res, nil
		})
	return attachAll(rows, func(s *model.Sample) *[]model.Resource { return &s.Resources }), err
}

func readWarnings(ctx context.Context, tx *sql.Tx, r idRange) (func(map[int64]*model.Sample), error) {
	var msg string
	rows, err := queryChildren(ctx, tx, r, `SELECT x.sample_id, x.message FROM warnings x`+inRange+
		` ORDER BY x.sample_id, x.id`, []any{&msg}, func() (string, error) { return msg, nil })
	return attachAll(rows, func(s *model.Sample) *[]string { return &s.Warnings }), err
}
