package store

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Options tune a store. Zero values take the defaults noted; nothing is read
// from the environment.
type Options struct {
	Sensor string // written into every row; default ""
	// BatchRows flushes when this many records are buffered. Default and
	// bounds are the engine's: ClickHouse 600,000, kept within 10k-600k
	// (fewer makes too many parts, more too much to resend after a
	// failure); DuckDB 800,000, which writes whole row groups straight to
	// the file.
	BatchRows int
	// MaxAge flushes a non-empty buffer this old (default 2 s).
	MaxAge time.Duration
	// MaxBufferRows bounds records held in memory while the engine fails
	// (default 1,000,000); beyond it batches go to SpillDir. While the
	// engine is healthy but behind, writers wait for room instead (bounded,
	// see README), so the bound can be exceeded by about one batch.
	MaxBufferRows int
	// SpillDir receives batches the engine could not take, in files only
	// its owner can read (0600, in a directory created 0700): they hold
	// captured URLs and addresses. Default for ClickHouse:
	// <user cache dir>/rtmon/spill/<host>_<port>_<db> (~/.cache on Linux);
	// "-" disables spilling (writers then block when the buffer is full).
	// Default for a DuckDB file: <file>.spill (a full disk under both gives
	// backpressure; set it to put spills on another file system); an
	// in-memory DuckDB does not spill unless set.
	SpillDir string
	// MaxSpillBytes bounds the spill files (default 8 GiB). Past it, or
	// when spilling fails (a full disk), writers block when the buffer is
	// full, as without a spill directory: backpressure, not loss.
	MaxSpillBytes int64
	// MaxBackoff caps the retry backoff (default 10 s; first retry 100 ms).
	MaxBackoff time.Duration
	// CloseTimeout bounds the final flush in Close (default 30 s).
	CloseTimeout time.Duration
	// TTL drops data older than this (by day, wall clock); 0 keeps all.
	// ClickHouse 18.16 has no table TTL, so both engines drop whole days.
	TTL time.Duration
	// Classify gives the class of a transaction whose Class is empty (the
	// pageview stage always sets Class, so this serves callers writing bare
	// transactions). Without it such a transaction takes its connection's
	// class from the same batch, else the last class seen for its client
	// on a connection or pageview.
	Classify func(client netip.Addr) string
	// ConnectTimeout bounds reaching a server at Open (default 5 s).
	ConnectTimeout time.Duration
	// Rollups: "on" (the default, also "") makes the writer keep the
	// per-minute rollups that Summary reads current (Flush then waits for
	// them too); "off" leaves them to readers, which recompute stale
	// minutes when they ask, and keeps the web overview exact. On costs
	// ClickHouse ~12% of its ingest rate and DuckDB 3-8%, and takes the
	// overview over 10M transactions from 2.9 to 0.9 s (ClickHouse) and
	// from ~1 to 0.3 s (DuckDB).
	Rollups string
	// Logger receives what the store cannot return to a caller: failed
	// background retention passes (Warn) and the writer's per-batch
	// timings (Debug). Default slog.Default().
	Logger *slog.Logger
	// shards replaces cluster mode's shard router (tests).
	shards shardSink
}

// check refuses values that have no meaning.
func (o *Options) check() error {
	if err := checkSensorName(o.Sensor); err != nil {
		return err
	}
	switch o.Rollups {
	case "", "on", "off":
		return nil
	}
	return fmt.Errorf("rollups %q: want on or off", o.Rollups)
}

// defaults fills the zero values the engines share; BatchRows and SpillDir
// are the engine's (see backend).
func (o *Options) defaults() {
	if o.MaxAge <= 0 {
		o.MaxAge = 2 * time.Second
	}
	if o.MaxBufferRows <= 0 {
		o.MaxBufferRows = 1000000
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.MaxSpillBytes <= 0 {
		o.MaxSpillBytes = 8 << 30
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.Rollups == "" {
		o.Rollups = "on"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// keepRollups: the writer recomputes the rollups of what it stores.
func (o *Options) keepRollups() bool { return o.Rollups == "on" }

// checkSensorName refuses a sensor name that rows could not carry as it
// is: longer than the column keeps, or with a comma (a stitched
// pageview's sensors are a comma-separated list) or a control character.
func checkSensorName(name string) error {
	if len(name) > maxSensorOrPri || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool {
		return r == ',' || unicode.IsControl(r)
	}) {
		return fmt.Errorf("sensor name %q: want at most %d bytes of text without commas", name, maxSensorOrPri)
	}
	return nil
}
