package model

// Evidence is a file kept with a sample for a reviewer to open: its packet
// capture, its TLS key log, its qlogs. `quicbench evidence` writes them
// out; the store keeps them with the sample (docs/data.md, table
// evidence) but does not load them with a dataset.
type Evidence struct {
	// Name is the file's name, unique within the sample, e.g.
	// "capture.pcapng".
	Name string
	Kind string // one of the Evidence* kinds
	// The content: Data, or the file at Path, read when the sample is
	// stored (a capture can be large).
	Data []byte
	Path string
}

// Kinds of evidence.
const (
	EvidenceCapture = "capture" // pcapng of the sample's packets (capture: pcap)
	EvidenceKeyLog  = "keylog"  // TLS secrets of the sample's connections (SSLKEYLOGFILE format)
	EvidenceQlog    = "qlog"    // a QUIC connection's qlog
	EvidenceHAR     = "har"     // a browser sample's page load as HAR 1.2 (capture: har)
)
