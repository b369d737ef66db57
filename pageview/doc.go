// Package pageview groups transactions into pageviews (a container page and
// its embedded objects, fetched over several connections) and assigns
// clients to classes.
//
// # The stage
//
// A Grouper is a reconstruct.Sink: put it after the tracker, and give it
// the Sink its output goes to. Every connection and transaction passes
// through, classified; each pageview follows as a record of its own when it
// closes:
//
//	classes, err := pageview.LoadClasses("classes.yaml") // or nil: everyone in the default class
//	g := pageview.NewGrouper(pageview.Config{}, classes, out)
//	tracker := reconstruct.NewTracker(reconstruct.Config{}, g)
//	g.WatchInFlight(tracker) // pages wait for objects still connecting
//	// ... tracker.Packet(&p) for every packet, or tracker.ReadFrom(src, nil) ...
//	tracker.Flush() // end of input: the tracker first,
//	g.Flush()       // then the Grouper
//
// Package pipeline does this wiring for rtmon's commands.
//
// # Sinks
//
// A Sink takes connections, transactions and pageviews. Tee fans them out;
// Records adapts a record-only reconstruct.Sink (a record file writer) and
// drops the pageviews; ClassSummary keeps per-class counts and pageview
// percentiles:
//
//	sum := pageview.NewClassSummary()
//	out := pageview.Tee{pageview.Records(recordWriter), pageviewWriter, harDir, sum}
//
// The Grouper stamps what consumers need on the records themselves: Class
// on connections, Class and Priority on transactions (PageviewID too, empty
// for a stand-alone one), and the container's Class and Priority on the
// pageview. A Pageview's Transactions are its members, for a HAR writer;
// they are not serialised, and a sink that keeps the record should drop
// them.
//
// # Classes
//
// Classes assigns a client address to a class by ordered rules (CIDR
// prefixes, RLM wildcard patterns such as "IP.SRC == 10.4.*.*", negation;
// package addrpattern), the first match winning. The Grouper classifies
// each record once, on arrival. A stage that must see the class before the
// Grouper (a live counter) gets it from Classify put in front of it; the
// Grouper then keeps that class.
//
// # Timing
//
// A pageview starts when the client began its first redirect or its
// container and ends where the browser's load event would fire; its Total
// is split along the critical path of its transactions (CriticalPath) into
// connect, server, transfer and other time, which add up to Total exactly
// (see Pageview.Invariants). NewSketch is the percentile sketch every
// streaming summary in rtmon uses, so their accuracy agrees. The grouping
// rules are documented on Grouper.
package pageview
