package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/rtmon/rtmon/whatif"
)

// exportPick is the rule set --export-rules writes and where it stands:
// the ranking's entry at --export-rank for --export-class (the first
// high-priority class by default, as on the what-if page), or the rules
// given when nothing was ranked.
func exportPick(rep *whatifReport, rules []whatif.Rule, rank int, class string, prios map[string]whatif.Priority) ([]whatif.Rule, *whatif.Ranked, error) {
	if len(rep.Ranking) == 0 {
		if len(rules) == 0 {
			return nil, nil, fmt.Errorf("--export-rules: nothing was ranked and no rules were given")
		}
		return rules, nil, nil
	}
	if class == "" {
		var classes []string
		for _, r := range rep.Ranking {
			if len(classes) == 0 || classes[len(classes)-1] != r.Class {
				classes = append(classes, r.Class)
			}
		}
		class = classes[0]
		for _, c := range classes {
			if prios[c] == whatif.High {
				class = c
				break
			}
		}
	}
	var ranked []whatif.Ranked
	for _, r := range rep.Ranking {
		if r.Class == class {
			ranked = append(ranked, r)
		}
	}
	if len(ranked) == 0 {
		return nil, nil, fmt.Errorf("--export-class %q: no such class in the ranking", class)
	}
	if rank < 1 || rank > len(ranked) {
		return nil, nil, fmt.Errorf("--export-rank %d: the ranking for %s has %d entries", rank, class, len(ranked))
	}
	pick := ranked[rank-1]
	rs, err := whatif.ParseRules(strings.Join(pick.Rules, "\n"))
	if err != nil {
		return nil, nil, fmt.Errorf("--export-rules: ranked rules: %w", err)
	}
	return rs, &pick, nil
}

// exportWhatifRules writes the picked rule set with its prediction to
// o.exportRules ("-": stdout).
func exportWhatifRules(stdout io.Writer, d *whatif.Dataset, rep *whatifReport, rules []whatif.Rule, opts whatif.Options, o whatifOptions) error {
	rs, ranked, err := exportPick(rep, rules, o.exportRank, o.exportClass, opts.Priorities)
	if err != nil {
		return err
	}
	res, err := d.Evaluate(rs, opts)
	if err != nil {
		return fmt.Errorf("--export-rules: %w", err)
	}
	from, to := d.Span()
	pv, _ := d.UnitCounts()
	e := whatif.Export{Rules: rs, Result: res, Ranked: ranked, Rank: o.exportRank, From: from, To: to,
		Transactions: d.Transactions(), Pageviews: pv, Connections: -1, Source: o.source()}
	if o.exportRules == "-" {
		return whatif.WriteRulesFile(stdout, e)
	}
	f, err := os.Create(o.exportRules)
	if err != nil {
		return fmt.Errorf("--export-rules: %w", err)
	}
	if err := whatif.WriteRulesFile(f, e); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--export-rules: %w", err)
	}
	return nil
}

// source names the records for the export's comments; a store URL's
// password is left out.
func (o whatifOptions) source() string {
	switch {
	case o.storeURL != "":
		if u, err := url.Parse(o.storeURL); err == nil {
			u.RawQuery, u.Fragment = "", "" // may carry credentials too
			return "store " + u.Redacted()
		}
		return "store"
	case len(o.captures) > 0:
		return "captures " + strings.Join(o.captures, ", ")
	}
	return "records " + o.records
}
