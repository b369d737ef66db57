// Package pageview groups transactions into pageviews (a container page and
// its embedded objects, fetched over several connections) and assigns clients
// to classes.
package pageview

import (
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

	// Start: the client began the pageview (its container connection's first
	// SYN, or the container request on a reused connection). End: the last
	// object reached the client.
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

	Objects      int   `json:"objects"` // embedded objects (transactions other than the container)
	Connections  int   `json:"connections"`
	Bytes        int64 `json:"bytes"` // response bytes of all transactions
	SYNLosses    int   `json:"syn_losses"`
	SYNACKLosses int   `json:"synack_losses"`
	RetransBytes int64 `json:"retrans_bytes"`

	Flags     reconstruct.Flags `json:"-"`
	FlagNames []string          `json:"flags,omitempty"`

	// Transactions are the pageview's transactions (container first, then
	// in processing order, which is Start order), for consumers such as the
	// HAR writer. Not serialised. A sink that keeps the record for long
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
