// Package whatif predicts what RLM management actions would have done to the
// response times clients perceived. It replays the reconstructed
// connections, transactions and pageviews of a capture under rules such as
//
//	IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN
//
// and gives, per client class, the measured and the predicted response-time
// distribution. The actions are fast SYN and SYN/ACK retransmission
// (FAST SYN, FAST SYN/ACK, HALT FAST SYN), splicing (SPLICE), priority
// admission control (DROP SYN), and embedded-object removal and rewrite
// (REMOVE EMBEDS, REWRITE EMBEDS). The models, their assumptions and how the
// predictions were checked against runs with the actions really applied are
// in docs/whatif.md; each Action also states its assumptions itself
// (Action.Assumptions), for showing next to a result.
//
// # Records in
//
// A Dataset is one capture's records, immutable and ready to replay. It is
// made from a directory rtmon analyze --out wrote (Load), from a time range
// of a store (ReadStore, then Records.Dataset), or from records in memory
// (NewDataset):
//
//	ds, err := whatif.Load("out/")
//
//	recs, err := whatif.ReadStore(ctx, st, store.TimeRange{From: from, To: to}, whatif.ReadLimits{})
//	// recs.Loaded and recs.Notes() say what the read bounds left out.
//	ds, err := recs.Dataset()
//
// ReadStore needs only the two reads of Querier, which a store satisfies.
// The unit of response time is the pageview when the records have
// pageviews, else the transaction (Dataset.Pageviews).
//
// # Rules
//
// ParseRules reads one rule per line, # comments allowed; a syntax error is
// a *ParseError with the line and column. A Rule prints back in canonical
// syntax (Rule.String), which parses to the same rule:
//
//	rules, err := whatif.ParseRules("IF IP.SRC == * THEN FAST SYN GAP 200ms, SPLICE")
//	var pe *whatif.ParseError
//	if errors.As(err, &pe) { ... pe.Line, pe.Col ... }
//
// # Replay
//
// Evaluate replays the dataset under rules in capture time, judging each
// rule the way a live appliance would: when a unit arrives, against
// sliding-window response times of the units completed so far under the
// actions themselves. It returns a Result: per class (ClassResult) the Measured and Predicted Distribution
// (histogram over Options.Edges, percentiles, mean) and how many units an
// action touched, had a SYN dropped or failed; per unit (Result.Units) the
// measured and predicted time.
//
//	res, err := ds.Evaluate(rules, whatif.Options{Priorities: map[string]whatif.Priority{"premium": whatif.High}})
//	p := res.Class("premium").Predicted // p.P50, p.P90, p.Counts ...
//
// Options set the class priorities that RT_HIGH and RT_LOW pool (unlisted
// classes are Low; ParsePriority reads "premium=high"), the sliding window
// the RT conditions see, the client's SYN retransmission schedule and the
// histogram edges. Zero values take the documented defaults.
//
// # Ranking
//
// Rank replays candidate rule sets and orders them per class by the gain in
// mean response time, then by the cost to the other classes.
// StandardCandidates is the set worth trying when the user has no rules, and
// Pairs adds every union of two:
//
//	singles, err := ds.StandardCandidates(opts)
//	ranked, err := ds.Rank(whatif.Pairs(singles), opts)
//
// A Dataset may be replayed concurrently: Evaluate and Rank only read it,
// and Rank itself spreads its replays over the cores.
package whatif
