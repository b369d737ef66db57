package query

import "errors"

// Errors a caller may act on, matched with errors.Is; every other error is
// a storage or validation failure with its context in the text. Package
// store re-exports them as the same values.
var (
	// ErrNotFound: the record asked for by id is not stored.
	ErrNotFound = errors.New("not found")
	// ErrClosed: a write came after Close; nothing was queued.
	ErrClosed = errors.New("store closed")
)
