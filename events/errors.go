package events

import "errors"

// ErrAuth is the reason a subscriber's PLAIN credentials were refused: the
// user is not the stream's tenant or the password not its token.
var ErrAuth = errors.New("events: credentials refused")

// ErrClosed is returned by Publisher calls after Close.
var ErrClosed = errors.New("events: publisher closed")
