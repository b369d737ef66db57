// Package stitch groups the transactions that several sensors stored into
// pageviews per client across sensors, and puts each pageview that spans
// sensors in the place of the partial ones each sensor made.
//
// A client's connections can land on different front ends, each watched by
// its own sensor, so a sensor may see a page's container and another its
// objects. Run reads every sensor's records of a time range from the store,
// a window at a time, feeds one partition's clients to the pageview
// package's Grouper (the live pipeline's grouping, unchanged), and writes
// back what changed: see docs/pageviews.md, "Stitching across sensors".
package stitch

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
)

// Config is one stitching run.
type Config struct {
	// From and To bound the pageview starts stitched, [From, To), ns since
	// the epoch. Run resumes past From from the partition's checkpoint
	// unless IgnoreCheckpoint; From 0 means "from the checkpoint" and
	// needs one.
	From, To         int64
	IgnoreCheckpoint bool
	// Window is how much time one pass reads and writes (default 10 min):
	// memory is bounded by one window's records plus twice Margin.
	Window time.Duration
	// Margin is read on both sides of a window (default 3 min): a
	// pageview starting in the window is complete if it spans less, and
	// one starting before it was left to the window before. It should
	// exceed the Grouper's InFlightWait (130 s), the longest a page stays
	// open.
	Margin time.Duration
	// Part of Parts: the clients whose address hashes to Part modulo
	// Parts (default 0 of 1). Runs of every part, side by side, together
	// do what one run of 0/1 does.
	Part, Parts int
	// MaxRecords bounds the records one window reads (default 4,000,000);
	// past it the run fails, asking for a smaller Window or more Parts.
	MaxRecords int
	Grouper    pageview.Config
	// Classes assign the classes and priorities of clients (nil: the
	// default class), as the sensors' classes file.
	Classes *pageview.Classes
}

// Defaults for Config's zero values.
const (
	DefaultWindow     = 10 * time.Minute
	DefaultMargin     = 3 * time.Minute
	DefaultMaxRecords = 4000000
)

func (c *Config) defaults() error {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Margin <= 0 {
		c.Margin = DefaultMargin
	}
	if c.Parts <= 0 {
		c.Parts = 1
	}
	if c.MaxRecords <= 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.To <= c.From {
		return fmt.Errorf("stitch: empty range [%d, %d)", c.From, c.To)
	}
	return nil
}

// Stats counts what a run did.
type Stats struct {
	Windows      int   `json:"windows"`
	Transactions int   `json:"transactions"` // of the partition, margins included
	Pageviews    int   `json:"pageviews"`    // grouped, starting in the windows
	Stitched     int   `json:"stitched"`     // seen by more than one sensor
	Written      int   `json:"written"`      // stored anew (stitched, and those they took members from)
	Deleted      int   `json:"deleted"`      // stored pageviews replaced
	Resumed      int64 `json:"resumed"`      // the checkpoint the run began at (0: none)
	Done         int64 `json:"done"`         // where the run stopped: all before is stitched
}

// CheckpointName is the name a partition's progress is kept under.
func CheckpointName(part, parts int) string { return fmt.Sprintf("partition %d/%d", part, parts) }

// ErrNoStart: no From and no checkpoint to resume from.
var ErrNoStart = errors.New("stitch: no start: give a start time or run once with one")

// Run stitches [From, To) window by window, recording the partition's
// checkpoint after each.
func Run(ctx context.Context, st *store.Stitching, cfg Config) (Stats, error) {
	var stats Stats
	if cfg.Parts <= 0 {
		cfg.Parts = 1
	}
	if cfg.Part < 0 || cfg.Part >= cfg.Parts {
		return stats, fmt.Errorf("stitch: partition %d/%d: want 0 <= k < n", cfg.Part, cfg.Parts)
	}
	name := CheckpointName(cfg.Part, cfg.Parts)
	if !cfg.IgnoreCheckpoint {
		t, ok, err := st.Checkpoint(ctx, name)
		if err != nil {
			return stats, err
		}
		if ok && t > cfg.From {
			cfg.From, stats.Resumed = t, t
		}
	}
	if cfg.From == 0 {
		return stats, ErrNoStart
	}
	stats.Done = cfg.From
	if cfg.To <= cfg.From {
		return stats, nil // already done
	}
	if err := cfg.defaults(); err != nil {
		return stats, err
	}
	for w0 := cfg.From; w0 < cfg.To; w0 += int64(cfg.Window) {
		w1 := min(w0+int64(cfg.Window), cfg.To)
		if err := stitchWindow(ctx, st, &cfg, w0, w1, &stats); err != nil {
			return stats, fmt.Errorf("stitch: window %s: %w", time.Unix(0, w0).UTC().Format(time.RFC3339), err)
		}
		if err := st.SetCheckpoint(ctx, name, w1); err != nil {
			return stats, err
		}
		stats.Windows++
		stats.Done = w1
	}
	return stats, nil
}

// InPart reports whether client belongs to partition part of parts: a hash
// of the address, so every sensor's records of one client meet in one part.
func InPart(client netip.Addr, part, parts int) bool {
	if parts <= 1 {
		return true
	}
	b := client.As16()
	h := fnv.New64a()
	h.Write(b[:])
	return h.Sum64()%uint64(parts) == uint64(part)
}
