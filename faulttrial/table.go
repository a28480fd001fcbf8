package faulttrial

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Row sums up the trials of one fault.
type Row struct {
	Fault     string
	Trials    int
	Survived  int
	Lost      int // samples reported stored and missing afterwards, over all trials
	Leftovers int // processes, namespaces, devices or locks left, over all trials
	// RecoverMedian and RecoverMax are over the trials (see Trial.Recover).
	RecoverMedian, RecoverMax time.Duration
}

// Table sums up trials per fault, in the order of Faults.
func Table(trials []Trial) []Row {
	var rows []Row
	for _, f := range Faults {
		r := Row{Fault: f}
		var rec []time.Duration
		for _, t := range trials {
			if t.Fault != f {
				continue
			}
			r.Trials++
			if t.Survived() {
				r.Survived++
			}
			r.Lost += t.Lost
			r.Leftovers += len(t.Left)
			if t.Recover > 0 {
				rec = append(rec, t.Recover)
			}
		}
		if r.Trials == 0 {
			continue
		}
		if len(rec) > 0 {
			slices.Sort(rec)
			r.RecoverMedian, r.RecoverMax = rec[len(rec)/2], rec[len(rec)-1]
		}
		rows = append(rows, r)
	}
	return rows
}

// Markdown renders rows as a Markdown table.
func Markdown(rows []Row) string {
	var b strings.Builder
	b.WriteString("| fault | trials | survived | samples lost | leftovers | time to recover (median / max) |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		rec := "-"
		if r.RecoverMax > 0 {
			rec = fmt.Sprintf("%s / %s", r.RecoverMedian.Round(10*time.Millisecond), r.RecoverMax.Round(10*time.Millisecond))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", r.Fault, r.Trials, r.Survived, r.Lost, r.Leftovers, rec)
	}
	return b.String()
}
