package store

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Export formats.
const (
	FormatCSV     = "csv"     // RFC 4180, header row, empty field = null
	FormatJSONL   = "jsonl"   // one JSON object per line
	FormatParquet = "parquet" // Apache Parquet, zstd-compressed, typed columns
)

// Formats lists the export formats.
var Formats = []string{FormatCSV, FormatJSONL, FormatParquet}

// Tables lists the exportable tables, in the order Export writes them.
// docs/data.md describes their columns.
var Tables = []string{"runs", "cells", "samples", "transport", "timelines", "resources", "warnings", "evidence"}

// ExportOptions selects what Export writes.
type ExportOptions struct {
	Format string   // one of Formats
	Tables []string // tables to write; nil or empty for all of Tables
	RunID  int64    // the run to export; 0 for every run in the database
	Dir    string   // directory for the files, created if needed
}

// Export writes one file per table, named TABLE.FORMAT in opts.Dir, and
// returns their paths. Files are written under a temporary name and renamed
// when complete, so a failed export leaves no truncated file behind. The
// data come from one snapshot of the database.
func (db *DB) Export(ctx context.Context, opts ExportOptions) ([]string, error) {
	tables := opts.Tables
	if len(tables) == 0 {
		tables = Tables
	}
	if err := checkExport(opts.Format, tables); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("store: export: no output directory")
	}
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if err := checkRun(ctx, tx, opts.RunID); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: export: %w", err)
	}
	var paths []string
	for _, table := range tables {
		path := filepath.Join(opts.Dir, table+"."+opts.Format)
		if err := writeFileAtomic(path, func(w io.Writer) error {
			return exportTable(ctx, tx, table, opts.Format, opts.RunID, w)
		}); err != nil {
			return paths, fmt.Errorf("store: exporting %s: %w", table, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// ExportTable writes one table in the given format to w.
func (db *DB) ExportTable(ctx context.Context, table, format string, runID int64, w io.Writer) error {
	if err := checkExport(format, []string{table}); err != nil {
		return err
	}
	tx, err := db.r.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := checkRun(ctx, tx, runID); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	if err := exportTable(ctx, tx, table, format, runID, bw); err != nil {
		return fmt.Errorf("store: exporting %s: %w", table, err)
	}
	return bw.Flush()
}

func checkExport(format string, tables []string) error {
	if !slices.Contains(Formats, format) {
		return fmt.Errorf("store: unknown export format %q (formats: %s)", format, strings.Join(Formats, ", "))
	}
	for _, t := range tables {
		if !slices.Contains(Tables, t) {
			return fmt.Errorf("store: unknown table %q (tables: %s)", t, strings.Join(Tables, ", "))
		}
	}
	return nil
}

func checkRun(ctx context.Context, tx *sql.Tx, runID int64) error {
	if runID == 0 {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, runID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
	}
	return nil
}

func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o644) // CreateTemp makes 0600; exports are ordinary files
	bw := bufio.NewWriterSize(f, 1<<16)
	if err == nil {
		err = write(bw)
	}
	if err == nil {
		err = bw.Flush()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// colType is the type of an exported column. Row values are int64 (colInt),
// uint64 (colUint), float64 (colFloat; NaN is null), string (colText), bool
// (colBool), time.Time (colTime; zero is null), or nil for null.
type colType int

const (
	colInt colType = iota
	colUint
	colFloat
	colText
	colBool
	colTime
)

type column struct {
	name     string
	typ      colType
	nullable bool
}

// rowWriter writes the rows of one table in one format.
type rowWriter interface {
	write(row []any) error
	close() error
}

func newRowWriter(format string, w io.Writer, cols []column) (rowWriter, error) {
	switch format {
	case FormatCSV:
		return newCSVWriter(w, cols)
	case FormatJSONL:
		return newJSONLWriter(w, cols), nil
	case FormatParquet:
		return newParquetWriter(w, cols)
	}
	return nil, fmt.Errorf("unknown format %q", format)
}

// table is one exportable table: its columns and a function that emits its
// rows in order.
type table struct {
	cols []column
	rows func(emit func([]any) error) error
}

func exportTable(ctx context.Context, tx *sql.Tx, name, format string, runID int64, w io.Writer) error {
	var (
		t   table
		err error
	)
	x := exporter{ctx: ctx, tx: tx, runID: runID}
	switch name {
	case "runs":
		t = x.runs()
	case "cells":
		t, err = x.cells()
	case "samples":
		t, err = x.samples()
	case "transport":
		t = x.transport()
	case "timelines":
		t = x.timelines()
	case "resources":
		t = x.resources()
	case "warnings":
		t = x.warnings()
	case "evidence":
		t = x.evidence()
	default:
		return fmt.Errorf("unknown table %q", name)
	}
	if err != nil {
		return err
	}
	rw, err := newRowWriter(format, w, t.cols)
	if err != nil {
		return err
	}
	if err := t.rows(rw.write); err != nil {
		return err
	}
	return rw.close()
}

type exporter struct {
	ctx   context.Context
	tx    *sql.Tx
	runID int64
}

// runFilter restricts a query on cells c to the exported run(s); it takes
// the run ID twice.
const runFilter = ` (? = 0 OR c.run_id = ?) `

func (x exporter) query(q string, fn func(*sql.Rows) error) error {
	rows, err := x.tx.QueryContext(x.ctx, q, x.runID, x.runID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func cols(nullable bool, typ colType, names ...string) []column {
	cs := make([]column, len(names))
	for i, n := range names {
		cs[i] = column{name: n, typ: typ, nullable: nullable}
	}
	return cs
}

func concat(parts ...[]column) []column {
	var out []column
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// extraScan scans the columns a scan function knows, then extra ones
// selected after them.
type extraScan struct {
	s     rowScanner
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.s.Scan(append(dest, e.extra...)...) }

func (x exporter) runs() table {
	t := table{cols: concat(
		cols(false, colInt, "run_id"),
		cols(false, colText, "plan_name", "plan_hash"),
		cols(false, colUint, "seed"),
		cols(true, colTime, "started", "finished"),
		cols(false, colText, "status", "version", "vcs_commit", "go_version", "quic_go_version",
			"kernel", "cpu_model"),
		cols(false, colInt, "cpus"),
		cols(false, colText, "hostname", "cc_client", "cc_server", "sysctls", "browser", "peers"),
		cols(false, colInt, "shard_k", "shard_n"),
		cols(false, colText, "plan_text"),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT `+runColumns+`, browser, shard_k, shard_n FROM runs c WHERE (? = 0 OR c.id = ?) ORDER BY id`,
			func(rows *sql.Rows) error {
				var (
					browser        string
					shardK, shardN int64
				)
				r, err := scanRun(extraScan{rows, []any{&browser, &shardK, &shardN}})
				if err != nil {
					return err
				}
				e := r.Env
				sysctls, peers := "{}", "{}"
				if len(e.Sysctls) > 0 {
					sysctls = jsonObject(e.Sysctls)
				}
				if len(e.Peers) > 0 {
					peers = jsonObject(e.Peers)
				}
				return emit([]any{r.ID, r.PlanName, r.PlanHash, r.Seed, r.Started, r.Finished, r.Status,
					e.Version, e.Commit, e.GoVersion, e.QuicGoVersion, e.Kernel, e.CPUModel, int64(e.CPUs),
					e.Hostname, e.CCClient, e.CCServer, sysctls, browser, peers, shardK, shardN, r.PlanText})
			})
	}
	return t
}

// factorNames returns the factor names of the exported cells in order of
// first appearance.
func (x exporter) factorNames() ([]string, error) {
	var names []string
	seen := map[string]bool{}
	err := x.query(`SELECT c.factors FROM cells c WHERE`+runFilter+`ORDER BY c.run_id, c.position`,
		func(rows *sql.Rows) error {
			var s string
			if err := rows.Scan(&s); err != nil {
				return err
			}
			fs, err := decodeFactors(s)
			if err != nil {
				return err
			}
			for _, f := range fs {
				if !seen[f.Name] {
					seen[f.Name] = true
					names = append(names, f.Name)
				}
			}
			return nil
		})
	return names, err
}

// factorValues appends the values of the named factors (nil where a cell
// lacks one) to row.
func factorValues(row []any, names []string, factorsJSON string) ([]any, error) {
	fs, err := decodeFactors(factorsJSON)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		var v any
		for _, f := range fs {
			if f.Name == n {
				v = f.Value
				break
			}
		}
		row = append(row, v)
	}
	return row, nil
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func (x exporter) cells() (table, error) {
	factors, err := x.factorNames()
	if err != nil {
		return table{}, err
	}
	t := table{cols: concat(
		cols(false, colInt, "run_id", "cell_id", "position"),
		cols(false, colText, "key", "group", "scenario", "link_up", "link_down", "test", "protocol",
			"client", "server", "cc", "metric", "unit"),
		cols(false, colBool, "higher_is_better"),
		cols(false, colInt, "iterations"),
		cols(false, colBool, "warmup"),
		cols(false, colText, "factors"),
		cols(true, colText, prefixed("f_", factors)...),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT c.run_id, c.id, c.position, c.key, c.group_key, c.scenario, c.link_up,
			c.link_down, c.test, c.protocol, c.client, c.server, c.cc, c.metric, c.unit, c.higher_is_better,
			c.iterations, c.warmup, c.factors FROM cells c WHERE`+runFilter+`ORDER BY c.run_id, c.position`,
			func(rows *sql.Rows) error {
				var (
					runID, id, pos, iterations              int64
					key, group, scen, up, down, test, proto string
					client, server, cc, metric, unit, fj    string
					hib, warmup                             bool
				)
				if err := rows.Scan(&runID, &id, &pos, &key, &group, &scen, &up, &down, &test, &proto,
					&client, &server, &cc, &metric, &unit, &hib, &iterations, &warmup, &fj); err != nil {
					return err
				}
				row := []any{runID, id, pos, key, group, scen, up, down, test, proto, client, server, cc, metric,
					unit, hib, iterations, warmup, fj}
				row, err := factorValues(row, factors, fj)
				if err != nil {
					return err
				}
				return emit(row)
			})
	}
	return t, nil
}

var counterColumns = []string{"packets_in", "bytes_in", "packets_out", "bytes_out", "drop_loss", "drop_queue",
	"drop_corrupt", "drop_off", "duplicated", "reordered", "queue_delay_sum_ns", "queue_delay_max_ns", "drop_mtu"}

func (x exporter) samples() (table, error) {
	factors, err := x.factorNames()
	if err != nil {
		return table{}, err
	}
	var metrics []string
	err = x.query(`SELECT DISTINCT m.key FROM cells c JOIN samples s ON s.cell_id = c.id,
		json_each(s.metrics) m WHERE`+runFilter+`ORDER BY m.key`, func(rows *sql.Rows) error {
		var n string
		if err := rows.Scan(&n); err != nil {
			return err
		}
		metrics = append(metrics, n)
		return nil
	})
	if err != nil {
		return table{}, err
	}
	mindex := make(map[string]int, len(metrics))
	for i, m := range metrics {
		mindex[m] = i
	}
	t := table{cols: concat(
		cols(false, colInt, "run_id", "sample_id", "cell_id"),
		cols(false, colText, "cell_key", "group", "scenario", "test", "protocol", "client", "server", "cc",
			"metric", "unit"),
		cols(false, colInt, "iteration"),
		cols(false, colBool, "warmup"),
		cols(false, colInt, "order"),
		cols(false, colUint, "seed"),
		cols(true, colTime, "started"),
		cols(false, colInt, "wall_ns", "overhead_ns", "drain_ns", "prep_ns", "testbed", "concurrency", "shard"),
		cols(false, colText, "host", "status", "error"),
		cols(true, colFloat, "value"),
		cols(false, colText, "alpn", "http_version", "tls_version", "cipher", "quic_version"),
		cols(false, colBool, "resumed", "zero_rtt"),
		cols(false, colInt, "cpu_client_user_ns", "cpu_client_sys_ns", "cpu_server_user_ns",
			"cpu_server_sys_ns"),
		cols(false, colUint, prefixed("up_", counterColumns)...),
		cols(false, colUint, prefixed("down_", counterColumns)...),
		cols(false, colInt, "n_warnings"),
		cols(true, colText, prefixed("f_", factors)...),
		cols(true, colFloat, prefixed("m_", metrics)...),
	)}
	t.rows = func(emit func([]any) error) error {
		ncols := len(t.cols)
		return x.query(`SELECT c.run_id, s.id, c.id, c.key, c.group_key, c.scenario, c.test, c.protocol,
			c.client, c.server, c.cc, c.metric, c.unit, s.iteration, s.warmup, s.ord, s.seed, s.started_ns,
			s.wall_ns, s.overhead_ns, s.drain_ns, s.prep_ns, s.slot, s.concurrency, s.shard,
			COALESCE((SELECT rs.hostname FROM run_shards rs WHERE rs.run_id = c.run_id AND rs.shard_k = s.shard),
				(SELECT r.hostname FROM runs r WHERE r.id = c.run_id)), s.status, s.error, s.value, s.alpn, s.http_version,
			s.tls_version, s.cipher, s.quic_version, s.resumed, s.zero_rtt, s.cpu_client_user_ns, s.cpu_client_sys_ns,
			s.cpu_server_user_ns, s.cpu_server_sys_ns,
			s.up_packets_in, s.up_bytes_in, s.up_packets_out, s.up_bytes_out, s.up_drop_loss,
			s.up_drop_queue, s.up_drop_corrupt, s.up_drop_off, s.up_duplicated, s.up_reordered,
			s.up_queue_delay_sum_ns, s.up_queue_delay_max_ns, s.up_drop_mtu,
			s.down_packets_in, s.down_bytes_in, s.down_packets_out, s.down_bytes_out, s.down_drop_loss,
			s.down_drop_queue, s.down_drop_corrupt, s.down_drop_off, s.down_duplicated, s.down_reordered,
			s.down_queue_delay_sum_ns, s.down_queue_delay_max_ns, s.down_drop_mtu,
			(SELECT count(*) FROM warnings w WHERE w.sample_id = s.id),
			c.factors, s.metrics
			FROM cells c JOIN samples s ON s.cell_id = c.id WHERE`+runFilter+
			`ORDER BY c.run_id, c.position, s.iteration`,
			func(rows *sql.Rows) error {
				var (
					runID, sid, cid, it, ord, seed, wall, over, dr int64
					pr, nw, slot, conc, shard                      int64
					host                                           string
					key, group, scen, test, proto, client, cc      string
					server                                         string
					metric, unit, status, errs                     string
					alpn, httpv, tlsv, cipher, quicv               string
					warm, resumed, zrtt                            bool
					started                                        sql.NullInt64
					value                                          sql.NullFloat64
					cpu                                            [4]int64
					cnt                                            [26]int64
					fj, mj                                         string
				)
				dest := []any{&runID, &sid, &cid, &key, &group, &scen, &test, &proto, &client, &server, &cc, &metric,
					&unit, &it, &warm, &ord, &seed, &started, &wall, &over, &dr, &pr, &slot, &conc, &shard, &host, &status, &errs, &value, &alpn,
					&httpv, &tlsv, &cipher, &quicv, &resumed, &zrtt, &cpu[0], &cpu[1], &cpu[2], &cpu[3]}
				for i := range cnt {
					dest = append(dest, &cnt[i])
				}
				dest = append(dest, &nw, &fj, &mj)
				if err := rows.Scan(dest...); err != nil {
					return err
				}
				row := make([]any, 0, ncols)
				row = append(row, runID, sid, cid, key, group, scen, test, proto, client, server, cc, metric, unit,
					it, warm, ord, uint64(seed), nsToTime(started), wall, over, dr, pr, slot, conc, shard, host, status, errs,
					floatOrNaN(value), alpn, httpv, tlsv, cipher, quicv, resumed, zrtt,
					cpu[0], cpu[1], cpu[2], cpu[3])
				for _, v := range cnt {
					row = append(row, uint64(v))
				}
				row = append(row, nw)
				row, err := factorValues(row, factors, fj)
				if err != nil {
					return err
				}
				m, err := parseMetrics(mj, nil)
				if err != nil {
					return fmt.Errorf("sample %d: %w", sid, err)
				}
				base := len(row)
				for range metrics {
					row = append(row, nil)
				}
				for name, v := range m {
					row[base+mindex[name]] = v
				}
				return emit(row)
			})
	}
	return t, nil
}

// childOrder orders rows of a per-sample table like the samples table.
const childOrder = ` ORDER BY c.run_id, c.position, s.iteration`

const childJoin = ` JOIN samples s ON s.id = x.sample_id JOIN cells c ON c.id = s.cell_id WHERE` + runFilter

func (x exporter) transport() table {
	t := table{cols: concat(
		cols(false, colInt, "run_id", "sample_id", "conn"),
		cols(false, colText, "kind", "side", "congestion_algo"),
		cols(true, colFloat, "srtt_ms", "rttvar_ms", "min_rtt_ms"),
		cols(false, colInt, "cwnd_bytes", "ssthresh_bytes", "packets_sent", "packets_lost", "retransmits",
			"bytes_retransmitted", "delivery_rate_bps", "congestion_events", "pto_count",
			"congestion_state_changes"),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT c.run_id, x.sample_id, x.conn, x.kind, x.side, x.congestion_algo, x.srtt_ms,
			x.rttvar_ms, x.min_rtt_ms, x.cwnd_bytes, x.ssthresh_bytes, x.packets_sent, x.packets_lost,
			x.retransmits, x.bytes_retransmitted, x.delivery_rate_bps, x.congestion_events, x.pto_count,
			x.congestion_state_changes
			FROM transport_stats x`+childJoin+childOrder+`, x.conn`, func(rows *sql.Rows) error {
			var (
				ids              [3]int64
				kind, side, algo string
				f                [3]sql.NullFloat64
				n                [10]int64
			)
			dest := []any{&ids[0], &ids[1], &ids[2], &kind, &side, &algo, &f[0], &f[1], &f[2]}
			for i := range n {
				dest = append(dest, &n[i])
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			row := []any{ids[0], ids[1], ids[2], kind, side, algo, floatOrNaN(f[0]), floatOrNaN(f[1]), floatOrNaN(f[2])}
			for _, v := range n {
				row = append(row, v)
			}
			return emit(row)
		})
	}
	return t
}

func (x exporter) timelines() table {
	t := table{cols: concat(
		cols(false, colInt, "run_id", "sample_id", "series"),
		cols(false, colText, "kind", "label"),
		cols(false, colInt, "t_ns"),
		cols(true, colFloat, "v"),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT c.run_id, x.sample_id, x.series, x.kind, x.label, x.n_points, x.points
			FROM timelines x`+childJoin+childOrder+`, x.series`, func(rows *sql.Rows) error {
			var (
				runID, sid, series int64
				kind, label        string
				n                  int
				points             sql.RawBytes
			)
			if err := rows.Scan(&runID, &sid, &series, &kind, &label, &n, &points); err != nil {
				return err
			}
			pts, err := parsePoints(string(points), n)
			if err != nil {
				return fmt.Errorf("sample %d series %d: %w", sid, series, err)
			}
			row := make([]any, 7)
			for _, p := range pts {
				row[0], row[1], row[2], row[3], row[4], row[5], row[6] = runID, sid, series, kind, label, p.T, p.V
				if err := emit(row); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return t
}

func (x exporter) resources() table {
	t := table{cols: concat(
		cols(false, colInt, "run_id", "sample_id", "idx"),
		cols(false, colText, "name", "protocol"),
		cols(false, colInt, "start_ns", "ttfb_ns", "end_ns", "bytes"),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT c.run_id, x.sample_id, x.idx, x.name, x.protocol, x.start_ns, x.ttfb_ns,
			x.end_ns, x.bytes FROM resources x`+childJoin+childOrder+`, x.idx`, func(rows *sql.Rows) error {
			var (
				runID, sid, idx, start, ttfb, end, bytes int64
				name, proto                              string
			)
			if err := rows.Scan(&runID, &sid, &idx, &name, &proto, &start, &ttfb, &end, &bytes); err != nil {
				return err
			}
			return emit([]any{runID, sid, idx, name, proto, start, ttfb, end, bytes})
		})
	}
	return t
}

func (x exporter) warnings() table {
	t := table{cols: concat(
		cols(false, colInt, "run_id"),
		cols(true, colInt, "sample_id"),
		cols(false, colText, "message"),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT c.run_id, c.sample_id, c.message FROM warnings c
			WHERE`+runFilter+`ORDER BY c.run_id, c.id`, func(rows *sql.Rows) error {
			var (
				runID   int64
				sid     sql.NullInt64
				message string
			)
			if err := rows.Scan(&runID, &sid, &message); err != nil {
				return err
			}
			var s any
			if sid.Valid {
				s = sid.Int64
			}
			return emit([]any{runID, s, message})
		})
	}
	return t
}

// evidence lists the evidence files (not their contents: `quicbench
// evidence` writes those, each to the path given here relative to its
// output directory).
func (x exporter) evidence() table {
	t := table{cols: concat(
		cols(false, colInt, "run_id", "sample_id"),
		cols(false, colText, "name", "kind"),
		cols(false, colInt, "bytes"),
		cols(false, colText, "path"),
	)}
	t.rows = func(emit func([]any) error) error {
		return x.query(`SELECT c.run_id, x.sample_id, x.name, x.kind, x.bytes FROM evidence x`+childJoin+childOrder+`, x.name`,
			func(rows *sql.Rows) error {
				var (
					runID, sid, bytes int64
					name, kind        string
				)
				if err := rows.Scan(&runID, &sid, &name, &kind, &bytes); err != nil {
					return err
				}
				return emit([]any{runID, sid, name, kind, bytes, EvidencePath(sid, name)})
			})
	}
	return t
}

// EvidencePath is where `quicbench evidence --all` writes a sample's
// evidence file, relative to its output directory.
func EvidencePath(sampleID int64, name string) string {
	return fmt.Sprintf("sample-%d/%s", sampleID, name)
}

// jsonObject encodes a string map as a JSON object with sorted keys.
func jsonObject(m map[string]string) string {
	return string(appendJSONObject(nil, m, appendJSONString))
}
