package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

// Config says where packets come from, how they are reconstructed and
// grouped, and where the records go. It holds values, plus the few live
// objects a caller shares with the pipeline (an open Store, extra Sinks, a
// Feed); DefaultConfig fills in the defaults.
type Config struct {
	// Files are capture files (pcap or pcapng, optionally gzip'd), merged
	// in timestamp order, read with FileReader.
	Files      []string
	FileReader capture.FileReader
	// Interfaces are captured live with libpcap instead (merged into one
	// stream) with Capture's options. Live input ends only when the
	// pipeline is stopped or its context ends, and that is no error.
	Interfaces []string
	Capture    capture.LiveOptions

	Tracker reconstruct.Config
	Grouper pageview.Config
	// ClassesFile is a client classes file (YAML, see
	// pageview.LoadClasses); empty puts every client in the default class.
	ClassesFile string

	// OutDir, if set, receives connections, transactions and pageviews
	// record files in Format.
	OutDir string
	Format export.Format
	// HARDir, if set, receives one HAR file per pageview.
	HARDir string

	// StoreURL, if set, is a store (see store.Open) the pipeline opens with
	// StoreOptions, fills, flushes and closes.
	StoreURL     string
	StoreOptions store.Options
	// Store, if set instead, is an open store that receives every record;
	// the pipeline flushes it at the end but leaves it open for its owner
	// (rtmon live and demo serve the UI from it).
	Store Store

	// Sinks receive every record and pageview too, after the Grouper.
	Sinks []pageview.Sink
	// Feed, if set, gets live counters and points for the web UI's live
	// page, within 2 s of the traffic.
	Feed *web.LiveFeed
	// Progress, if set, is called from the packet loop now and then with
	// the input bytes read so far and their total (0 for live capture).
	Progress func(done, total int64)
}

// Store is what the pipeline needs of a store: it takes every record, and
// is flushed and asked for its counters at the end.
type Store interface {
	pageview.Sink
	Flush(ctx context.Context) error
	Stats() store.WriterStats
}

// DefaultConfig is rtmon analyze's configuration without its inputs and
// outputs: set Files or Interfaces, and where the records should go.
func DefaultConfig() Config {
	return Config{
		FileReader: capture.ReaderPcapgo,
		Capture:    capture.LiveOptions{Filter: "tcp", ImmediateMode: true},
		Tracker:    reconstruct.Config{MaxConnections: reconstruct.DefaultMaxConnections, IdleTimeout: reconstruct.DefaultIdleTimeout},
		Format:     export.JSONL,
	}
}

// live reports whether the input is live capture.
func (c *Config) live() bool { return len(c.Interfaces) > 0 }

func (c *Config) check() error {
	switch {
	case len(c.Files) == 0 && len(c.Interfaces) == 0:
		return errors.New("pipeline: no input: set Files or Interfaces")
	case len(c.Files) > 0 && len(c.Interfaces) > 0:
		return errors.New("pipeline: both Files and Interfaces set: one input at a time")
	case c.StoreURL != "" && c.Store != nil:
		return errors.New("pipeline: both StoreURL and Store set")
	}
	if c.OutDir != "" {
		if c.Format == "" {
			c.Format = export.JSONL
		}
		f, err := export.ParseFormat(string(c.Format))
		if err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		c.Format = f
	}
	return nil
}
