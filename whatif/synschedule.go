package whatif

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// SYNSchedule is how clients retransmit an unanswered SYN: the first wait,
// then each wait Growth times the one before (2: the doubling of Linux,
// Windows and the BSDs; 1: a stack with linear timeouts).
type SYNSchedule struct {
	Initial time.Duration `json:"initial_ns"`
	Growth  float64       `json:"growth"`
	// Source says where it came from: "client" (that client's own SYN
	// retransmissions), "class", "capture", "default" (no retransmission
	// in the capture: RFC 6298's 1 s, doubling) or "override"
	// (Options.SYNTimeout).
	Source string `json:"source"`
	// Samples: the retransmission gaps it was learned from.
	Samples int `json:"samples"`
	// LinuxLinear: growth 1 from an initial 1 s, the signature of Linux's
	// linear SYN timeouts (tcp_syn_linear_timeouts, 4 by default since
	// 6.x): the client sends a SYN every second but gives up when the
	// doubling schedule would (tcp_syn_retries 2: at 7 s, after six SYNs,
	// not after three at 3 s).
	LinuxLinear bool `json:"linux_linear,omitempty"`
}

// linuxInitialRTO is Linux's initial retransmission timeout
// (TCP_TIMEOUT_INIT); linuxInitialSlack how far a learned one may be from
// it (timer wheels fire late by a few percent, the path adds jitter).
const (
	linuxInitialRTO   = time.Second
	linuxInitialSlack = 100 * time.Millisecond
)

// attemptsFor is how many SYNs a client allowed attempts (as many as a
// doubling stack sends) really sends before it gives up, one more wait
// after its last (waitBefore of the count): attempts, or, with Linux's
// linear timeouts, as many as fit in the doubling schedule's time.
func (s SYNSchedule) attemptsFor(attempts int) int {
	if !s.LinuxLinear || s.Initial <= 0 {
		return attempts
	}
	giveUp := (SYNSchedule{Initial: s.Initial, Growth: 2}).waitBefore(attempts)
	sent := attempts
	for s.waitBefore(sent) < giveUp {
		sent++
	}
	return sent
}

// String is for reports: "1s x2 (client, 4 gaps)".
func (s SYNSchedule) String() string {
	return fmt.Sprintf("%v x%g (%s, %d gaps)", s.Initial, s.Growth, s.Source, s.Samples)
}

// waitBefore is the time from a unit's first SYN to its attempt n (n
// attempts dropped before it); with n the number of attempts, to the
// client giving up, one more wait after its last SYN.
func (s SYNSchedule) waitBefore(n int) int64 {
	var total float64
	w := float64(s.Initial)
	for range n {
		total += w
		w *= s.Growth
	}
	return int64(math.Round(total))
}

// defaultSYNSchedule applies where the capture holds no SYN retransmission
// at all: RFC 6298's initial 1 s, doubling, as Linux, macOS and Windows
// since 10 send them.
var defaultSYNSchedule = SYNSchedule{Initial: time.Second, Growth: 2, Source: "default"}

// Gaps between a connection's SYNs shorter than this are not a timer (a
// SYN seen twice on its way); longer than synGapMax, a client that tried
// again by hand.
const (
	synGapMin = 100 * time.Millisecond
	synGapMax = 2 * time.Minute
)

// synEvidence is what a set of connections says of the schedule: the first
// gap of each connection that retransmitted, and the ratio of each later
// gap to the one before.
type synEvidence struct {
	first, ratios []float64
}

func (e *synEvidence) add(o *synEvidence) {
	e.first = append(e.first, o.first...)
	e.ratios = append(e.ratios, o.ratios...)
}

func (e *synEvidence) addConn(c *reconstruct.Connection) {
	prev := 0.0
	for i := 1; i < len(c.SYNTimes); i++ {
		g := time.Duration(c.SYNTimes[i] - c.SYNTimes[i-1])
		if g < synGapMin || g > synGapMax {
			return // not one client timer: stop at the first odd gap
		}
		if i == 1 {
			e.first = append(e.first, float64(g))
		} else {
			e.ratios = append(e.ratios, float64(g)/prev)
		}
		prev = float64(g)
	}
}

// schedule fits the evidence, the growth from broader evidence when this
// holds no later gap (a client seen to retransmit once).
func (e *synEvidence) schedule(source string, growthFallback float64) (SYNSchedule, bool) {
	if len(e.first) == 0 {
		return SYNSchedule{}, false
	}
	s := SYNSchedule{Initial: time.Duration(median(e.first)).Round(time.Millisecond), Growth: growthFallback,
		Source: source, Samples: len(e.first) + len(e.ratios)}
	if len(e.ratios) > 0 {
		s.Growth = snapGrowth(median(e.ratios))
	}
	s.LinuxLinear = s.Growth == 1 && (s.Initial-linuxInitialRTO).Abs() <= linuxInitialSlack
	return s, true
}

// snapGrowth rounds a measured ratio of successive gaps to the doubling or
// constant timeouts stacks use when it is close (timer wheels fire late by
// a few percent), and otherwise keeps it within [1, 3].
func snapGrowth(r float64) float64 {
	switch {
	case r >= 1.7 && r <= 2.3:
		return 2
	case r >= 0.85 && r <= 1.15:
		return 1
	}
	return math.Round(min(max(r, 1), 3)*100) / 100
}

// median is the lower median: a value some client really used, never the
// mean of a 1 s and a 3 s stack's.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// synSchedules learns each client's schedule from the capture's
// connections: its own retransmissions, else its class's, else the whole
// capture's, else defaultSYNSchedule.
type synSchedules struct {
	byClient map[netip.Addr]SYNSchedule
	byClass  map[string]SYNSchedule
	capture  SYNSchedule
}

func learnSYNSchedules(conns []*reconstruct.Connection, classOf func(*reconstruct.Connection) string) synSchedules {
	clients := map[netip.Addr]*synEvidence{}
	classes := map[string]*synEvidence{}
	var all synEvidence
	for _, c := range conns {
		if len(c.SYNTimes) < 2 {
			continue
		}
		var e synEvidence
		e.addConn(c)
		if len(e.first) == 0 {
			continue
		}
		if k := classOf(c); classes[k] == nil {
			classes[k] = &e
		} else {
			classes[k].add(&e)
		}
		if clients[c.Client] == nil {
			clients[c.Client] = &synEvidence{}
		}
		clients[c.Client].add(&e) // a copy: classes may hold e itself
		all.add(&e)
	}
	s := synSchedules{byClient: map[netip.Addr]SYNSchedule{}, byClass: map[string]SYNSchedule{}, capture: defaultSYNSchedule}
	if cs, ok := all.schedule("capture", defaultSYNSchedule.Growth); ok {
		s.capture = cs
	}
	for k, e := range classes {
		if cs, ok := e.schedule("class", s.capture.Growth); ok {
			s.byClass[k] = cs
		}
	}
	for a, e := range clients {
		if cs, ok := e.schedule("client", s.capture.Growth); ok {
			s.byClient[a] = cs
		}
	}
	return s
}

// forUnit is the schedule of u's client.
func (s *synSchedules) forUnit(u *unit) SYNSchedule { return s.forClient(u.client, u.class) }

// forClient is the schedule of a client of class: its own, else its
// class's, else the capture's.
func (s *synSchedules) forClient(client netip.Addr, class string) SYNSchedule {
	if cs, ok := s.byClient[client]; ok {
		return cs
	}
	if cs, ok := s.byClass[class]; ok {
		return cs
	}
	return s.capture
}

// SYNScheduleSummary tells how the replay's DROP SYN model will time each
// class's retransmissions: the class's schedule (or the capture's) and how
// many of its clients have one learned from their own SYNs.
type SYNScheduleSummary struct {
	Class    string      `json:"class"`
	Schedule SYNSchedule `json:"schedule"`
	// OwnClients of the class's clients retransmit on a schedule learned
	// from their own SYNs; the rest use Schedule.
	OwnClients int `json:"own_clients"`
	Clients    int `json:"clients"`
}

// SYNSchedules summarises by class the schedules a replay under o uses:
// the learned ones, or o's override.
func (d *Dataset) SYNSchedules(o Options) []SYNScheduleSummary {
	var out []SYNScheduleSummary
	override := o.SYNTimeout > 0
	for _, class := range d.classes {
		sum := SYNScheduleSummary{Class: class, Schedule: d.syn.capture}
		if cs, ok := d.syn.byClass[class]; ok {
			sum.Schedule = cs
		}
		if override {
			sum.Schedule = d.synSchedule(&unit{}, &o)
		}
		seen := map[netip.Addr]bool{}
		for i := range d.units {
			u := &d.units[i]
			if u.class != class || seen[u.client] {
				continue
			}
			seen[u.client] = true
			sum.Clients++
			if _, ok := d.syn.byClient[u.client]; ok && !override {
				sum.OwnClients++
			}
		}
		out = append(out, sum)
	}
	// d.classes is sorted: so is out.
	return out
}
