// Package pipeline runs rtmon's measurement end to end: packets from capture
// files or live interfaces (package capture) are reassembled into
// connections and HTTP transactions (package reconstruct), grouped into
// pageviews and classified (package pageview), and written to record files,
// HAR files, a store and any extra sinks, while a run summary and a
// per-class table are kept. rtmon analyze, live, demo and the what-if
// command's capture input are this package with their flags turned into a
// Config.
//
// # Configuring
//
// Start from DefaultConfig and set the input and the outputs:
//
//	cfg := pipeline.DefaultConfig()
//	cfg.Files = []string{"monday.pcap.gz"}      // or cfg.Interfaces = []string{"eth0"}
//	cfg.ClassesFile = "classes.yaml"            // optional
//	cfg.OutDir, cfg.Format = "out", export.CSV  // connections.csv, transactions.csv, pageviews.csv
//	cfg.HARDir = "out/har"                      // one HAR file per pageview
//	cfg.StoreURL = "duckdb:rtmon.duckdb"        // opened, filled, flushed and closed
//
// A store the caller keeps open (to serve the web UI from it while the
// records arrive) goes in Store instead: the pipeline flushes it at the end
// and leaves closing it to its owner. Sinks take every record after the
// pageview stage, classified. Feed feeds the web UI's live page.
//
// # Running
//
// New only checks the Config (and reads the classes file); Start opens the
// source and the outputs and runs the packet loop on its own goroutine:
//
//	p, err := pipeline.New(cfg)
//	if err != nil { ... }
//	if err := p.Start(ctx); err != nil { ... } // a missing file, a bad interface
//	err = p.Wait()                             // or <-p.Done(); or p.Stop()
//	var partial *pipeline.ReadError
//	switch {
//	case errors.As(err, &partial): // the input ended early; everything before it was written
//	case err != nil:               // an output failed
//	}
//	p.WriteSummary(os.Stdout)      // or read p.Summary() and p.ClassSummary()
//
// File input ends at the end of the files; Stop, or the end of ctx,
// interrupts it (a *ReadError). Live input ends only by Stop or ctx, and
// that is its normal end. Stats may be called from any goroutine while the
// loop runs.
//
// # What is wired
//
//	source -> shards: Workers x (reconstruct.Tracker -> 64/Workers client-shard pageview.Groupers)
//	       -> merge -> Tee(summary, class table, record files, HAR, store, Sinks)
//
// The source is read on one goroutine, and each packet is dealt to a
// worker by a hash of its client's address (the endpoint that is not the
// server: see sharder), so a client's connections and pageviews stay in
// one of 64 client shards, each with its own Grouper. Every worker sees
// every clock tick (a second of capture time) at the same point of the
// input, and the records are merged in the order of the input events that
// made them, then by shard: the output is the same, byte for byte, for any
// number of workers. Each worker's tracker has 1/Workers of the tracker's
// bounds and each shard's Grouper 1/64 of the Grouper's, so only a run that
// reaches a memory bound can differ. At the end of the input the
// connections still open end a client shard at a time, the workers taking
// turns in shard order, and each shard's records go on before the next
// shard's are made: ending millions at once, or side by side, held their
// records faster than the collector freed what they came from.
//
// With a Feed, pageview.Classify and the feed's tap sit between each
// tracker and its Groupers (a Grouper holds transactions for seconds; the
// live chart must not), and the feed observes the merged output. With a
// ClientKeyFile, client addresses are anonymized right after the merge: the
// Groupers assigned the classes from the real ones, and the Tee, the feed
// and the Sinks see only the anonymized addresses.
package pipeline
