package eviction

import "errors"

var (
	// ErrBadProfile is returned by New and ComputeProfile.Validate for a
	// profile with a negative or non-finite field.
	ErrBadProfile = errors.New("invalid compute profile")
	// ErrBadConfig is returned by New for a Config with a negative
	// HalfLife.
	ErrBadConfig = errors.New("invalid eviction config")
	// ErrUnknownKind is returned by New for a Kind it does not implement.
	ErrUnknownKind = errors.New("unknown eviction policy kind")
	// ErrBadSummary is returned by Summary.UnmarshalBinary for bytes that are
	// not an encoded Summary (wrong length or version).
	ErrBadSummary = errors.New("malformed value summary")
	// ErrBadCapacity is returned by ComputeCutoffs when the summaries and
	// capacities differ in number or a capacity is negative.
	ErrBadCapacity = errors.New("capacities do not match summaries")
)
