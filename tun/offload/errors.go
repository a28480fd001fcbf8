package offload

import "errors"

var (
	// ErrMalformed is wrapped by every error about input that is not a
	// well-formed packet or header of the kind it claims to be.
	ErrMalformed = errors.New("offload: malformed packet")
	// ErrShortBuffer is wrapped by every error about caller-provided output
	// buffers (out, sizes, arena) that are too few or too small.
	ErrShortBuffer = errors.New("offload: output buffers too small")
)
