package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// Evidence (schema version 10): files kept with a sample, such as its
// packet capture, key log and qlogs (model.Evidence), stored in chunks of
// evidenceChunk bytes (table evidence_chunks) so that a file of hundreds
// of megabytes is never one value in memory or in SQLite (whose values
// stop at 1 GB). LoadDataset does not read them: Evidence lists a sample's
// and CopyEvidence writes one out.

// evidenceChunk is the size of a stored chunk.
const evidenceChunk = 1 << 20

// EvidenceInfo describes one stored evidence file.
type EvidenceInfo struct {
	SampleID int64
	Name     string
	Kind     string
	Bytes    int64
}

// checkEvidenceName refuses names that are not plain file names:
// `quicbench evidence` writes each one into a directory.
func checkEvidenceName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || filepath.Base(name) != name {
		return fmt.Errorf("evidence name %q is not a plain file name", name)
	}
	return nil
}

// insertEvidence stores evidence files of sample id in transaction tx.
func insertEvidence(ctx context.Context, tx *sql.Tx, id int64, evs []model.Evidence) error {
	for _, ev := range evs {
		if err := checkEvidenceName(ev.Name); err != nil {
			return fmt.Errorf("store: sample %d: %w", id, err)
		}
		var r io.Reader
		switch {
		case ev.Path != "" && ev.Data != nil:
			return fmt.Errorf("store: sample %d: evidence %s has both data and a path", id, ev.Name)
		case ev.Path != "":
			f, err := os.Open(ev.Path)
			if err != nil {
				return fmt.Errorf("store: sample %d: evidence %s: %w", id, ev.Name, err)
			}
			defer f.Close()
			r = f
		default:
			r = strings.NewReader(string(ev.Data))
		}
		if _, err := storeEvidence(ctx, tx, id, ev.Name, ev.Kind, r); err != nil {
			return fmt.Errorf("store: sample %d: evidence %s: %w", id, ev.Name, err)
		}
	}
	return nil
}

// storeEvidence stores one file read from r and returns its size.
func storeEvidence(ctx context.Context, tx *sql.Tx, sampleID int64, name, kind string, r io.Reader) (int64, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO evidence (sample_id, name, kind, bytes) VALUES (?, ?, ?, 0)`, sampleID, name, kind)
	if err != nil {
		return 0, err
	}
	eid, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	buf := make([]byte, evidenceChunk)
	var total int64
	for chunk := 0; ; chunk++ {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO evidence_chunks (evidence_id, chunk, data) VALUES (?, ?, ?)`, eid, chunk, buf[:n]); err != nil {
				return 0, err
			}
			total += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE evidence SET bytes = ? WHERE id = ?`, total, eid)
	return total, err
}

// Evidence lists the evidence files stored with a sample, by name.
func (db *DB) Evidence(ctx context.Context, sampleID int64) ([]EvidenceInfo, error) {
	return db.evidenceWhere(ctx, `e.sample_id = ?`, sampleID)
}

// RunEvidence lists the evidence files of every sample of a run, by sample
// and name.
func (db *DB) RunEvidence(ctx context.Context, runID int64) ([]EvidenceInfo, error) {
	return db.evidenceWhere(ctx, `c.run_id = ?`, runID)
}

func (db *DB) evidenceWhere(ctx context.Context, where string, arg int64) ([]EvidenceInfo, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT e.sample_id, e.name, e.kind, e.bytes FROM evidence e
		JOIN samples s ON s.id = e.sample_id JOIN cells c ON c.id = s.cell_id
		WHERE `+where+` ORDER BY e.sample_id, e.name`, arg)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []EvidenceInfo
	for rows.Next() {
		var e EvidenceInfo
		if err := rows.Scan(&e.SampleID, &e.Name, &e.Kind, &e.Bytes); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// RunEvidenceBytes returns the bytes of a run's evidence of one kind (""
// for every kind): what a resumed run's captures already hold of its
// limit.
func (db *DB) RunEvidenceBytes(ctx context.Context, runID int64, kind string) (int64, error) {
	var n sql.NullInt64
	err := db.r.QueryRowContext(ctx, `SELECT sum(e.bytes) FROM evidence e
		JOIN samples s ON s.id = e.sample_id JOIN cells c ON c.id = s.cell_id
		WHERE c.run_id = ? AND (? = '' OR e.kind = ?)`, runID, kind, kind).Scan(&n)
	return n.Int64, err
}

// CopyEvidence writes evidence file name of a sample to w. A file whose
// chunks do not add up to its recorded size is an error (after writing
// what there is).
func (db *DB) CopyEvidence(ctx context.Context, sampleID int64, name string, w io.Writer) (int64, error) {
	var eid, size int64
	err := db.r.QueryRowContext(ctx, `SELECT id, bytes FROM evidence WHERE sample_id = ? AND name = ?`, sampleID, name).Scan(&eid, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: sample %d has no evidence %q: %w", sampleID, name, ErrNotFound)
	} else if err != nil {
		return 0, err
	}
	return copyChunks(ctx, db.r, eid, size, w)
}

// querier runs queries: a *sql.DB or a *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// copyChunks writes the chunks of evidence eid, one query per chunk (a
// chunk in memory at a time), and checks their sum against size.
func copyChunks(ctx context.Context, q rowQuerier, eid, size int64, w io.Writer) (int64, error) {
	var total int64
	for chunk := 0; ; chunk++ {
		var data []byte
		err := q.QueryRowContext(ctx, `SELECT data FROM evidence_chunks WHERE evidence_id = ? AND chunk = ?`, eid, chunk).Scan(&data)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return total, err
		}
		n, err := w.Write(data)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	if total != size {
		return total, fmt.Errorf("store: evidence %d: %d bytes stored of %d: the database is damaged", eid, total, size)
	}
	return total, nil
}

// copyEvidence copies every evidence file of sample from (in src) to
// sample to in transaction tx (merge).
func copyEvidence(ctx context.Context, tx *sql.Tx, src *DB, from, to int64) error {
	evs, err := src.Evidence(ctx, from)
	if err != nil {
		return err
	}
	for _, e := range evs {
		pr, pw := io.Pipe()
		go func() {
			_, err := src.CopyEvidence(ctx, from, e.Name, pw)
			pw.CloseWithError(err)
		}()
		_, err := storeEvidence(ctx, tx, to, e.Name, e.Kind, pr)
		pr.CloseWithError(err) // stops the copier if storing failed
		if err != nil {
			return fmt.Errorf("evidence %s of sample %d: %w", e.Name, from, err)
		}
	}
	return nil
}

// SampleRef names a sample: its run, cell key and iteration (-1: the
// warm-up).
type SampleRef struct {
	ID, RunID int64
	CellKey   string
	Iteration int
}

// Sample returns which sample id is; an unknown id is an error wrapping
// ErrNotFound.
func (db *DB) Sample(ctx context.Context, id int64) (SampleRef, error) {
	ref := SampleRef{ID: id}
	err := db.r.QueryRowContext(ctx, `SELECT c.run_id, c.key, s.iteration FROM samples s JOIN cells c ON c.id = s.cell_id
		WHERE s.id = ?`, id).Scan(&ref.RunID, &ref.CellKey, &ref.Iteration)
	if errors.Is(err, sql.ErrNoRows) {
		return ref, fmt.Errorf("store: no sample %d: %w", id, ErrNotFound)
	}
	return ref, err
}
