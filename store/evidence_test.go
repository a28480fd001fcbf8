package store

import (
	"bytes"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// bigEvidence is pseudo-random content longer than two chunks.
func bigEvidence() []byte {
	b := make([]byte, 2*evidenceChunk+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestEvidenceRoundTrip: evidence stored with a sample, from memory and
// from a file, in chunks, comes back byte for byte; it is listed per
// sample and per run, counted per kind, and absent from the dataset.
func TestEvidenceRoundTrip(t *testing.T) {
	db, _ := openTemp(t)
	r := testRun()
	if err := db.CreateRun(ctx, &r); err != nil {
		t.Fatal(err)
	}
	cells := testCells(3)
	if err := db.InsertCells(ctx, r.ID, cells); err != nil {
		t.Fatal(err)
	}
	big := bigEvidence()
	file := filepath.Join(t.TempDir(), "capture.pcapng")
	if err := os.WriteFile(file, big, 0o600); err != nil {
		t.Fatal(err)
	}
	s := fullSample(cells[0].ID, 0, 2)
	s.Evidence = []model.Evidence{
		{Name: "capture.pcapng", Kind: model.EvidenceCapture, Path: file},
		{Name: "keys.log", Kind: model.EvidenceKeyLog, Data: []byte("CLIENT_RANDOM a b\n")},
		{Name: "empty.qlog", Kind: model.EvidenceQlog, Data: []byte{}},
	}
	if err := db.InsertSample(ctx, &s); err != nil {
		t.Fatal(err)
	}
	other := fullSample(cells[1].ID, 0, 2)
	if err := db.InsertSample(ctx, &other); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Evidence(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []EvidenceInfo{
		{s.ID, "capture.pcapng", model.EvidenceCapture, int64(len(big))},
		{s.ID, "empty.qlog", model.EvidenceQlog, 0},
		{s.ID, "keys.log", model.EvidenceKeyLog, 18},
	}
	if len(evs) != len(want) {
		t.Fatalf("evidence %+v", evs)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Fatalf("evidence %d: %+v, want %+v", i, evs[i], want[i])
		}
	}
	var buf bytes.Buffer
	if n, err := db.CopyEvidence(ctx, s.ID, "capture.pcapng", &buf); err != nil || n != int64(len(big)) || !bytes.Equal(buf.Bytes(), big) {
		t.Fatalf("capture back: %d bytes, %v, equal %v", n, err, bytes.Equal(buf.Bytes(), big))
	}
	var chunks int
	db.r.QueryRowContext(ctx, `SELECT count(*) FROM evidence_chunks`).Scan(&chunks)
	if chunks != 3+1 { // the capture's 3 chunks, the key log's 1, none for the empty file
		t.Fatalf("%d chunks stored", chunks)
	}
	if _, err := db.CopyEvidence(ctx, other.ID, "capture.pcapng", &buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("evidence of a sample without: %v", err)
	}
	if all, _ := db.RunEvidence(ctx, r.ID); len(all) != 3 {
		t.Fatalf("run evidence %+v", all)
	}
	if n, _ := db.RunEvidenceBytes(ctx, r.ID, model.EvidenceCapture); n != int64(len(big)) {
		t.Fatalf("capture bytes %d", n)
	}
	if n, _ := db.RunEvidenceBytes(ctx, r.ID, ""); n != int64(len(big))+18 {
		t.Fatalf("evidence bytes %d", n)
	}
	ds, err := db.LoadDataset(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ds.Samples {
		if x.Evidence != nil {
			t.Fatal("a loaded sample carries its evidence")
		}
	}
	// A damaged file is refused, not silently short.
	db.w.ExecContext(ctx, `DELETE FROM evidence_chunks WHERE chunk = 1`)
	if _, err := db.CopyEvidence(ctx, s.ID, "capture.pcapng", &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a missing chunk: %v", err)
	}
}

// TestEvidenceRefusedWithTheSample: a bad evidence name or a missing file
// fails the insertion, and nothing of the sample is stored.
func TestEvidenceRefusedWithTheSample(t *testing.T) {
	db, _ := openTemp(t)
	r := testRun()
	db.CreateRun(ctx, &r)
	cells := testCells(1)
	db.InsertCells(ctx, r.ID, cells)
	for i, ev := range []model.Evidence{
		{Name: "../x", Kind: model.EvidenceQlog, Data: []byte("x")},
		{Name: "a/b", Kind: model.EvidenceQlog, Data: []byte("x")},
		{Name: "", Kind: model.EvidenceQlog, Data: []byte("x")},
		{Name: "c.pcapng", Kind: model.EvidenceCapture, Path: filepath.Join(t.TempDir(), "missing")},
		{Name: "both", Kind: model.EvidenceCapture, Path: "/etc/hostname", Data: []byte("x")},
	} {
		s := fullSample(cells[0].ID, i, 1)
		s.Evidence = []model.Evidence{ev}
		if err := db.InsertSample(ctx, &s); err == nil {
			t.Fatalf("evidence %+v accepted", ev)
		}
	}
	if n, _ := db.SampleCount(ctx, r.ID); n != 0 {
		t.Fatalf("%d samples stored", n)
	}
}

// TestMergeCarriesEvidence: merged shards keep their samples' evidence,
// byte for byte, under the samples' new IDs; export lists it.
func TestMergeCarriesEvidence(t *testing.T) {
	dir := t.TempDir()
	paths := []string{shardDB(t, dir, 1, 2, RunComplete, nil), shardDB(t, dir, 2, 2, RunComplete, nil)}
	big := bigEvidence()
	type key struct {
		cell string
		it   int
	}
	stored := map[key][]byte{}
	for i, p := range paths {
		db, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var sid int64
		var k key
		db.r.QueryRowContext(ctx, `SELECT s.id, c.key, s.iteration FROM samples s JOIN cells c ON c.id = s.cell_id ORDER BY s.id LIMIT 1`).Scan(&sid, &k.cell, &k.it)
		content := append([]byte{byte(i)}, big...)
		err = db.withTx(ctx, func(tx *sql.Tx) error {
			_, err := storeEvidence(ctx, tx, sid, "capture.pcapng", model.EvidenceCapture, bytes.NewReader(content))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		stored[k] = content
		db.Close()
	}
	out := filepath.Join(dir, "all.db")
	if _, err := Merge(ctx, out, paths, false); err != nil {
		t.Fatal(err)
	}
	m, err := OpenReadOnly(out)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	runs, _ := m.Runs(ctx)
	evs, err := m.RunEvidence(ctx, runs[0].ID)
	if err != nil || len(evs) != 2 {
		t.Fatalf("merged evidence %+v, %v", evs, err)
	}
	for _, e := range evs {
		var k key
		m.r.QueryRowContext(ctx, `SELECT c.key, s.iteration FROM samples s JOIN cells c ON c.id = s.cell_id WHERE s.id = ?`, e.SampleID).Scan(&k.cell, &k.it)
		var buf bytes.Buffer
		if _, err := m.CopyEvidence(ctx, e.SampleID, e.Name, &buf); err != nil || !bytes.Equal(buf.Bytes(), stored[k]) {
			t.Fatalf("sample %v: evidence differs after the merge (%v)", k, err)
		}
	}
	var csv bytes.Buffer
	if err := m.ExportTable(ctx, "evidence", FormatCSV, 0, &csv); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	if len(lines) != 3 || lines[0] != "run_id,sample_id,name,kind,bytes,path" || !strings.Contains(lines[1], ",capture.pcapng,capture,") ||
		!strings.HasSuffix(lines[1], "/capture.pcapng") {
		t.Fatalf("exported evidence:\n%s", csv.String())
	}
}
