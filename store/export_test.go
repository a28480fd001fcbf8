package store

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/quicbench/quicbench/model"
)

// exportFixture stores two runs with differing factors and metrics, failed
// and non-finite values, run and sample warnings; it returns the database
// and the two loaded datasets.
func exportFixture(t *testing.T) (*DB, []*model.Dataset) {
	db, _ := openTemp(t)
	var out []*model.Dataset
	for runNo := 0; runNo < 2; runNo++ {
		r := mustCreateRun(t, db)
		cells := testCells(3 - 2*runNo)
		if runNo == 1 {
			cells[0].Factors = []model.Factor{{Name: "rate", Value: "10mbit"}}
		}
		if err := db.InsertCells(ctx, r.ID, cells); err != nil {
			t.Fatal(err)
		}
		for ci, c := range cells {
			for it := -1; it < 2; it++ {
				s := fullSample(c.ID, it, 4+ci)
				switch {
				case ci == 1 && it == 0:
					s.Status, s.Error, s.Value, s.Metrics = model.StatusFailed, "timeout, after \"30s\"\nretry", math.NaN(), nil
				case ci == 2 && it == 1:
					s.Metrics["goodput_mbps"] = math.Inf(1)
				case runNo == 1:
					s.Metrics["extra_metric"] = 7
				}
				if it == 0 {
					s.Evidence = []model.Evidence{{Name: "keys.log", Kind: model.EvidenceKeyLog, Data: []byte("CLIENT_RANDOM 1 2\n")}}
				}
				if err := db.InsertSample(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := db.AddRunWarning(ctx, r.ID, "run-level warning"); err != nil {
			t.Fatal(err)
		}
		ds, err := db.LoadDataset(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ds)
	}
	return db, out
}

// parsed is a table read back from an export: header and rows as strings,
// null as "".
type parsed struct {
	header []string
	rows   [][]string
}

func readCSV(t *testing.T, data []byte) parsed {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	if len(recs) == 0 {
		t.Fatal("CSV has no header")
	}
	return parsed{header: recs[0], rows: recs[1:]}
}

func readJSONL(t *testing.T, data []byte, header []string) parsed {
	var p parsed
	p.header = header
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			break
		}
		// Key order: decode as a token stream.
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var keys []string
		var vals []string
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("line %d: not an object: %v", i+1, err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			keys = append(keys, k.(string))
			switch v := v.(type) {
			case nil:
				vals = append(vals, "")
			case json.Number:
				vals = append(vals, v.String())
			case string:
				vals = append(vals, v)
			case bool:
				vals = append(vals, csvField(v))
			default:
				t.Fatalf("line %d: unexpected JSON value %T", i+1, v)
			}
		}
		if !slices.Equal(keys, header) {
			t.Fatalf("line %d keys %v, want %v", i+1, keys, header)
		}
		p.rows = append(p.rows, vals)
	}
	return p
}

func readParquet(t *testing.T, data []byte) parsed {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("parquet does not open: %v", err)
	}
	var p parsed
	leaves := f.Schema().Fields()
	for _, l := range leaves {
		p.header = append(p.header, l.Name())
	}
	r := parquet.NewReader(f)
	defer r.Close()
	buf := make([]parquet.Row, 100)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			vals := make([]string, len(leaves))
			for _, v := range row {
				vals[v.Column()] = parquetString(leaves[v.Column()], v)
			}
			p.rows = append(p.rows, vals)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if int64(len(p.rows)) != f.NumRows() {
		t.Fatalf("read %d rows, file says %d", len(p.rows), f.NumRows())
	}
	return p
}

func parquetString(n parquet.Node, v parquet.Value) string {
	if v.IsNull() {
		return ""
	}
	var logical format.LogicalTypeValue
	if lt := n.Type().LogicalType(); lt != nil {
		logical = lt.Value
	}
	switch v.Kind() {
	case parquet.Boolean:
		return csvField(v.Boolean())
	case parquet.Int64:
		switch lt := logical.(type) {
		case *format.TimestampType:
			return time.Unix(0, v.Int64()).UTC().Format(time.RFC3339Nano)
		case *format.IntType:
			if !lt.IsSigned {
				return strconv.FormatUint(uint64(v.Int64()), 10)
			}
		}
		return strconv.FormatInt(v.Int64(), 10)
	case parquet.Double:
		return csvField(v.Double())
	case parquet.ByteArray:
		return string(v.ByteArray())
	}
	return "?" + v.Kind().String()
}

func exportAll(t *testing.T, db *DB, format string, runID int64) map[string][]byte {
	dir := t.TempDir()
	paths, err := db.Export(ctx, ExportOptions{Format: format, RunID: runID, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(Tables) {
		t.Fatalf("%d files for %d tables", len(paths), len(Tables))
	}
	out := map[string][]byte{}
	for i, p := range paths {
		if want := filepath.Join(dir, Tables[i]+"."+format); p != want {
			t.Fatalf("path %s, want %s", p, want)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[Tables[i]] = data
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
	return out
}

func col(t *testing.T, p parsed, name string) int {
	t.Helper()
	i := slices.Index(p.header, name)
	if i < 0 {
		t.Fatalf("no column %s in %v", name, p.header)
	}
	return i
}

// TestExportFormatsAgree exports every table in all three formats, parses
// them back with their standard readers, and checks the row counts, the
// columns, key values against the datasets, and that the formats agree
// cell by cell.
func TestExportFormatsAgree(t *testing.T) {
	db, dss := exportFixture(t)
	csvs := exportAll(t, db, FormatCSV, 0)
	jsonls := exportAll(t, db, FormatJSONL, 0)
	parquets := exportAll(t, db, FormatParquet, 0)

	want := map[string]int{"runs": 2}
	var samples []model.Sample
	for _, ds := range dss {
		want["cells"] += len(ds.Cells)
		want["warnings"]++ // the run-level one
		for _, s := range ds.Samples {
			samples = append(samples, s)
			want["samples"]++
			want["transport"] += len(s.Transport)
			want["resources"] += len(s.Resources)
			want["warnings"] += len(s.Warnings)
			if s.Iteration == 0 {
				want["evidence"]++ // exportFixture's key log
			}
			for _, tl := range s.Timelines {
				want["timelines"] += len(tl.Points)
			}
		}
	}
	for _, table := range Tables {
		c := readCSV(t, csvs[table])
		j := readJSONL(t, jsonls[table], c.header)
		p := readParquet(t, parquets[table])
		if len(c.rows) != want[table] {
			t.Errorf("%s: %d CSV rows, want %d", table, len(c.rows), want[table])
		}
		if !slices.Equal(p.header, c.header) {
			t.Errorf("%s: parquet columns %v, CSV %v", table, p.header, c.header)
		}
		if len(j.rows) != len(c.rows) || len(p.rows) != len(c.rows) {
			t.Fatalf("%s: rows: CSV %d, JSONL %d, parquet %d", table, len(c.rows), len(j.rows), len(p.rows))
		}
		for i := range c.rows {
			for k, cv := range c.rows[i] {
				jv := j.rows[i][k]
				if cv == "Inf" || cv == "-Inf" {
					cv = "" // JSON has no infinities: null
				}
				if jv != cv {
					t.Errorf("%s row %d column %s: JSONL %q, CSV %q", table, i, c.header[k], jv, cv)
				}
				if pv := p.rows[i][k]; pv != c.rows[i][k] {
					t.Errorf("%s row %d column %s: parquet %q, CSV %q", table, i, c.header[k], pv, c.rows[i][k])
				}
			}
		}
	}

	// Samples: one row per sample in load order, with the right values.
	c := readCSV(t, csvs["samples"])
	for _, name := range []string{"m_goodput_mbps", "m_extra_metric", "f_loss", "f_size", "f_rate",
		"up_packets_in", "down_bytes_in", "seed", "started", "value", "n_warnings"} {
		col(t, c, name)
	}
	for i, s := range samples {
		row := c.rows[i]
		get := func(name string) string { return row[col(t, c, name)] }
		if get("sample_id") != strconv.FormatInt(s.ID, 10) || get("seed") != strconv.FormatUint(s.Seed, 10) ||
			get("started") != s.Started.Format(time.RFC3339Nano) || get("status") != string(s.Status) ||
			get("down_bytes_in") != strconv.FormatUint(s.LinkDown.BytesIn, 10) ||
			get("error") != s.Error || get("n_warnings") != strconv.Itoa(len(s.Warnings)) ||
			get("overhead_ns") != strconv.FormatInt(int64(s.Overhead), 10) ||
			get("drain_ns") != strconv.FormatInt(int64(s.Drain), 10) || s.Drain == 0 ||
			get("prep_ns") != strconv.FormatInt(int64(s.Prep), 10) || s.Prep == 0 {
			t.Errorf("sample row %d = %v does not match %+v", i, row, s)
		}
		if want := csvField(s.Value); get("value") != want {
			t.Errorf("sample row %d value %q, want %q", i, get("value"), want)
		}
		for name, v := range s.Metrics {
			if got := get("m_" + name); got != csvField(v) {
				t.Errorf("sample row %d m_%s = %q, want %q", i, name, got, csvField(v))
			}
		}
		if _, ok := s.Metrics["extra_metric"]; !ok && get("m_extra_metric") != "" {
			t.Errorf("sample row %d: m_extra_metric should be empty", i)
		}
	}
	cells := readCSV(t, csvs["cells"])
	if got := cells.rows[3][col(t, cells, "f_rate")]; got != "10mbit" {
		t.Errorf("cells: f_rate of the second run's cell = %q", got)
	}
	if got := cells.rows[0][col(t, cells, "f_rate")]; got != "" {
		t.Errorf("cells: f_rate of a cell without it = %q", got)
	}
	runs := readCSV(t, csvs["runs"])
	if got := runs.rows[0][col(t, runs, "plan_text")]; got != dss[0].Run.PlanText {
		t.Errorf("runs: plan_text %q", got)
	}
	var sysctls map[string]string
	if err := json.Unmarshal([]byte(runs.rows[0][col(t, runs, "sysctls")]), &sysctls); err != nil ||
		!reflect.DeepEqual(sysctls, dss[0].Run.Env.Sysctls) {
		t.Errorf("runs: sysctls %v, %v", sysctls, err)
	}
	// Transport: one row per connection, in sample order; all formats
	// agree (above), so checking the CSV checks them all.
	tr := readCSV(t, csvs["transport"])
	var wantCSC []string
	for _, s := range samples {
		for _, ts := range s.Transport {
			wantCSC = append(wantCSC, strconv.FormatInt(ts.CongestionStateChanges, 10))
		}
	}
	var gotCSC []string
	for _, row := range tr.rows {
		gotCSC = append(gotCSC, row[col(t, tr, "congestion_state_changes")])
	}
	if !slices.Equal(gotCSC, wantCSC) || wantCSC[0] == "0" {
		t.Errorf("transport: congestion_state_changes %v, want %v (nonzero first)", gotCSC, wantCSC)
	}
	warns := readCSV(t, csvs["warnings"])
	last := warns.rows[len(warns.rows)-1]
	if last[col(t, warns, "sample_id")] != "" || last[col(t, warns, "message")] != "run-level warning" ||
		warns.rows[0][col(t, warns, "sample_id")] == "" {
		t.Errorf("warnings: %v", warns.rows)
	}
}

func TestExportOneRunAndTable(t *testing.T) {
	db, dss := exportFixture(t)
	second := dss[1].Run.ID
	files := exportAll(t, db, FormatCSV, second)
	for table, data := range files {
		p := readCSV(t, data)
		ri := col(t, p, "run_id")
		for _, row := range p.rows {
			if row[ri] != strconv.FormatInt(second, 10) {
				t.Fatalf("%s: row of run %s in an export of run %d", table, row[ri], second)
			}
		}
		if len(p.rows) == 0 {
			t.Errorf("%s: empty", table)
		}
	}
	if p := readCSV(t, files["samples"]); len(p.rows) != len(dss[1].Samples) {
		t.Fatalf("samples of run %d: %d rows, want %d", second, len(p.rows), len(dss[1].Samples))
	}

	var buf bytes.Buffer
	if err := db.ExportTable(ctx, "transport", FormatParquet, dss[0].Run.ID, &buf); err != nil {
		t.Fatal(err)
	}
	if p := readParquet(t, buf.Bytes()); len(p.rows) != 2*len(dss[0].Samples) {
		t.Fatalf("transport of run 1: %d rows", len(p.rows))
	}
	dir := t.TempDir()
	paths, err := db.Export(ctx, ExportOptions{Format: FormatJSONL, Tables: []string{"warnings"}, Dir: dir})
	if err != nil || len(paths) != 1 || filepath.Base(paths[0]) != "warnings.jsonl" {
		t.Fatalf("Export(warnings) = %v, %v", paths, err)
	}
}

func TestExportBadInput(t *testing.T) {
	db, _ := openTemp(t)
	dir := t.TempDir()
	cases := []struct {
		opts ExportOptions
		want string
	}{
		{ExportOptions{Format: "xlsx", Dir: dir}, `unknown export format "xlsx" (formats: csv, jsonl, parquet)`},
		{ExportOptions{Format: "csv", Tables: []string{"sample"}, Dir: dir}, `unknown table "sample" (tables: runs, cells, samples`},
		{ExportOptions{Format: "csv", RunID: 42, Dir: dir}, "run 42: not found"},
		{ExportOptions{Format: "csv"}, "no output directory"},
	}
	for _, c := range cases {
		if _, err := db.Export(ctx, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Export(%+v) err = %v, want %q", c.opts, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("failed exports wrote %d files", len(entries))
	}
	// An empty database exports headers only.
	paths, err := db.Export(ctx, ExportOptions{Format: FormatCSV, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(paths[2])
	if p := readCSV(t, data); len(p.rows) != 0 || p.header[0] != "run_id" {
		t.Fatalf("empty samples export: %+v", p)
	}
}
