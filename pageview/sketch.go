package pageview

import (
	"fmt"

	"github.com/DataDog/sketches-go/ddsketch"
)

// SketchAccuracy is the relative error of every percentile rtmon reports
// from a stream: 0.5% keeps a 3 s SYN-loss peak apart from its neighbours
// at a few KB a sketch.
const SketchAccuracy = 0.005

// NewSketch returns an empty DDSketch with SketchAccuracy, so that the
// per-class table here and the run summary (package export) agree on how
// close their percentiles are.
func NewSketch() *ddsketch.DDSketch {
	s, err := ddsketch.NewDefaultDDSketch(SketchAccuracy)
	if err != nil {
		panic(fmt.Sprintf("ddsketch accuracy %v: %v", SketchAccuracy, err)) // a constant: cannot fail
	}
	return s
}
