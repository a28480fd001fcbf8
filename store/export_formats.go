package store

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// CSV: a header row, then one record per row. Null (and NaN) is the empty
// field, booleans TRUE/FALSE (the spelling R's read.csv, pandas and DuckDB
// all read as booleans), times RFC 3339 with nanoseconds in UTC,
// infinities Inf and -Inf (read as such by pandas, R and DuckDB).

type csvWriter struct {
	w      *csv.Writer
	cols   []column
	fields []string
}

func newCSVWriter(w io.Writer, cols []column) (*csvWriter, error) {
	cw := &csvWriter{w: csv.NewWriter(w), cols: cols, fields: make([]string, len(cols))}
	for i, c := range cols {
		cw.fields[i] = c.name
	}
	if err := cw.w.Write(cw.fields); err != nil {
		return nil, err
	}
	return cw, nil
}

func (cw *csvWriter) write(row []any) error {
	if len(row) != len(cw.cols) {
		return fmt.Errorf("internal error: row of %d values for %d columns", len(row), len(cw.cols))
	}
	for i, v := range row {
		cw.fields[i] = csvField(v)
	}
	return cw.w.Write(cw.fields)
}

func csvField(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case float64:
		switch {
		case math.IsNaN(v):
			return ""
		case math.IsInf(v, 1):
			return "Inf"
		case math.IsInf(v, -1):
			return "-Inf"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return v
	case bool:
		if v {
			return "TRUE"
		}
		return "FALSE"
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format(time.RFC3339Nano)
	}
	panic(fmt.Sprintf("store: export of unsupported value %T", v))
}

func (cw *csvWriter) close() error {
	cw.w.Flush()
	return cw.w.Error()
}

// JSON lines: one object per row, keys in column order. Null, NaN and
// infinities (which JSON cannot represent) are null.

type jsonlWriter struct {
	w    io.Writer
	keys [][]byte // `"name":` per column
	buf  []byte
}

func newJSONLWriter(w io.Writer, cols []column) *jsonlWriter {
	jw := &jsonlWriter{w: w, keys: make([][]byte, len(cols))}
	for i, c := range cols {
		jw.keys[i] = append(appendJSONString(nil, c.name), ':')
	}
	return jw
}

func (jw *jsonlWriter) write(row []any) error {
	if len(row) != len(jw.keys) {
		return fmt.Errorf("internal error: row of %d values for %d columns", len(row), len(jw.keys))
	}
	b := append(jw.buf[:0], '{')
	for i, v := range row {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, jw.keys[i]...)
		switch v := v.(type) {
		case nil:
			b = append(b, "null"...)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case uint64:
			b = strconv.AppendUint(b, v, 10)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendFloat(b, v, 'g', -1, 64)
			}
		case string:
			b = appendJSONString(b, v)
		case bool:
			b = strconv.AppendBool(b, v)
		case time.Time:
			if v.IsZero() {
				b = append(b, "null"...)
			} else {
				b = append(b, '"')
				b = v.UTC().AppendFormat(b, time.RFC3339Nano)
				b = append(b, '"')
			}
		default:
			panic(fmt.Sprintf("store: export of unsupported value %T", v))
		}
	}
	b = append(b, '}', '\n')
	jw.buf = b
	_, err := jw.w.Write(b)
	return err
}

func (jw *jsonlWriter) close() error { return nil }

// Parquet: typed columns (INT64, UINT64, DOUBLE, STRING, BOOLEAN,
// TIMESTAMP(NANOS, UTC)); nullable columns are OPTIONAL. Columns keep the
// table's order (parquet.Group would sort them by name).

type parquetWriter struct {
	w     *parquet.GenericWriter[any]
	cols  []column
	batch []parquet.Row
}

func newParquetWriter(w io.Writer, cols []column) (*parquetWriter, error) {
	fields := make([]parquet.Field, len(cols))
	seen := make(map[string]bool, len(cols))
	for i, c := range cols {
		if seen[c.name] {
			return nil, fmt.Errorf("two columns are named %q", c.name)
		}
		seen[c.name] = true
		var n parquet.Node
		switch c.typ {
		case colInt:
			n = parquet.Int(64)
		case colUint:
			n = parquet.Uint(64)
		case colFloat:
			n = parquet.Leaf(parquet.DoubleType)
		case colText:
			n = parquet.String()
		case colBool:
			n = parquet.Leaf(parquet.BooleanType)
		case colTime:
			n = parquet.Timestamp(parquet.Nanosecond)
		}
		if c.nullable {
			n = parquet.Optional(n)
		}
		fields[i] = namedNode{Node: n, name: c.name, index: i}
	}
	schema := parquet.NewSchema("quicbench", orderedGroup(fields))
	pw := parquet.NewGenericWriter[any](w, schema, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(1<<20),
		parquet.CreatedBy("quicbench", "", ""))
	return &parquetWriter{w: pw, cols: cols}, nil
}

func (pw *parquetWriter) write(row []any) error {
	if len(row) != len(pw.cols) {
		return fmt.Errorf("internal error: row of %d values for %d columns", len(row), len(pw.cols))
	}
	r := make(parquet.Row, len(row))
	for i, v := range row {
		var pv parquet.Value
		null := false
		switch v := v.(type) {
		case nil:
			null = true
		case int64:
			pv = parquet.Int64Value(v)
		case uint64:
			pv = parquet.Int64Value(int64(v))
		case float64:
			if math.IsNaN(v) {
				null = true
			} else {
				pv = parquet.DoubleValue(v)
			}
		case string:
			pv = parquet.ByteArrayValue([]byte(v))
		case bool:
			pv = parquet.BooleanValue(v)
		case time.Time:
			if v.IsZero() {
				null = true
			} else {
				pv = parquet.Int64Value(v.UnixNano())
			}
		default:
			panic(fmt.Sprintf("store: export of unsupported value %T", v))
		}
		c := pw.cols[i]
		switch {
		case null && !c.nullable:
			return fmt.Errorf("internal error: null in non-nullable column %s", c.name)
		case null:
			r[i] = parquet.Value{}.Level(0, 0, i)
		case c.nullable:
			r[i] = pv.Level(0, 1, i)
		default:
			r[i] = pv.Level(0, 0, i)
		}
	}
	pw.batch = append(pw.batch, r)
	if len(pw.batch) == 512 {
		return pw.flush()
	}
	return nil
}

func (pw *parquetWriter) flush() error {
	_, err := pw.w.WriteRows(pw.batch)
	pw.batch = pw.batch[:0]
	return err
}

func (pw *parquetWriter) close() error {
	if err := pw.flush(); err != nil {
		return err
	}
	return pw.w.Close()
}

// orderedGroup is a parquet group node whose fields keep their order.
type orderedGroup []parquet.Field

func (g orderedGroup) ID() int                     { return 0 }
func (g orderedGroup) String() string              { return fmt.Sprintf("group of %d columns", len(g)) }
func (g orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g orderedGroup) Optional() bool              { return false }
func (g orderedGroup) Repeated() bool              { return false }
func (g orderedGroup) Required() bool              { return true }
func (g orderedGroup) Leaf() bool                  { return false }
func (g orderedGroup) Fields() []parquet.Field     { return g }
func (g orderedGroup) Encoding() encoding.Encoding { return nil }
func (g orderedGroup) Compression() compress.Codec { return nil }
func (g orderedGroup) GoType() reflect.Type {
	fs := make([]reflect.StructField, len(g))
	for i, f := range g {
		fs[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: f.GoType()}
	}
	return reflect.StructOf(fs)
}

// namedNode is field number index of an orderedGroup.
type namedNode struct {
	parquet.Node
	name  string
	index int
}

func (n namedNode) Name() string { return n.name }

// Value returns the field's value in a Go value of the group's GoType.
func (n namedNode) Value(base reflect.Value) reflect.Value { return base.Field(n.index) }
