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
	// tmpDir holds the private migrated copy that OpenReadOnly reads for
	// a database of an older schema; Close removes it. Empty otherwise.
	tmpDir string
	// lock is the write lock held by a writer (nil for a reader).
	lock *writeLock
}

// busyTimeout is how long a statement waits for another connection or
// process to release the database lock before failing with SQLITE_BUSY.
const busyTimeout = 30 * time.Second

// openMode says what open may do to the file it is given.
type openMode int

const (
	modeCreate   openMode = iota // create the file if missing; migrate
	modeExisting                 // the file must exist; migrate
	modeReadOnly                 // the file must exist; never written
)

// Open opens the database at path, creating it if it does not exist, and
// brings its schema up to date. It fails if the file is not a quicbench
// database or was written by a newer quicbench with a schema this one does
// not know; in both cases the file is left exactly as it was.
func Open(path string) (*DB, error) { return open(path, modeCreate) }

// OpenExisting is Open for a database that must already exist (resume): a
// missing file is an error instead of a new database.
func OpenExisting(path string) (*DB, error) { return open(path, modeExisting) }

// OpenReadOnly opens an existing database for reading only (report,
// export, compare): nothing is ever written to the file, not even a change
// of journal mode. A database written by an older quicbench is read
// through a migrated private copy in the temporary directory, removed by
// Close; the file itself stays at its version. Writing through the
// returned DB fails.
func OpenReadOnly(path string) (*DB, error) { return open(path, modeReadOnly) }

func open(path string, mode openMode) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: empty database path")
	}
	abs, err := absPath(path)
	if err != nil {
		return nil, err
	}
	var lock *writeLock
	if mode != modeReadOnly {
		if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) && mode != modeCreate {
			return nil, fmt.Errorf("store: %s: no such database file", path)
		}
		if lock, err = acquireLock(path, abs); err != nil {
			return nil, err
		}
	}
	db, err := openLocked(path, abs, mode)
	if err != nil {
		lock.release()
		return nil, err
	}
	db.lock = lock
	return db, nil
}

// absPath is path made absolute.
func absPath(path string) (string, error) {
	if path == "" {
		return "", errors.New("store: empty database path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("store: %s: %w", path, err)
	}
	return abs, nil
}

// openLocked is open once the writer's lock (if any) is held.
func openLocked(path, abs string, mode openMode) (*DB, error) {
	if st, err := os.Stat(abs); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("store: %s is a directory, not a database file", path)
		}
		// Check what the file is before anything may write to it: a
		// file that is not quicbench's, or is newer, is refused untouched.
		current, empty, err := checkSchema(abs)
		if err != nil {
			return nil, fmt.Errorf("store: %s: %w", path, err)
		}
		if !empty {
			if err := checkIntact(path, abs); err != nil {
				return nil, err
			}
		}
		if mode == modeReadOnly {
			if empty {
				return nil, fmt.Errorf("store: %s: an empty file, not a quicbench database", path)
			}
			if current < len(migrations) {
				return openMigratedCopy(path, abs, current)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("store: %w", err)
	} else if mode != modeCreate {
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
	switch mode {
	case modeReadOnly:
		q.Set("mode", "ro") // SQLite URI parameter: never write the file
	case modeExisting:
		q.Set("mode", "rw") // never create the file
	}
	if mode != modeReadOnly {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(FULL)")
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
	if mode != modeReadOnly {
		if err := db.migrate(context.Background()); err != nil {
			w.Close()
			return nil, fmt.Errorf("store: %s: %w", path, err)
		}
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

// checkSchema reads, through a read-only connection that changes nothing
// in the file, which schema version the database at abs holds.
func checkSchema(abs string) (current int, empty bool, err error) {
	c, err := openRO(abs)
	if err != nil {
		return 0, false, err
	}
	defer c.Close()
	current, empty, err = schemaState(context.Background(), c)
	if err != nil {
		var se *sqlite.Error
		if errors.As(err, &se) && se.Code() == sqlite3.SQLITE_NOTADB {
			return 0, false, errors.New("not a quicbench database (not an SQLite file)")
		}
	}
	return current, empty, err
}

// openRO opens the database file at abs through a read-only connection
// (SQLite's mode=ro), which never writes to the file.
func openRO(abs string) (*sql.DB, error) {
	u := url.URL{Scheme: "file", Path: abs}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	return sql.Open("sqlite", u.String()+"?"+q.Encode())
}

// openMigratedCopy serves OpenReadOnly for a database of an older schema:
// SQLite copies it (VACUUM INTO, which reads the file and its write-ahead
// log without writing either) into a private temporary file, which is
// migrated and opened read-only; Close removes it.
func openMigratedCopy(path, abs string, from int) (*DB, error) {
	dir, err := os.MkdirTemp("", "quicbench-read-")
	if err != nil {
		return nil, fmt.Errorf("store: %s: a private copy to read schema version %d: %w", path, from, err)
	}
	cp := filepath.Join(dir, "copy.db")
	fail := func(err error) (*DB, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("store: %s: reading schema version %d through a migrated copy: %w", path, from, err)
	}
	src, err := openRO(abs)
	if err != nil {
		return fail(err)
	}
	_, err = src.Exec(`VACUUM INTO ?`, cp)
	src.Close()
	if err != nil {
		return fail(err)
	}
	mdb, err := open(cp, modeExisting)
	if err != nil {
		return fail(err)
	}
	if err := mdb.Close(); err != nil {
		return fail(err)
	}
	db, err := open(cp, modeReadOnly)
	if err != nil {
		return fail(err)
	}
	db.path = path
	db.tmpDir = dir
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
	if db.tmpDir != "" {
		if err2 := os.RemoveAll(db.tmpDir); err == nil {
			err = err2
		}
	}
	if err2 := db.lock.release(); err == nil {
		err = err2
	}
	db.lock = nil
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
		return db.diskFull(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return db.diskFull(err)
	}
	return db.diskFull(tx.Commit())
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
