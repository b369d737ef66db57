package bench

import (
	"testing"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/synth"
)

// pageviewCheck collects what the grouper made of a bench capture.
type pageviewCheck struct {
	t                         *testing.T
	pageviews, objects, wrong int
	evidence                  map[string]int
	afterLoad                 int
}

func (c *pageviewCheck) Connection(*reconstruct.Connection)   {}
func (c *pageviewCheck) Transaction(*reconstruct.Transaction) {}

func (c *pageviewCheck) Pageview(p *pageview.Pageview) {
	c.pageviews++
	c.objects += p.Objects
	c.afterLoad += p.AfterLoad
	c.evidence[p.Evidence]++
	page := "http://" + p.Host + p.URL
	for _, tx := range p.Transactions[1:] { // container first
		if tx.Referer != page {
			c.wrong++
			c.t.Errorf("pageview %s (%s) holds %s, fetched for %s", p.ID, page, tx.URL, tx.Referer)
		}
	}
}

// TestBenchCaptureGroupsByHTML: the bench capture's container pages are
// markup naming their objects, so rtmon groups every pageview by its HTML,
// counts every object within its load and none after it.
func TestBenchCaptureGroupsByHTML(t *testing.T) {
	p := smallParams()
	p.TargetBytes = 20e6 // some 50 pageviews
	if !p.Workload().Markup {
		t.Fatal("bench workload without markup containers")
	}
	var truthPV, truthObjs int
	path := t.TempDir() + "/cap.pcap"
	err := synth.WriteFile(path, p.Options(), func(w *synth.Writer) error {
		_, err := synth.Generate(w, p.Workload(), func(r synth.TruthRecord) {
			if r.Container {
				truthPV++
			} else {
				truthObjs++
			}
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if truthPV == 0 || truthObjs == 0 {
		t.Fatalf("workload of %d pageviews, %d objects: nothing to check", truthPV, truthObjs)
	}
	src, err := capture.OpenFiles([]string{path}, capture.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := &pageviewCheck{t: t, evidence: map[string]int{}}
	g := pageview.NewGrouper(pageview.Config{}, nil, c)
	if err := reconstruct.NewTracker(reconstruct.Config{}, g).ReadFrom(src, nil); err != nil {
		t.Fatal(err)
	}
	g.Flush()
	if c.pageviews != truthPV || c.objects != truthObjs || c.afterLoad != 0 || c.evidence["html"] != truthPV {
		t.Errorf("grouped %d pageviews, %d objects, %d after load, evidence %v; the workload had %d pageviews, %d objects",
			c.pageviews, c.objects, c.afterLoad, c.evidence, truthPV, truthObjs)
	}
}
