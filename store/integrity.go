package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrCorrupt is returned (wrapped) when a database file is damaged: cut
// short, or with pages SQLite's structural check (PRAGMA quick_check)
// rejects. Every open checks this first, so a damaged file is refused
// before anything is read from it or written to it, instead of being
// reported from whatever its damaged pages happen to hold.
var ErrCorrupt = errors.New("the database file is damaged")

// ErrDiskFull is returned (wrapped) when a write failed because the
// filesystem that holds the database has no space left. The transaction
// that failed is rolled back; everything committed before it is kept.
var ErrDiskFull = errors.New("no space left on the database's filesystem")

// corruptError says that the database at path is damaged and why.
func corruptError(path, why string) error {
	return fmt.Errorf("store: %s: %w: %s. Its samples cannot be trusted, so quicbench refuses to read or extend it; restore it from a copy, or salvage what SQLite can still read (sqlite3 %s .recover > salvage.sql)",
		path, ErrCorrupt, why, path)
}

// checkIntact refuses a damaged database file at abs (shown as path): a
// file whose size is not a whole number of pages or is shorter than its
// header says (cut short), or whose b-tree pages fail SQLite's quick_check
// (which reads every page once: about 0.5 s per GB from the page cache). The size checks
// are made only when no write-ahead log is pending, since a log holds
// pages the main file does not have yet.
func checkIntact(path, abs string) error {
	f, err := os.Open(abs)
	if err != nil {
		return fmt.Errorf("store: %s: %w", path, err)
	}
	var hdr [100]byte
	_, err = io.ReadFull(f, hdr[:])
	st, serr := f.Stat()
	f.Close()
	if err != nil || serr != nil {
		return corruptError(path, "its header cannot be read")
	}
	pageSize := int64(binary.BigEndian.Uint16(hdr[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize&(pageSize-1) != 0 {
		return corruptError(path, fmt.Sprintf("its header gives an impossible page size %d", pageSize))
	}
	if wal, err := os.Stat(abs + "-wal"); err != nil || wal.Size() == 0 {
		size := st.Size()
		if size%pageSize != 0 {
			return corruptError(path, fmt.Sprintf("its size, %d bytes, is not a whole number of %d-byte pages: the file was cut short", size, pageSize))
		}
		pages := int64(binary.BigEndian.Uint32(hdr[28:32]))
		changes, validFor := binary.BigEndian.Uint32(hdr[24:28]), binary.BigEndian.Uint32(hdr[92:96])
		if changes == validFor && pages*pageSize > size {
			return corruptError(path, fmt.Sprintf("it holds %d pages but its header says %d: the file was cut short", size/pageSize, pages))
		}
	}
	c, err := openRO(abs)
	if err != nil {
		return fmt.Errorf("store: %s: %w", path, err)
	}
	defer c.Close()
	rows, err := c.QueryContext(context.Background(), "PRAGMA quick_check(5)")
	if err != nil {
		return damaged(path, err)
	}
	var msgs []string
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return damaged(path, err)
		}
		if m != "ok" {
			msgs = append(msgs, m)
		}
	}
	if err := rows.Close(); err != nil {
		return damaged(path, err)
	}
	if err := rows.Err(); err != nil {
		return damaged(path, err)
	}
	if len(msgs) > 0 {
		return corruptError(path, "SQLite's structural check fails: "+strings.Join(msgs, "; "))
	}
	return nil
}

// damaged turns an error of the structural check into a corruptError
// when SQLite says the file is malformed, and returns it wrapped otherwise.
func damaged(path string, err error) error {
	switch sqliteCode(err) & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return corruptError(path, "SQLite cannot read it: "+err.Error())
	}
	return fmt.Errorf("store: %s: checking the file: %w", path, err)
}

// diskFull returns err wrapped with ErrDiskFull and a message that says
// what to do when it is SQLite's "database or disk is full", a write error
// for want of space, or an I/O error while the database's filesystem has
// no space left; otherwise err unchanged.
func (db *DB) diskFull(err error) error {
	if err == nil || errors.Is(err, ErrDiskFull) {
		return err
	}
	code := sqliteCode(err)
	full := code&0xff == sqlite3.SQLITE_FULL || errors.Is(err, syscall.ENOSPC)
	if !full && code&0xff == sqlite3.SQLITE_IOERR {
		var fs unix.Statfs_t
		if unix.Statfs(filepath.Dir(db.absPath()), &fs) == nil && fs.Bavail == 0 {
			full = true
		}
	}
	if !full {
		return err
	}
	return fmt.Errorf("store: %s: %w (%v): the write was rolled back and every sample stored before it is kept; free space on the filesystem of %s, then continue with quicbench run --resume %s",
		db.path, ErrDiskFull, err, filepath.Dir(db.absPath()), db.path)
}

// absPath is the database's path made absolute (its path if that fails).
func (db *DB) absPath() string {
	if a, err := filepath.Abs(db.path); err == nil {
		return a
	}
	return db.path
}
