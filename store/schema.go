package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations are the schema changes, in order: migrations[i] brings the
// schema from version i to version i+1. Released migrations are never
// edited, only appended to. docs/data.md describes the resulting schema.
var migrations = []string{
	// 1: initial schema.
	`
CREATE TABLE runs (
	id              INTEGER PRIMARY KEY,
	plan_name       TEXT    NOT NULL,
	plan_text       TEXT    NOT NULL,
	plan_hash       TEXT    NOT NULL,
	seed            INTEGER NOT NULL,           -- uint64 stored as int64 bits
	started_ns      INTEGER,                    -- Unix ns
	finished_ns     INTEGER,                    -- NULL while running or interrupted
	status          TEXT    NOT NULL,
	version         TEXT    NOT NULL,
	vcs_commit      TEXT    NOT NULL,
	go_version      TEXT    NOT NULL,
	quic_go_version TEXT    NOT NULL,
	kernel          TEXT    NOT NULL,
	cpu_model       TEXT    NOT NULL,
	cpus            INTEGER NOT NULL,
	hostname        TEXT    NOT NULL,
	cc_client       TEXT    NOT NULL,
	cc_server       TEXT    NOT NULL,
	sysctls         TEXT    NOT NULL            -- JSON object name -> value
);

CREATE TABLE cells (
	id               INTEGER PRIMARY KEY,
	run_id           INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	position         INTEGER NOT NULL,          -- plan order within the run
	key              TEXT    NOT NULL,
	group_key        TEXT    NOT NULL,
	scenario         TEXT    NOT NULL,
	link_up          TEXT    NOT NULL,
	link_down        TEXT    NOT NULL,
	test             TEXT    NOT NULL,
	factors          TEXT    NOT NULL,          -- JSON array of {"name","value"}
	protocol         TEXT    NOT NULL,
	client           TEXT    NOT NULL,
	cc               TEXT    NOT NULL,
	metric           TEXT    NOT NULL,
	unit             TEXT    NOT NULL,
	higher_is_better INTEGER NOT NULL,
	iterations       INTEGER NOT NULL,
	warmup           INTEGER NOT NULL,
	UNIQUE (run_id, key),
	UNIQUE (run_id, position)
);

CREATE TABLE samples (
	id                  INTEGER PRIMARY KEY,
	cell_id             INTEGER NOT NULL REFERENCES cells(id) ON DELETE CASCADE,
	iteration           INTEGER NOT NULL CHECK (iteration >= -1),
	warmup              INTEGER NOT NULL CHECK ((warmup = 1) = (iteration = -1)),
	ord                 INTEGER NOT NULL,
	seed                INTEGER NOT NULL,       -- uint64 stored as int64 bits
	started_ns          INTEGER,
	wall_ns             INTEGER NOT NULL,
	overhead_ns         INTEGER NOT NULL,
	status              TEXT    NOT NULL CHECK (status IN ('ok', 'failed', 'invalid')),
	error               TEXT    NOT NULL,
	value               REAL,                   -- NULL = NaN
	alpn                TEXT    NOT NULL,
	http_version        TEXT    NOT NULL,
	tls_version         TEXT    NOT NULL,
	cipher              TEXT    NOT NULL,
	quic_version        TEXT    NOT NULL,
	resumed             INTEGER NOT NULL,
	zero_rtt            INTEGER NOT NULL,
	cpu_client_user_ns  INTEGER NOT NULL,
	cpu_client_sys_ns   INTEGER NOT NULL,
	cpu_server_user_ns  INTEGER NOT NULL,
	cpu_server_sys_ns   INTEGER NOT NULL,
	up_packets_in       INTEGER NOT NULL,
	up_bytes_in         INTEGER NOT NULL,
	up_packets_out      INTEGER NOT NULL,
	up_bytes_out        INTEGER NOT NULL,
	up_drop_loss        INTEGER NOT NULL,
	up_drop_queue       INTEGER NOT NULL,
	up_drop_corrupt     INTEGER NOT NULL,
	up_drop_off         INTEGER NOT NULL,
	up_duplicated       INTEGER NOT NULL,
	up_reordered        INTEGER NOT NULL,
	up_queue_delay_sum_ns INTEGER NOT NULL,
	up_queue_delay_max_ns INTEGER NOT NULL,
	down_packets_in     INTEGER NOT NULL,
	down_bytes_in       INTEGER NOT NULL,
	down_packets_out    INTEGER NOT NULL,
	down_bytes_out      INTEGER NOT NULL,
	down_drop_loss      INTEGER NOT NULL,
	down_drop_queue     INTEGER NOT NULL,
	down_drop_corrupt   INTEGER NOT NULL,
	down_drop_off       INTEGER NOT NULL,
	down_duplicated     INTEGER NOT NULL,
	down_reordered      INTEGER NOT NULL,
	down_queue_delay_sum_ns INTEGER NOT NULL,
	down_queue_delay_max_ns INTEGER NOT NULL,
	metrics             TEXT    NOT NULL        -- JSON object name -> value (view sample_metrics)
);
-- One sample per cell and iteration (the warm-up is iteration -1): a
-- resumed run can never store a sample twice.
CREATE UNIQUE INDEX samples_cell_iteration ON samples (cell_id, iteration, warmup);

-- Every scalar metric of a sample (Sample.Metrics), one row per metric,
-- expanded from samples.metrics.
CREATE VIEW sample_metrics AS
	SELECT s.id AS sample_id, m.key AS name, m.value AS value
	FROM samples AS s, json_each(s.metrics) AS m;

-- Final transport statistics, one row per connection of a sample.
CREATE TABLE transport_stats (
	sample_id            INTEGER NOT NULL REFERENCES samples(id) ON DELETE CASCADE,
	conn                 INTEGER NOT NULL,      -- 0-based connection index
	kind                 TEXT    NOT NULL,
	side                 TEXT    NOT NULL,      -- whose view: client, server ('' = client)
	congestion_algo      TEXT    NOT NULL,
	srtt_ms              REAL,
	rttvar_ms            REAL,
	min_rtt_ms           REAL,
	cwnd_bytes           INTEGER NOT NULL,
	ssthresh_bytes       INTEGER NOT NULL,
	packets_sent         INTEGER NOT NULL,
	packets_lost         INTEGER NOT NULL,
	retransmits          INTEGER NOT NULL,
	bytes_retransmitted  INTEGER NOT NULL,
	delivery_rate_bps    INTEGER NOT NULL,
	congestion_events    INTEGER NOT NULL,
	pto_count            INTEGER NOT NULL,
	PRIMARY KEY (sample_id, conn)
) WITHOUT ROWID;

-- Timelines, one row per series. The points are a JSON array of [t_ns, v]
-- pairs: one row per series instead of one per point keeps inserts and
-- loads fast; the view timeline_points below gives one row per point.
CREATE TABLE timelines (
	sample_id INTEGER NOT NULL REFERENCES samples(id) ON DELETE CASCADE,
	series    INTEGER NOT NULL,                 -- 0-based index within the sample
	kind      TEXT    NOT NULL,
	label     TEXT    NOT NULL,
	n_points  INTEGER NOT NULL,
	points    TEXT    NOT NULL,                 -- [[t_ns, v], ...]
	PRIMARY KEY (sample_id, series)
) WITHOUT ROWID;

CREATE VIEW timeline_points AS
	SELECT t.sample_id AS sample_id, t.series AS series, t.kind AS kind, t.label AS label,
	       CAST(p.key AS INTEGER) AS point,
	       json_extract(p.value, '$[0]') AS t_ns,
	       json_extract(p.value, '$[1]') AS v
	FROM timelines AS t, json_each(t.points) AS p;

-- Resources of a page load, in load order.
CREATE TABLE resources (
	sample_id INTEGER NOT NULL REFERENCES samples(id) ON DELETE CASCADE,
	idx       INTEGER NOT NULL,
	name      TEXT    NOT NULL,
	protocol  TEXT    NOT NULL,
	start_ns  INTEGER NOT NULL,
	ttfb_ns   INTEGER NOT NULL,
	end_ns    INTEGER NOT NULL,
	bytes     INTEGER NOT NULL,
	PRIMARY KEY (sample_id, idx)
) WITHOUT ROWID;

-- Validity warnings: of a sample (sample_id set) or of the whole run.
CREATE TABLE warnings (
	id        INTEGER PRIMARY KEY,
	run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	sample_id INTEGER REFERENCES samples(id) ON DELETE CASCADE,
	message   TEXT    NOT NULL
);
CREATE INDEX warnings_run ON warnings (run_id, sample_id);
CREATE INDEX warnings_sample ON warnings (sample_id);
`,
	// 2: the browser of a run's chromium samples.
	`
ALTER TABLE runs ADD COLUMN browser TEXT NOT NULL DEFAULT '';  -- e.g. Chrome/156.0.8078.79; '' without browser samples
`,
	// 3: QUIC congestion state changes (TransportStats.CongestionStateChanges).
	`
ALTER TABLE transport_stats ADD COLUMN congestion_state_changes INTEGER NOT NULL DEFAULT 0;  -- QUIC; 0 for TCP and before version 3
`,
	// 4: the link drain part of a sample's overhead (Sample.Drain).
	`
ALTER TABLE samples ADD COLUMN drain_ns INTEGER NOT NULL DEFAULT 0;  -- part of overhead_ns; 0 before version 4
`,
	// 5: the test's unmeasured preparation part of a sample's overhead
	// (Sample.Prep).
	`
ALTER TABLE samples ADD COLUMN prep_ns INTEGER NOT NULL DEFAULT 0;  -- part of overhead_ns; 0 before version 5
`,
	// 6: why an adaptive run stopped iterating each cell group
	// (model.GroupStop).
	`
CREATE TABLE group_stops (
	run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	group_key     TEXT    NOT NULL,
	iterations    INTEGER NOT NULL,  -- counted iterations taken
	reason        TEXT    NOT NULL,  -- 'precision' or 'maximum'
	precision_pct REAL,              -- widest pair's half-width at the stop, % of its median; NULL when it could not be computed
	worst_pair    TEXT    NOT NULL,  -- e.g. 'h3 vs h2'
	PRIMARY KEY (run_id, group_key)
) WITHOUT ROWID;
`,
	// 7: parallel runs: the testbed that took each sample and how many
	// took samples at once (Sample.Slot, Sample.Concurrency), and the most
	// testbeds an invocation of the run used.
	`
ALTER TABLE samples ADD COLUMN slot INTEGER NOT NULL DEFAULT 0;         -- testbed 0..N-1; 0 before version 7
ALTER TABLE samples ADD COLUMN concurrency INTEGER NOT NULL DEFAULT 1;  -- testbeds taking samples while it ran, itself included
ALTER TABLE runs ADD COLUMN parallel INTEGER NOT NULL DEFAULT 1;        -- the most testbeds an invocation ran at once
`,
	// 8: shards (quicbench run --shard K/N) and their merge (quicbench
	// merge): a run's shard identity, the shard that took each sample, and
	// the shards a merged run was made of, with where each ran.
	`
ALTER TABLE runs ADD COLUMN shard_k INTEGER NOT NULL DEFAULT 0;     -- 1..shard_n for a shard; 0 for a whole run
ALTER TABLE runs ADD COLUMN shard_n INTEGER NOT NULL DEFAULT 0;     -- shards the run was cut into; 0 for a whole run
ALTER TABLE samples ADD COLUMN shard INTEGER NOT NULL DEFAULT 0;    -- the shard that took it (run_shards.shard_k); 0 = not sharded
CREATE TABLE run_shards (
	run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	shard_k     INTEGER NOT NULL,          -- 1..shard_n
	shard_n     INTEGER NOT NULL,
	source      TEXT    NOT NULL,          -- the shard's database file as given to merge
	status      TEXT    NOT NULL,          -- the shard run's status
	started_ns  INTEGER,
	finished_ns INTEGER,
	samples     INTEGER NOT NULL,          -- samples merged from it
	hostname    TEXT    NOT NULL,
	kernel      TEXT    NOT NULL,
	cpu_model   TEXT    NOT NULL,
	cpus        INTEGER NOT NULL,
	parallel    INTEGER NOT NULL,
	PRIMARY KEY (run_id, shard_k)
) WITHOUT ROWID;
`,
	// 9: implementations: the server that served each cell (Cell.Server)
	// and the third-party programs' versions (Environment.Peers); the
	// packets each direction dropped above the link's MTU.
	`
ALTER TABLE cells ADD COLUMN server TEXT NOT NULL DEFAULT 'quicbench';  -- peers.Servers(); 'quicbench' before version 9
ALTER TABLE runs ADD COLUMN peers TEXT NOT NULL DEFAULT '{}';            -- JSON object: peer name -> version
ALTER TABLE samples ADD COLUMN up_drop_mtu INTEGER NOT NULL DEFAULT 0;   -- packets above the link's mtu; 0 before version 9
ALTER TABLE samples ADD COLUMN down_drop_mtu INTEGER NOT NULL DEFAULT 0;
`,
	// 10: evidence kept with a sample (model.Evidence: its packet capture,
	// key log, qlogs), in chunks so that a large file is never one value.
	`
CREATE TABLE evidence (
	id        INTEGER PRIMARY KEY,
	sample_id INTEGER NOT NULL REFERENCES samples(id) ON DELETE CASCADE,
	name      TEXT    NOT NULL,          -- file name, e.g. capture.pcapng
	kind      TEXT    NOT NULL,          -- capture, keylog, qlog
	bytes     INTEGER NOT NULL,          -- the file's size
	UNIQUE (sample_id, name)
);
CREATE TABLE evidence_chunks (
	evidence_id INTEGER NOT NULL REFERENCES evidence(id) ON DELETE CASCADE,
	chunk       INTEGER NOT NULL,        -- 0-based; the file is the chunks in order
	data        BLOB    NOT NULL,
	PRIMARY KEY (evidence_id, chunk)     -- a rowid table: its rows are large
);
`,
}

// schemaState reads which schema version the database holds. An empty
// database (no tables at all) is version 0 with empty set; a database with
// tables but no schema_version table is not quicbench's; one newer than
// this quicbench knows is refused. It only reads.
func schemaState(ctx context.Context, q querier) (current int, empty bool, err error) {
	var hasVersion int
	err = q.QueryRowContext(ctx,
		`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'`).Scan(&hasVersion)
	if err != nil {
		return 0, false, err
	}
	if hasVersion == 0 {
		var others int
		err := q.QueryRowContext(ctx,
			`SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'`).Scan(&others)
		if err != nil {
			return 0, false, err
		}
		if others > 0 {
			return 0, false, fmt.Errorf("not a quicbench database (it has %d tables or indexes but no schema_version table)", others)
		}
		return 0, true, nil
	}
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, false, err
	}
	current = int(v.Int64)
	if current > len(migrations) {
		return 0, false, fmt.Errorf("database schema version %d is newer than this quicbench knows (%d): use a newer quicbench to read it", current, len(migrations))
	}
	return current, false, nil
}

// migrate brings the schema up to the newest version in one transaction.
func (db *DB) migrate(ctx context.Context) error {
	return db.withTx(ctx, func(tx *sql.Tx) error {
		current, empty, err := schemaState(ctx, tx)
		if err != nil {
			return err
		}
		if empty {
			if _, err := tx.ExecContext(ctx, `CREATE TABLE schema_version (
				version    INTEGER PRIMARY KEY,
				applied_ns INTEGER NOT NULL)`); err != nil {
				return err
			}
		}
		for v := current; v < len(migrations); v++ {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrating schema to version %d: %w", v+1, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_ns) VALUES (?, ?)`,
				v+1, time.Now().UnixNano()); err != nil {
				return err
			}
		}
		return nil
	})
}

// Version returns the schema version recorded in the database.
func (db *DB) Version(ctx context.Context) (int, error) {
	var v int
	err := db.r.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v)
	return v, err
}
