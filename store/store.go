// Package store keeps quicbench's measurements in an embedded SQLite
// database (modernc.org/sqlite, pure Go) and exports them as CSV, JSON lines
// or Parquet.
//
// One database file holds any number of runs. Every sample is written in its
// own transaction together with everything that belongs to it (metrics,
// transport statistics, timelines, page resources, warnings), so an
// interrupted run loses at most the sample that was being written. The
// schema is created and upgraded by numbered migrations; docs/data.md
// documents every table and column.
//
// Conventions: times are stored as Unix nanoseconds (UTC) and returned in
// UTC; durations as nanoseconds; uint64 values (seeds, link counters) as the
// int64 with the same bits; empty slices and maps are returned as nil; a NaN
// float is stored as NULL and read back as NaN.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrNotFound is returned (wrapped) when a run or cell does not exist.
var ErrNotFound = errors.New("not found")

// ErrDuplicateSample is returned (wrapped) by InsertSample when the cell
// already has a sample for the same iteration.
var ErrDuplicateSample = errors.New("duplicate sample")

// DB is an open quicbench database. It is safe for concurrent use; writes
// are serialised.
type DB struct {
	path string
	// w is the write pool: one connection whose transactions start with
	// BEGIN IMMEDIATE, so that a write never fails half way with
	// SQLITE_BUSY when another process holds the lock (the busy timeout
	// covers the wait instead).
	w *sql.DB
	// r is the read pool: deferred transactions that read a WAL snapshot
	// without blocking the writer.
	r *sql.DB
	// ins are InsertSample's statements, prepared on w's connection.
	ins insertStmts
}

// busyTimeout is how long a statement waits for another connection or
// process to release the database lock before failing with SQLITE_BUSY.
const busyTimeout = 30 * time.Second

// Open opens the database at path, creating it if it does not exist, and
// brings its schema up to date. It fails if the file is not a quicbench
// database or was written by a newer quicbench with a schema this one does
// not know.
func Open(path string) (*DB, error) { return open(path, true) }

// OpenExisting is Open for a database that must already exist (export,
// report, resume): a missing file is an error instead of a new database.
func OpenExisting(path string) (*DB, error) { return open(path, false) }

func open(path string, create bool) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	if st, err := os.Stat(abs); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("store: %s is a directory, not a database file", path)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("store: %w", err)
	} else if !create {
		return nil, fmt.Errorf("store: %s: no such database file", path)
	}

	// Durability. In WAL mode, synchronous=NORMAL only syncs the WAL at
	// checkpoints: a committed transaction survives a crash of the process
	// but a power loss or kernel crash can roll back every transaction
	// committed since the last checkpoint (potentially hundreds of samples).
	// synchronous=FULL syncs the WAL at every commit, so once InsertSample
	// returns the sample is on stable storage and a power loss loses at most
	// the sample in flight, which is the promise quicbench makes. The price
	// is one fsync per sample (see BenchmarkInsertSample), small beside a
	// sample that takes tens of milliseconds to seconds to measure.
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	if !create {
		q.Set("mode", "rw") // SQLite URI parameter: never create the file
	}
	u := url.URL{Scheme: "file", Path: abs}
	dsnW := u.String() + "?" + q.Encode() + "&_txlock=immediate"
	dsnR := u.String() + "?" + q.Encode()

	w, err := sql.Open("sqlite", dsnW)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	db := &DB{path: path, w: w}
	if err := db.migrate(context.Background()); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	if err := db.prepareInserts(context.Background()); err != nil {
		db.ins.close()
		w.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsnR)
	if err != nil {
		db.ins.close()
		w.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	r.SetMaxIdleConns(8) // LoadDataset reads with up to 8 connections at once
	db.r = r
	return db, nil
}

// Path is the file name the database was opened with.
func (db *DB) Path() string { return db.path }

// Close closes the database. Committed data is already on disk; Close also
// checkpoints the write-ahead log into the main file when it is the last
// connection.
func (db *DB) Close() error {
	db.ins.close()
	err := db.r.Close()
	if err2 := db.w.Close(); err == nil {
		err = err2
	}
	return err
}

// IntegrityCheck runs SQLite's PRAGMA integrity_check and foreign_key_check
// and returns an error describing the first problems found, or nil.
func (db *DB) IntegrityCheck(ctx context.Context) error {
	rows, err := db.r.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return err
	}
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return err
		}
		if m != "ok" {
			msgs = append(msgs, m)
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	var fk int
	err = db.r.QueryRowContext(ctx, "SELECT count(*) FROM pragma_foreign_key_check").Scan(&fk)
	if err != nil {
		return err
	}
	if fk > 0 {
		msgs = append(msgs, fmt.Sprintf("%d rows violate foreign keys", fk))
	}
	if len(msgs) > 0 {
		if len(msgs) > 5 {
			msgs = append(msgs[:5], "...")
		}
		return fmt.Errorf("store: %s fails its integrity check: %v", db.path, msgs)
	}
	return nil
}

// sqliteCode returns the extended SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

const sqliteFK = sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY

func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// withTx runs fn in a write transaction, committing if fn returns nil.
func (db *DB) withTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// Time and number conventions.

func timeToNS(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func nsToTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.Unix(0, v.Int64).UTC()
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
