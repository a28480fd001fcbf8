package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/quicbench/quicbench/model"
)

type jsonFactor struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func encodeFactors(fs []model.Factor) (string, error) {
	js := make([]jsonFactor, len(fs))
	for i, f := range fs {
		js[i] = jsonFactor(f)
	}
	b, err := json.Marshal(js)
	return string(b), err
}

func decodeFactors(s string) ([]model.Factor, error) {
	if s == "" || s == "[]" || s == "null" {
		return nil, nil
	}
	var js []jsonFactor
	if err := json.Unmarshal([]byte(s), &js); err != nil {
		return nil, err
	}
	fs := make([]model.Factor, len(js))
	for i, f := range js {
		fs[i] = model.Factor(f)
	}
	return fs, nil
}

// InsertCells stores the cells of a run, in plan order after any cells the
// run already has, and sets their IDs. It is idempotent by key, for resume:
// a cell whose key is already stored for the run keeps its ID and position,
// and must have the same definition (otherwise nothing is written and the
// error names the cell and the first field that differs).
func (db *DB) InsertCells(ctx context.Context, runID int64, cells []model.Cell) error {
	seen := make(map[string]int, len(cells))
	for i := range cells {
		c := &cells[i]
		if c.Key == "" {
			return fmt.Errorf("store: cell %d of %d has an empty key", i+1, len(cells))
		}
		if j, dup := seen[c.Key]; dup {
			return fmt.Errorf("store: cells %d and %d have the same key %q", j+1, i+1, c.Key)
		}
		seen[c.Key] = i
		if c.Iterations < 0 {
			return fmt.Errorf("store: cell %q: negative iteration count %d", c.Key, c.Iterations)
		}
	}
	ids := make([]int64, len(cells))
	err := db.withTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE id = ?`, runID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
		}
		var next int64
		if err := tx.QueryRowContext(ctx,
			`SELECT coalesce(max(position) + 1, 0) FROM cells WHERE run_id = ?`, runID).Scan(&next); err != nil {
			return err
		}
		find, err := tx.PrepareContext(ctx, `SELECT `+cellColumns+` FROM cells WHERE run_id = ? AND key = ?`)
		if err != nil {
			return err
		}
		defer find.Close()
		ins, err := tx.PrepareContext(ctx, `INSERT INTO cells (run_id, position, key, group_key, scenario,
			link_up, link_down, test, factors, protocol, client, server, cc, metric, unit, higher_is_better,
			iterations, warmup) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i := range cells {
			c := &cells[i]
			old, err := scanCell(find.QueryRowContext(ctx, runID, c.Key))
			if err == nil {
				if f := cellDiff(old, *c); f != "" {
					return fmt.Errorf("store: cell %q of run %d is already stored with a different %s (stored %v, now %v)",
						c.Key, runID, f, reflect.ValueOf(old).FieldByName(f), reflect.ValueOf(*c).FieldByName(f))
				}
				ids[i] = old.ID
				continue
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			factors, err := encodeFactors(c.Factors)
			if err != nil {
				return fmt.Errorf("store: cell %q: %w", c.Key, err)
			}
			res, err := ins.ExecContext(ctx, runID, next, c.Key, c.Group, c.Scenario, c.LinkUp, c.LinkDown,
				c.Test, factors, c.Protocol, c.Client, c.ServerImpl(), c.CC, c.Metric, c.Unit, boolInt(c.HigherIsBetter),
				c.Iterations, boolInt(c.Warmup))
			if err != nil {
				return fmt.Errorf("store: inserting cell %q: %w", c.Key, err)
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return err
			}
			next++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range cells {
		cells[i].ID = ids[i]
	}
	return nil
}

// cellDiff returns the name of the first field (other than ID) in which a
// and b differ, or "".
func cellDiff(a, b model.Cell) string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	for i := 0; i < t.NumField(); i++ {
		name := t.Field(i).Name
		if name == "ID" {
			continue
		}
		if name == "Server" && a.ServerImpl() == b.ServerImpl() {
			continue
		}
		fa, fb := va.Field(i).Interface(), vb.Field(i).Interface()
		if name == "Factors" && len(a.Factors) == 0 && len(b.Factors) == 0 {
			continue
		}
		if !reflect.DeepEqual(fa, fb) {
			return name
		}
	}
	return ""
}

const cellColumns = `id, key, group_key, scenario, link_up, link_down, test, factors, protocol,
	client, server, cc, metric, unit, higher_is_better, iterations, warmup`

func scanCell(s rowScanner) (model.Cell, error) {
	var (
		c         model.Cell
		factors   string
		hib, warm int64
	)
	err := s.Scan(&c.ID, &c.Key, &c.Group, &c.Scenario, &c.LinkUp, &c.LinkDown, &c.Test, &factors,
		&c.Protocol, &c.Client, &c.Server, &c.CC, &c.Metric, &c.Unit, &hib, &c.Iterations, &warm)
	if err != nil {
		return c, err
	}
	c.HigherIsBetter, c.Warmup = hib != 0, warm != 0
	if c.Factors, err = decodeFactors(factors); err != nil {
		return c, fmt.Errorf("store: cell %d: factors: %w", c.ID, err)
	}
	return c, nil
}

// Cells returns the cells of a run in plan order.
func (db *DB) Cells(ctx context.Context, runID int64) ([]model.Cell, error) {
	return cellsOf(ctx, db.r, runID)
}

func cellsOf(ctx context.Context, q querier, runID int64) ([]model.Cell, error) {
	return queryAll(ctx, q, scanCell, `SELECT `+cellColumns+` FROM cells WHERE run_id = ? ORDER BY position`, runID)
}
