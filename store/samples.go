package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/model"
)

// sampleInsertSQL lists the typed columns of samples; sampleArgs gives the
// values in the same order, the shard (samples.shard) last.
const sampleInsertSQL = `INSERT INTO samples (cell_id, iteration, warmup, ord, seed, started_ns,
	wall_ns, overhead_ns, drain_ns, prep_ns, slot, concurrency, status, error, value, alpn, http_version, tls_version, cipher,
	quic_version, resumed, zero_rtt, cpu_client_user_ns, cpu_client_sys_ns, cpu_server_user_ns,
	cpu_server_sys_ns,
	up_packets_in, up_bytes_in, up_packets_out, up_bytes_out, up_drop_loss, up_drop_queue,
	up_drop_corrupt, up_drop_off, up_duplicated, up_reordered, up_queue_delay_sum_ns,
	up_queue_delay_max_ns, up_drop_mtu,
	down_packets_in, down_bytes_in, down_packets_out, down_bytes_out, down_drop_loss,
	down_drop_queue, down_drop_corrupt, down_drop_off, down_duplicated, down_reordered,
	down_queue_delay_sum_ns, down_queue_delay_max_ns, down_drop_mtu, metrics, shard)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
	        ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
	        ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

func sampleArgs(s *model.Sample, shard int) []any {
	n := s.Negotiated
	args := []any{s.CellID, s.Iteration, boolInt(s.Warmup), s.Order, int64(s.Seed), timeToNS(s.Started),
		int64(s.Wall), int64(s.Overhead), int64(s.Drain), int64(s.Prep), s.Slot, max(s.Concurrency, 1), string(s.Status), s.Error, nullFloat(s.Value),
		n.ALPN, n.HTTPVersion, n.TLSVersion, n.Cipher, n.QUICVersion, boolInt(n.Resumed), boolInt(n.ZeroRTT),
		int64(s.CPU.ClientUser), int64(s.CPU.ClientSys), int64(s.CPU.ServerUser), int64(s.CPU.ServerSys)}
	args = appendCounters(args, s.LinkUp)
	args = appendCounters(args, s.LinkDown)
	return append(args, string(appendMetrics(nil, s.Metrics)), shard)
}

func appendCounters(args []any, c emu.Counters) []any {
	return append(args, int64(c.PacketsIn), int64(c.BytesIn), int64(c.PacketsOut), int64(c.BytesOut),
		int64(c.DropLoss), int64(c.DropQueue), int64(c.DropCorrupt), int64(c.DropOff),
		int64(c.Duplicated), int64(c.Reordered), int64(c.QueueDelaySumNs), int64(c.QueueDelayMaxNs),
		int64(c.DropMTU))
}

// nullFloat stores NaN as NULL (SQLite has no NaN).
func nullFloat(v float64) any {
	if math.IsNaN(v) {
		return nil
	}
	return v
}

func floatOrNaN(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}

func checkSample(s *model.Sample) error {
	if s.CellID <= 0 {
		return fmt.Errorf("store: sample has no cell (CellID %d)", s.CellID)
	}
	if s.Iteration < -1 {
		return fmt.Errorf("store: sample of cell %d: iteration %d is negative (only the warm-up is -1)", s.CellID, s.Iteration)
	}
	if s.Warmup != (s.Iteration == -1) {
		return fmt.Errorf("store: sample of cell %d: warm-up samples have iteration -1 and only they do (iteration %d, warmup %v)",
			s.CellID, s.Iteration, s.Warmup)
	}
	switch s.Status {
	case model.StatusOK, model.StatusFailed, model.StatusInvalid:
	default:
		return fmt.Errorf("store: sample of cell %d iteration %d: status %q is not one of ok, failed, invalid",
			s.CellID, s.Iteration, s.Status)
	}
	for name := range s.Metrics {
		if name == "" {
			return fmt.Errorf("store: sample of cell %d iteration %d: a metric has an empty name", s.CellID, s.Iteration)
		}
	}
	return nil
}

// testHookBeforeCommit, when set by a test, runs inside InsertSample's
// transaction after every row is written and before the commit.
var testHookBeforeCommit func(*model.Sample)

// InsertSample stores one sample with its metrics, transport statistics,
// timelines, resources and warnings in one transaction, and sets s.ID. When
// it returns nil the sample is durable. A second sample for the same cell
// and iteration is rejected with an error wrapping ErrDuplicateSample and
// nothing is written.
func (db *DB) InsertSample(ctx context.Context, s *model.Sample) error {
	if err := checkSample(s); err != nil {
		return err
	}
	var id int64
	err := db.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		id, err = db.insertSample(ctx, tx, s, -1)
		if err != nil {
			return err
		}
		if testHookBeforeCommit != nil {
			testHookBeforeCommit(s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.ID = id
	return nil
}

// insertSample writes sample s and its children in transaction tx and
// returns its ID. shard is stored as samples.shard; -1 takes the shard of
// the sample's run (runs.shard_k: 0 for a whole run).
func (db *DB) insertSample(ctx context.Context, tx *sql.Tx, s *model.Sample, shard int) (int64, error) {
	var (
		runID int64
		key   string
		ownK  int
	)
	err := tx.StmtContext(ctx, db.ins.cellOf).QueryRowContext(ctx, s.CellID).Scan(&runID, &key, &ownK)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: sample refers to cell %d: %w", s.CellID, ErrNotFound)
	} else if err != nil {
		return 0, err
	}
	if shard < 0 {
		shard = ownK
	}
	res, err := tx.StmtContext(ctx, db.ins.sample).ExecContext(ctx, sampleArgs(s, shard)...)
	if isUniqueViolation(err) {
		what := fmt.Sprintf("iteration %d", s.Iteration)
		if s.Warmup {
			what = "the warm-up"
		}
		return 0, fmt.Errorf("store: cell %d (%s) already has a sample for %s: %w", s.CellID, key, what, ErrDuplicateSample)
	} else if err != nil {
		return 0, fmt.Errorf("store: inserting sample of cell %d (%s) iteration %d: %w", s.CellID, key, s.Iteration, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	if err := db.insertChildren(ctx, tx, runID, id, s); err != nil {
		return 0, err
	}
	return id, insertEvidence(ctx, tx, id, s.Evidence)
}

// Statements InsertSample runs for every sample, prepared once on the
// writer's connection (see prepareInserts) instead of once per sample.
const (
	sqlCellOf          = `SELECT c.run_id, c.key, r.shard_k FROM cells c JOIN runs r ON r.id = c.run_id WHERE c.id = ?`
	sqlInsertTransport = `INSERT INTO transport_stats (sample_id, conn, kind, side, congestion_algo, srtt_ms,
		rttvar_ms, min_rtt_ms, cwnd_bytes, ssthresh_bytes, packets_sent, packets_lost, retransmits,
		bytes_retransmitted, delivery_rate_bps, congestion_events, pto_count, congestion_state_changes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertTimeline = `INSERT INTO timelines (sample_id, series, kind, label, n_points, points)
		VALUES (?, ?, ?, ?, ?, ?)`
	sqlInsertResource = `INSERT INTO resources (sample_id, idx, name, protocol, start_ns, ttfb_ns, end_ns, bytes)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertWarning = `INSERT INTO warnings (run_id, sample_id, message) VALUES (?, ?, ?)`
)

// insertStmts are the prepared statements of InsertSample.
type insertStmts struct {
	cellOf, sample, transport, timeline, resource, warning *sql.Stmt
}

func (db *DB) prepareInserts(ctx context.Context) error {
	for _, p := range []struct {
		st  **sql.Stmt
		sql string
	}{
		{&db.ins.cellOf, sqlCellOf}, {&db.ins.sample, sampleInsertSQL},
		{&db.ins.transport, sqlInsertTransport}, {&db.ins.timeline, sqlInsertTimeline},
		{&db.ins.resource, sqlInsertResource}, {&db.ins.warning, sqlInsertWarning},
	} {
		st, err := db.w.PrepareContext(ctx, p.sql)
		if err != nil {
			return err
		}
		*p.st = st
	}
	return nil
}

func (st *insertStmts) close() {
	for _, s := range []*sql.Stmt{st.cellOf, st.sample, st.transport, st.timeline, st.resource, st.warning} {
		if s != nil {
			s.Close()
		}
	}
}

// insertChildren writes the rows that hang off sample id.
func (db *DB) insertChildren(ctx context.Context, tx *sql.Tx, runID, id int64, s *model.Sample) error {
	var buf []byte
	batches := []struct {
		st   *sql.Stmt
		n    int
		args func(i int) []any
	}{
		{db.ins.transport, len(s.Transport), func(i int) []any {
			t := &s.Transport[i]
			return []any{id, i, t.Kind, t.Side, t.CongestionAlgo, nullFloat(t.SmoothedRTTms), nullFloat(t.RTTVarms),
				nullFloat(t.MinRTTms), t.CwndBytes, t.SsthreshBytes, t.PacketsSent, t.PacketsLost,
				t.Retransmits, t.BytesRetransmitted, t.DeliveryRateBps, t.CongestionEvents, t.PTOCount,
				t.CongestionStateChanges}
		}},
		{db.ins.timeline, len(s.Timelines), func(i int) []any {
			t := &s.Timelines[i]
			buf = appendPoints(buf[:0], t.Points)
			return []any{id, i, t.Kind, t.Label, len(t.Points), string(buf)}
		}},
		{db.ins.resource, len(s.Resources), func(i int) []any {
			r := &s.Resources[i]
			return []any{id, i, r.Name, r.Protocol, r.Start, r.TTFB, r.End, r.Bytes}
		}},
		{db.ins.warning, len(s.Warnings), func(i int) []any {
			return []any{runID, id, s.Warnings[i]}
		}},
	}
	for _, b := range batches {
		if b.n == 0 {
			continue
		}
		st := tx.StmtContext(ctx, b.st) // the writer's single connection: no re-prepare
		for i := 0; i < b.n; i++ {
			if _, err := st.ExecContext(ctx, b.args(i)...); err != nil {
				return fmt.Errorf("store: sample of cell %d iteration %d: %w", s.CellID, s.Iteration, err)
			}
		}
	}
	return nil
}

// DoneSamples reports which samples a run already has, for resume: cell ID
// -> iteration (-1 for the warm-up) -> true. Failed and invalid samples
// count as done: they were taken and are stored with their cause.
func (db *DB) DoneSamples(ctx context.Context, runID int64) (map[int64]map[int]bool, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT s.cell_id, s.iteration FROM samples s
		JOIN cells c ON c.id = s.cell_id WHERE c.run_id = ?`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	done := make(map[int64]map[int]bool)
	for rows.Next() {
		var (
			cell int64
			it   int
		)
		if err := rows.Scan(&cell, &it); err != nil {
			return nil, err
		}
		m := done[cell]
		if m == nil {
			m = make(map[int]bool)
			done[cell] = m
		}
		m[it] = true
	}
	return done, rows.Err()
}

// SampleCount returns the number of samples stored for a run, warm-up,
// failed and invalid ones included.
func (db *DB) SampleCount(ctx context.Context, runID int64) (int, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT count(*) FROM samples s
		JOIN cells c ON c.id = s.cell_id WHERE c.run_id = ?`, runID).Scan(&n)
	return n, err
}
