package web

// Wiring the UI into a command.
//
// Over a store (rtmon serve, rtmon demo after analyzing into the store):
//
//	srv, err := web.NewServer(web.Config{Store: st}) // 127.0.0.1:8080
//	if err != nil { return err }
//	fmt.Println("rtmon UI on", srv.URL())            // binds now; port 0 works
//	return srv.Run(ctx)                               // until ctx ends
//
// Live (rtmon live): one LiveFeed, fed twice along the pipeline so the live
// chart follows traffic within 2 s (the grouper holds transactions for its
// Settle time) and pageviews still get counted:
//
//	feed := web.NewLiveFeed()
//	classify := func(a netip.Addr) string { n, _ := classes.Classify(a); return n }
//	grouper := pageview.NewGrouper(pcfg, classes, feed.Observe(st))
//	tracker := reconstruct.NewTracker(rcfg, feed.Tap(grouper, classify))
//	grouper.WatchInFlight(tracker)
//	go feed.Run(ctx, time.Second, func() web.PipelineStats {
//		// Called on Run's goroutine: return a snapshot the packet loop
//		// refreshes (the tracker and source are not safe for concurrent use).
//		return web.StatsFrom(srcStats, trackerStats, st.Stats())
//	})
//	srv, err := web.NewServer(web.Config{Store: st, Live: feed, Listen: addr, Token: tok})
//
// Without Tap, Observe alone counts transactions too (after the grouper's
// delay). Publish can also be called directly with a hand-made LiveEvent.
//
// Routes (all GET/HEAD but POST /api/annotations; anything else is 405):
//
//	/                      overview (?last=15m|from=&to=, class, kind, component)
//	/search                search (kind, id, client, class, url, status, comp with min/max [ms, max exclusive], range, page)
//	/pageview/:id          waterfall and headers
//	/tx/pageview           redirect from a transaction to its pageview
//	/whatif, /whatif/api   what-if page and its JSON API, if Config.WhatIf is set (nav slot otherwise)
//	/api/meta, /api/overview, /api/search, /api/pageview/:id, /api/live (SSE)
//	/api/annotations (GET ?from=&to=; POST JSON {text, time, tags, class})
//	/export/search.csv, /export/search.json (search parameters), /export/har/:id.har,
//	/export/report.html, /export/report.pdf (overview parameters)
//	/metrics, /healthz
//
// Overview cost: below Config.ExactBelow transactions (1M), or over a store
// whose writer does not keep rollups (store.Options.Rollups "off"), every
// chart is an exact aggregate over the selected range; from 1M on, the
// total's distribution, percentiles, series, breakdown and counters come
// from query.Summary's per-minute and hourly rollups (counts and
// histograms exact, percentiles within 0.76%, said on the page) and only
// the three top lists scan the records. The overview cache shares one
// computation between browsers for 5 s. BenchmarkOverviewFirstRender, 10M
// transactions over one day, whole range, no answer cache, this 2-core box
// (2026-11-30): DuckDB 0.29-0.31 s from navigation to the last chart drawn
// (0.91-1.02 s exact, rollups off); ClickHouse 18.16 0.82-0.86 s once the load's
// merges settled (0.80-1.38 s while they ran; 2.9 s exact: ten scans of 10M
// rows). The breakdown is additive component means (one sum scan) rather
// than per-component percentiles (four selections).
