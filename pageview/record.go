package pageview

import (
	"fmt"
	"net/netip"

	"github.com/rtmon/rtmon/reconstruct"
)

// Pageview is one page load as the client perceived it. Times are int64 ns
// since the epoch, durations int64 ns, as in package reconstruct.
type Pageview struct {
	ID        string     `json:"id"` // stable: derived from the container transaction's id
	Interface int        `json:"interface"`
	Client    netip.Addr `json:"client"`
	UserAgent string     `json:"user_agent,omitempty"`
	Class     string     `json:"class"`
	Priority  string     `json:"priority,omitempty"`
	Server    netip.Addr `json:"server"`
	Host      string     `json:"host,omitempty"`
	URL       string     `json:"url"` // the container's URL
	Status    int        `json:"status"`
	// ContainerID is the container transaction's id; empty for a pageview
	// made of objects whose container was never seen.
	ContainerID string `json:"container_id,omitempty"`

	// Start: the client began the pageview (the first SYN of its first
	// redirect's or its container's connection, or that request on a reused
	// connection). End: the last object the load waited for reached the
	// client, where the browser's load event fires.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	Total int64 `json:"total_ns"`
	// Components attributed along the critical path; they add up to Total.
	Tconn     int64 `json:"tconn_ns"`
	Tserver   int64 `json:"tserver_ns"`
	Ttransfer int64 `json:"ttransfer_ns"`
	// Tother is critical-path time no transaction accounts for (the client
	// parsing HTML before requesting objects, request upload, idle gaps).
	Tother int64 `json:"tother_ns"`

	// Objects counts the embedded objects the load waited for (container,
	// redirects and after-load requests excluded); AfterLoad the requests
	// that came after the load event (an undeclared favicon, beacons,
	// polling), which belong to the pageview but not to its Total;
	// Redirects the redirect responses before the container.
	Objects     int   `json:"objects"`
	AfterLoad   int   `json:"after_load"`
	Redirects   int   `json:"redirects"`
	Connections int   `json:"connections"`
	Bytes       int64 `json:"bytes"` // response bytes of the transactions in the load
	// Evidence is what the grouping rests on: "html" (the container's HTML
	// was read for the objects it references), "referer" (objects named
	// the page in their Referer) or "timing" (a time window alone).
	Evidence     string `json:"evidence"`
	SYNLosses    int    `json:"syn_losses"`
	SYNACKLosses int    `json:"synack_losses"`
	RetransBytes int64  `json:"retrans_bytes"`

	Flags reconstruct.Flags `json:"flags,omitempty"`

	// Declared is what the grouping read in the container's HTML and the
	// page's stylesheets, in the compact, bounded form stores keep so that
	// grouping again from them has the same evidence (see Grouper.Replay);
	// empty when nothing was read. Not in record files.
	Declared string `json:"-"`

	// Sensors are the sensors whose transactions the pageview holds, in
	// order: set by the store (a sensor's own pageview lists that sensor)
	// and by cross-sensor stitching (package stitch); empty from a Grouper.
	Sensors []string `json:"sensors,omitempty"`

	// Transactions are the pageview's transactions (container first, then
	// redirects, then objects in Start order; after-load ones carry
	// reconstruct.FlagAfterLoad), for consumers such as the HAR writer.
	// Not serialised. A sink that keeps the record for long
	// should nil this out so the transactions can be collected.
	Transactions []*reconstruct.Transaction `json:"-"`
}

// Sink receives the pageview stage's output: every transaction and
// connection passes through (with PageviewID and Class set), plus the
// pageviews themselves.
type Sink interface {
	reconstruct.Sink
	Pageview(*Pageview)
}

// Invariants reports the first rule of the record contract the pageview
// breaks, or nil: every component >= 0, the components add up to Total,
// Total == End - Start (so End >= Start), no negative count.
func (p *Pageview) Invariants() error {
	if err := reconstruct.CheckTiming("pageview", p.ID, p.Start, p.End, p.Total, []string{"tconn", "tserver", "ttransfer", "tother"},
		[]int64{p.Tconn, p.Tserver, p.Ttransfer, p.Tother}); err != nil {
		return err
	}
	if p.Objects < 0 || p.AfterLoad < 0 || p.Redirects < 0 || p.Connections < 0 || p.Bytes < 0 {
		return fmt.Errorf("pageview %s: negative count", p.ID)
	}
	return nil
}
