package membership

import "errors"

var (
	// ErrInvalidConfig is returned by Start when the Config is rejected; the
	// wrapping error names the field.
	ErrInvalidConfig = errors.New("invalid membership configuration")
	// ErrNoSeed is returned by Start and Join when no seed answered before
	// the context (or Config.JoinTimeout) ran out; the wrapping error
	// carries the last failure. Start returns it only when
	// Config.AllowAlone is false.
	ErrNoSeed = errors.New("no seed reachable")
	// ErrMetaTooLarge is returned when the encoded metadata does not fit in
	// MaxMetaSize bytes. From Start nothing was started. From UpdateMeta it
	// has two cases, told apart by SummaryBudget: if the metadata without
	// its Summary fits (budget >= 0), it was broadcast without Summary;
	// otherwise the previous metadata stays in force.
	ErrMetaTooLarge = errors.New("node metadata too large")
	// ErrClosed is returned by operations on a Membership after Leave,
	// Shutdown or Close.
	ErrClosed = errors.New("membership closed")
)
