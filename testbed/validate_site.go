package testbed

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/rtmon/rtmon/whatif"
)

// The validation site, its variants (no embeds, rewritten embeds) and the
// table of measured against predicted times.

// ValidationSite is the site every validation run serves: GenerateSite's
// pages, each with at least one BigImage object (so REWRITE EMBEDS has
// something to shrink on every page, not only on every third) and at most
// maxValidateObjects objects, so every object has a connection of its own
// at once: a seventh object would wait for whichever connection frees first
// and add a handshake or not, the same lottery loadFresh avoids.
func ValidationSite(seed uint64) *Site {
	s := GenerateSite(12, seed)
	for i := range s.Pages {
		p := &s.Pages[i]
		p.Objects = p.Objects[:min(len(p.Objects), maxValidateObjects)]
		big := false
		for _, o := range p.Objects {
			big = big || o.Size >= BigImage
		}
		if !big {
			o := &p.Objects[len(p.Objects)-1]
			o.Size = BigImage
			s.Content[o.Path] = objectBody(o.Path, objectExt(o.Path), o.Size)
		}
		s.Content[p.Path] = pageHTML(*p)
	}
	return s
}

// maxValidateObjects is the Go client's connection limit.
const maxValidateObjects = 6

func objectExt(path string) string {
	return strings.TrimPrefix(filepath.Ext(path), ".")
}

// WithoutEmbeds is REMOVE EMBEDS applied: every container under its path,
// referencing no objects.
func (s *Site) WithoutEmbeds() *Site {
	out := &Site{Content: map[string][]byte{}}
	for p, b := range s.Content {
		out.Content[p] = b
	}
	for _, p := range s.Pages {
		q := Page{Path: p.Path}
		out.Content[q.Path] = pageHTML(q)
		out.Pages = append(out.Pages, q)
	}
	return out
}

// Rewritten is REWRITE EMBEDS ABOVE above RATIO ratio applied: objects whose
// body exceeds above bytes shrink to ratio of it (same paths, same types).
func (s *Site) Rewritten(above int64, ratio float64) *Site {
	out := &Site{Content: map[string][]byte{}}
	for p, b := range s.Content {
		out.Content[p] = b
	}
	for _, p := range s.Pages {
		q := Page{Path: p.Path}
		for _, o := range p.Objects {
			if int64(o.Size) > above {
				o.Size = int(math.Round(float64(o.Size) * ratio))
				out.Content[o.Path] = objectBody(o.Path, objectExt(o.Path), o.Size)
			}
			q.Objects = append(q.Objects, o)
		}
		out.Content[q.Path] = pageHTML(q)
		out.Pages = append(out.Pages, q)
	}
	return out
}

// WriteValidateClasses writes ValidateClasses into dir and returns its path.
func WriteValidateClasses(dir string) (string, error) {
	path := filepath.Join(dir, "classes.yaml")
	if err := os.WriteFile(path, []byte(ValidateClasses), 0o644); err != nil {
		return "", fmt.Errorf("classes file: %w", err)
	}
	return path, nil
}

// ValidationRow is one line of the table: an action's predicted and
// measured median and 90th percentile for one class.
type ValidationRow struct {
	Action string
	Class  string
	// Predicted from the baseline run; Truth: the clients' own clocks in the
	// applied run; Rtmon: rtmon's pageviews of the applied run (N 0 when it
	// has none, e.g. connections that never opened).
	Baseline, Predicted, Truth, Rtmon whatif.Distribution
}

// relErr is the relative error of a predicted value against a measured one.
func relErr(pred, meas int64) float64 {
	if meas == 0 {
		return math.Inf(1)
	}
	return float64(pred-meas) / float64(meas)
}

// ErrP50 and ErrP90 compare the prediction with the clients' truth.
func (r ValidationRow) ErrP50() float64 { return relErr(r.Predicted.P50, r.Truth.P50) }

func (r ValidationRow) ErrP90() float64 { return relErr(r.Predicted.P90, r.Truth.P90) }

// FormatValidationTable renders rows as a fixed-width table (seconds).
func FormatValidationTable(rows []ValidationRow) string {
	var b strings.Builder
	sec := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e9) }
	opt := func(d whatif.Distribution, ns int64) string {
		if d.N == 0 {
			return "-"
		}
		return sec(ns)
	}
	fmt.Fprintf(&b, "%-44s %-5s %6s %6s | %6s %6s | %6s %6s %4s | %6s %6s | %6s %6s %4s\n",
		"action", "class", "base50", "base90", "pred50", "pred90", "meas50", "meas90", "n", "err50%", "err90%",
		"rtm50", "rtm90", "n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-44s %-5s %6s %6s | %6s %6s | %6s %6s %4d | %+6.1f %+6.1f | %6s %6s %4d\n",
			r.Action, r.Class, opt(r.Baseline, r.Baseline.P50), opt(r.Baseline, r.Baseline.P90),
			sec(r.Predicted.P50), sec(r.Predicted.P90), sec(r.Truth.P50), sec(r.Truth.P90), r.Truth.N,
			100*r.ErrP50(), 100*r.ErrP90(), opt(r.Rtmon, r.Rtmon.P50), opt(r.Rtmon, r.Rtmon.P90), r.Rtmon.N)
	}
	return b.String()
}
