package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/quicbench/quicbench/model"
)

// SetGroupStop records (or replaces, on resume) why an adaptive run stopped
// iterating a cell group.
func (db *DB) SetGroupStop(ctx context.Context, runID int64, st model.GroupStop) error {
	var prec sql.NullFloat64
	if !math.IsInf(st.Precision, 0) && !math.IsNaN(st.Precision) {
		prec = sql.NullFloat64{Float64: st.Precision, Valid: true}
	}
	err := db.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO group_stops
			(run_id, group_key, iterations, reason, precision_pct, worst_pair) VALUES (?, ?, ?, ?, ?, ?)`,
			runID, st.Group, st.Iterations, st.Reason, prec, st.WorstPair)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: group stop of %s: %w", st.Group, err)
	}
	return nil
}

// GroupStops returns the group stops of a run, by group key.
func (db *DB) GroupStops(ctx context.Context, runID int64) ([]model.GroupStop, error) {
	return groupStops(ctx, db.r, runID)
}

func groupStops(ctx context.Context, q querier, runID int64) ([]model.GroupStop, error) {
	rows, err := q.QueryContext(ctx, `SELECT group_key, iterations, reason, precision_pct, worst_pair
		FROM group_stops WHERE run_id = ? ORDER BY group_key`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: group stops of run %d: %w", runID, err)
	}
	defer rows.Close()
	var out []model.GroupStop
	for rows.Next() {
		var st model.GroupStop
		var prec sql.NullFloat64
		if err := rows.Scan(&st.Group, &st.Iterations, &st.Reason, &prec, &st.WorstPair); err != nil {
			return nil, err
		}
		st.Precision = math.Inf(1)
		if prec.Valid {
			st.Precision = prec.Float64
		}
		out = append(out, st)
	}
	return out, rows.Err()
}
