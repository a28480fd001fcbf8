package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Run statuses accepted by CreateRun and UpdateRunStatus.
const (
	RunRunning     = "running"     // samples are being taken
	RunComplete    = "complete"    // every planned sample is stored
	RunInterrupted = "interrupted" // stopped early (signal, crash); resumable
	RunFailed      = "failed"      // stopped by an error that resuming would not fix
)

var runStatuses = []string{RunRunning, RunComplete, RunInterrupted, RunFailed}

func checkRunStatus(s string) error {
	for _, v := range runStatuses {
		if s == v {
			return nil
		}
	}
	return fmt.Errorf("store: run status %q is not one of %s", s, strings.Join(runStatuses, ", "))
}

// CreateRun stores a new run and sets r.ID. An empty Status becomes
// "running"; a zero Started becomes the current time (both are written back
// to r).
func (db *DB) CreateRun(ctx context.Context, r *model.Run) error {
	if r.Status == "" {
		r.Status = RunRunning
	}
	if err := checkRunStatus(r.Status); err != nil {
		return err
	}
	if r.Started.IsZero() {
		r.Started = time.Now().UTC()
	}
	sysctls, err := json.Marshal(r.Env.Sysctls)
	if err != nil {
		return fmt.Errorf("store: encoding sysctls: %w", err)
	}
	if r.Env.Sysctls == nil {
		sysctls = []byte("{}")
	}
	e := r.Env
	res, err := db.w.ExecContext(ctx, `INSERT INTO runs (plan_name, plan_text, plan_hash, seed,
		started_ns, finished_ns, status, version, vcs_commit, go_version, quic_go_version, kernel,
		cpu_model, cpus, hostname, cc_client, cc_server, sysctls)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.PlanName, r.PlanText, r.PlanHash, int64(r.Seed), timeToNS(r.Started), timeToNS(r.Finished),
		r.Status, e.Version, e.Commit, e.GoVersion, e.QuicGoVersion, e.Kernel, e.CPUModel, e.CPUs,
		e.Hostname, e.CCClient, e.CCServer, string(sysctls))
	if err != nil {
		return fmt.Errorf("store: creating run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	r.ID = id
	return nil
}

// UpdateRunEnv rewrites the parts of a run's environment that are only
// known once its testbed is built, or that change while it runs: the TCP
// congestion control of the client and server namespaces and the sysctls
// (socket buffer limits grow when a link needs more). The software and
// machine fields are written once, by CreateRun, and are left alone.
func (db *DB) UpdateRunEnv(ctx context.Context, runID int64, env model.Environment) error {
	sysctls := []byte("{}")
	if env.Sysctls != nil {
		var err error
		if sysctls, err = json.Marshal(env.Sysctls); err != nil {
			return fmt.Errorf("store: encoding sysctls: %w", err)
		}
	}
	return db.updateRun(ctx, runID, "updating the environment of", `UPDATE runs SET cc_client = ?, cc_server = ?, sysctls = ? WHERE id = ?`,
		env.CCClient, env.CCServer, string(sysctls))
}

// SetRunBrowser records the browser (product and version, e.g.
// "Chrome/156.0.8078.79") that took the run's chromium samples.
func (db *DB) SetRunBrowser(ctx context.Context, runID int64, browser string) error {
	return db.updateRun(ctx, runID, "updating the browser of", `UPDATE runs SET browser = ? WHERE id = ?`, browser)
}

// SetRunParallel records that an invocation of the run kept up to n
// testbeds taking samples at once; the run keeps the largest n any
// invocation used (a resumed run may use another).
func (db *DB) SetRunParallel(ctx context.Context, runID int64, n int) error {
	return db.updateRun(ctx, runID, "updating the parallelism of", `UPDATE runs SET parallel = max(parallel, ?) WHERE id = ?`, n)
}

// RunParallel returns the most testbeds any invocation of the run used at
// once (SetRunParallel; 1 for a run of one testbed at a time).
func (db *DB) RunParallel(ctx context.Context, runID int64) (int, error) {
	var n int
	err := db.r.QueryRowContext(ctx, `SELECT parallel FROM runs WHERE id = ?`, runID).Scan(&n)
	return n, err
}

// SetRunPeer records the version of a third-party program (a peer: a
// server such as "aioquic" or "caddy", a client such as "firefox") that
// took some of the run's samples, e.g. "aioquic 1.7.2". The run keeps one
// version per name, the latest recorded; Run.Env.Peers returns them.
func (db *DB) SetRunPeer(ctx context.Context, runID int64, name, version string) error {
	if name == "" {
		return errors.New("store: a peer needs a name")
	}
	return db.updateRun(ctx, runID, "recording a peer version of", `UPDATE runs SET peers = json_set(peers, '$.' || json_quote(?), ?) WHERE id = ?`,
		name, version)
}

// RunBrowser returns the browser recorded by SetRunBrowser ("" if the run
// took no chromium sample).
func (db *DB) RunBrowser(ctx context.Context, runID int64) (string, error) {
	var b string
	err := db.r.QueryRowContext(ctx, `SELECT browser FROM runs WHERE id = ?`, runID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
	}
	return b, err
}

// UpdateRunStatus sets a run's status and finish time (zero for none, e.g.
// when a resumed run goes back to "running").
func (db *DB) UpdateRunStatus(ctx context.Context, runID int64, status string, finished time.Time) error {
	if err := checkRunStatus(status); err != nil {
		return err
	}
	return db.updateRun(ctx, runID, "updating", `UPDATE runs SET status = ?, finished_ns = ? WHERE id = ?`,
		status, timeToNS(finished))
}

// updateRun executes query, an UPDATE of run runID whose last parameter is
// the run's id, with args before it. what says in an error what was done
// to the run ("updating the browser of"); a run that does not exist is
// ErrNotFound.
func (db *DB) updateRun(ctx context.Context, runID int64, what, query string, args ...any) error {
	res, err := db.w.ExecContext(ctx, query, append(args, runID)...)
	if err != nil {
		return fmt.Errorf("store: %s run %d: %w", what, runID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
	}
	return nil
}

const runColumns = `id, plan_name, plan_text, plan_hash, seed, started_ns, finished_ns, status,
	version, vcs_commit, go_version, quic_go_version, kernel, cpu_model, cpus, hostname,
	cc_client, cc_server, sysctls, peers`

type rowScanner interface{ Scan(...any) error }

// queryAll runs query with args and returns its rows as scan reads them.
func queryAll[T any](ctx context.Context, q querier, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func scanRun(s rowScanner) (model.Run, error) {
	var (
		r                 model.Run
		seed              int64
		started, finished sql.NullInt64
		sysctls, peers    string
	)
	e := &r.Env
	err := s.Scan(&r.ID, &r.PlanName, &r.PlanText, &r.PlanHash, &seed, &started, &finished, &r.Status,
		&e.Version, &e.Commit, &e.GoVersion, &e.QuicGoVersion, &e.Kernel, &e.CPUModel, &e.CPUs,
		&e.Hostname, &e.CCClient, &e.CCServer, &sysctls, &peers)
	if err != nil {
		return r, err
	}
	r.Seed = uint64(seed)
	r.Started = nsToTime(started)
	r.Finished = nsToTime(finished)
	if sysctls != "" && sysctls != "{}" && sysctls != "null" {
		if err := json.Unmarshal([]byte(sysctls), &e.Sysctls); err != nil {
			return r, fmt.Errorf("store: run %d: sysctls: %w", r.ID, err)
		}
	}
	if peers != "" && peers != "{}" {
		if err := json.Unmarshal([]byte(peers), &e.Peers); err != nil {
			return r, fmt.Errorf("store: run %d: peers: %w", r.ID, err)
		}
	}
	return r, nil
}

// RunByID returns the run with the given ID (ErrNotFound if none).
func (db *DB) RunByID(ctx context.Context, runID int64) (model.Run, error) {
	return runByID(ctx, db.r, runID)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func runByID(ctx context.Context, q querier, runID int64) (model.Run, error) {
	r, err := scanRun(q.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
	}
	return r, err
}

// Runs returns every run in the database, oldest first.
func (db *DB) Runs(ctx context.Context) ([]model.Run, error) {
	return queryAll(ctx, db.r, scanRun, `SELECT `+runColumns+` FROM runs ORDER BY id`)
}

// LatestRun returns the most recently created run (ErrNotFound if the
// database has none).
func (db *DB) LatestRun(ctx context.Context) (model.Run, error) {
	r, err := scanRun(db.r.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs ORDER BY id DESC LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("store: %s has no runs: %w", db.path, ErrNotFound)
	}
	return r, err
}

// AddRunWarning stores a validity warning that concerns a whole run rather
// than one sample (e.g. "machine has only 2 CPUs").
func (db *DB) AddRunWarning(ctx context.Context, runID int64, message string) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO warnings (run_id, sample_id, message) VALUES (?, NULL, ?)`,
		runID, message)
	if sqliteCode(err) == sqliteFK {
		return fmt.Errorf("store: run %d: %w", runID, ErrNotFound)
	}
	return err
}

// RunWarnings returns the run-level warnings of a run, in the order they
// were added.
func (db *DB) RunWarnings(ctx context.Context, runID int64) ([]string, error) {
	return queryAll(ctx, db.r, func(s rowScanner) (m string, err error) { return m, s.Scan(&m) },
		`SELECT message FROM warnings WHERE run_id = ? AND sample_id IS NULL ORDER BY id`, runID)
}
