package whatif

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rtmon/rtmon/addrpattern"
)

// Rule is one RLM rule: IF Cond THEN Actions. Actions of a rule apply to a
// unit (pageview, or transaction without pageviews) while Cond holds for it.
type Rule struct {
	Cond    Cond
	Actions []Action
	// Line is the rule's line in its source (1-based); 0 for built rules.
	Line int
}

// String renders the rule in canonical syntax; it parses back to the same rule.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString("IF ")
	b.WriteString(r.Cond.String())
	b.WriteString(" THEN ")
	for i, a := range r.Actions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	return b.String()
}

// Cond is a rule condition: *And, *Or, *AddrCond, *ClassCond or *RTCond.
type Cond interface {
	String() string
	isCond()
}

// And holds when both sides hold.
type And struct{ L, R Cond }

// Or holds when either side holds.
type Or struct{ L, R Cond }

func (*And) isCond() {}
func (*Or) isCond()  {}

func (c *And) String() string { return wrapOr(c.L) + " AND " + wrapOr(c.R) }
func (c *Or) String() string  { return c.L.String() + " OR " + c.R.String() }

// wrapOr parenthesises an OR under an AND so the printed form keeps its meaning.
func wrapOr(c Cond) string {
	if _, ok := c.(*Or); ok {
		return "(" + c.String() + ")"
	}
	return c.String()
}

// AddrCond is IP.SRC == PATTERN or IP.SRC != PATTERN.
type AddrCond struct {
	Neg     bool
	Pattern addrpattern.Pattern // the operand alone (addrpattern.ParseAddr)
}

func (*AddrCond) isCond() {}
func (c *AddrCond) String() string {
	op := "=="
	if c.Neg {
		op = "!="
	}
	return "IP.SRC " + op + " " + c.Pattern.String()
}

// Match reports whether the client address satisfies the condition.
func (c *AddrCond) Match(a netip.Addr) bool { return c.Pattern.Match(a) != c.Neg }

// ClassCond is CLASS == name or CLASS != name (an rtmon extension to the RLM
// language: classes come from the records, so rules can name them directly).
type ClassCond struct {
	Neg   bool
	Class string
}

func (*ClassCond) isCond() {}
func (c *ClassCond) String() string {
	if c.Neg {
		return "CLASS != " + c.Class
	}
	return "CLASS == " + c.Class
}

// Metric names the response time a condition compares.
type Metric int

const (
	// MetricRT: all classes pooled.
	MetricRT Metric = iota
	// MetricHigh: the high-priority classes pooled (RT_HIGH).
	MetricHigh
	// MetricLow: the low-priority classes pooled (RT_LOW).
	MetricLow
	// MetricClass: one class, RT[name].
	MetricClass
)

// Op is a comparison operator.
type Op int

const (
	OpLT Op = iota
	OpLE
	OpGT
	OpGE
	OpEQ
	OpNE
)

var opText = [...]string{"<", "<=", ">", ">=", "==", "!="}

func (o Op) String() string { return opText[o] }

func (o Op) compare(a, b int64) bool {
	switch o {
	case OpLT:
		return a < b
	case OpLE:
		return a <= b
	case OpGT:
		return a > b
	case OpGE:
		return a >= b
	case OpEQ:
		return a == b
	}
	return a != b
}

// RTCond compares a sliding-window response time with a threshold.
type RTCond struct {
	Metric Metric
	Class  string // MetricClass only
	Op     Op
	Value  time.Duration
}

func (*RTCond) isCond() {}
func (c *RTCond) String() string {
	var m string
	switch c.Metric {
	case MetricRT:
		m = "RT"
	case MetricHigh:
		m = "RT_HIGH"
	case MetricLow:
		m = "RT_LOW"
	default:
		m = "RT[" + c.Class + "]"
	}
	return m + " " + c.Op.String() + " " + formatDuration(c.Value)
}

// formatDuration prints d in a unit the parser reads back exactly.
func formatDuration(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	case d%time.Millisecond == 0:
		return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
	case d%time.Microsecond == 0:
		return strconv.FormatInt(int64(d/time.Microsecond), 10) + "us"
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}

// formatSize prints n bytes in the largest unit that divides it.
func formatSize(n int64) string {
	switch {
	case n > 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ActionKind names an RLM management action.
type ActionKind int

const (
	FastSYN ActionKind = iota
	FastSYNACK
	DropSYN
	HaltFastSYN
	RemoveEmbeds
	RewriteEmbeds
	Splice
)

// Action defaults when a rule leaves the parameter out.
const (
	DefaultGap   = 200 * time.Millisecond
	DefaultAbove = 100 * 1024
	DefaultRatio = 0.25
)

// Action is one management action with its parameters.
type Action struct {
	Kind ActionKind
	// Gap: FAST SYN and FAST SYN/ACK retransmission interval.
	Gap time.Duration
	// Above (bytes) and Ratio: REWRITE EMBEDS shrinks objects whose body is
	// larger than Above to Ratio of their size.
	Above int64
	Ratio float64
	// TerminateTLS: SPLICE by a splicer that terminates TLS, so that on
	// HTTPS it too binds when the request has come (see Assumptions).
	TerminateTLS bool
}

func (a Action) String() string {
	switch a.Kind {
	case FastSYN:
		return "FAST SYN GAP " + formatDuration(a.Gap)
	case FastSYNACK:
		return "FAST SYN/ACK GAP " + formatDuration(a.Gap)
	case DropSYN:
		return "DROP SYN"
	case HaltFastSYN:
		return "HALT FAST SYN"
	case RemoveEmbeds:
		return "REMOVE EMBEDS"
	case RewriteEmbeds:
		return "REWRITE EMBEDS ABOVE " + formatSize(a.Above) + " RATIO " +
			strconv.FormatFloat(a.Ratio, 'g', -1, 64)
	case Splice:
		if a.TerminateTLS {
			return "SPLICE TERMINATE TLS"
		}
		return "SPLICE"
	}
	return "UNKNOWN"
}

// Assumptions explains, for the UI and the reports, what the action's model
// takes for granted. The models themselves are in models.go.
func (a Action) Assumptions() string {
	switch a.Kind {
	case FastSYN:
		return "Every client SYN retransmission that followed a SYN with no SYN/ACK (the server dropped it) " +
			"is assumed to have been sent by the front end " + formatDuration(a.Gap) + " after the previous attempt " +
			"instead of after the client's timeout (1 s/3 s...). The number of attempts is unchanged: the fast " +
			"retransmission succeeds when the client's later one did. Gaps already shorter stay as they were. " +
			"Later transactions on the connection and objects that waited for the page shift earlier by the saving. " +
			"Under the queue server model, where the capture's SYN losses come from a full backlog, the front end " +
			"instead sends a copy every " + formatDuration(a.Gap) + " until one gets in or the client gives up, and " +
			"each copy meets the replayed queue: behind a full accept queue the copies take the slots that free and " +
			"the server gets slower. Where the capture shows the server leaving connections half-open (Linux drops " +
			"a handshake that completes into a full accept queue), a connection a copy got in can meet that too: " +
			"its client resends the request on timers scaled by the round trip it measured, which the copy made " +
			"the whole wait."
	case FastSYNACK:
		return "Every wait for a lost SYN/ACK (a client SYN retransmission after a SYN/ACK, or a server SYN/ACK " +
			"retransmission) shrinks to " + formatDuration(a.Gap) + "; the number of attempts is unchanged. " +
			"A server that retransmitted its SYN/ACK more than once started the first response with a window " +
			"of one segment (Linux, RFC 5681); the front end's copy spares those retransmissions, so that " +
			"response's transfer loses the extra slow-start rounds (at the client's RTT, at most its measured " +
			"transfer). Later work on the connection and in the pageview shifts earlier by the saving."
	case Splice:
		return "The splicer answers the client's SYN itself: the client's connect time becomes one client RTT " +
			"plus any SYN/ACK losses on the client path (kept as measured). The splicer connects to the server " +
			"when the request has come (delayed binding): the request waits for that handshake, one server-side " +
			"RTT (a LAN hop) plus the SYN waits the server caused the client (less the FAST SYN saving when FAST " +
			"SYN also applies), which move from Tconn into Tserver. It is a splicer that sends its SYN to the " +
			"server again until the server takes it, as connect(2) does on Linux (a second apart five times, then " +
			"doubling, each on the kernel's next 32 ms timer tick, so SYNs dropped together come again together); " +
			"the kernel's SYNPROXY sends one, and in front of an overloaded listener four loads in ten stalled " +
			"behind it. Under the queue server model, a splicer's handshake that completes into a full accept " +
			"queue (other SYNs of the same instant took the room) leaves the connection half-open, and its " +
			"request gets in on the splicer's retransmission timer (200 ms, doubling). " + spliceTLSAssumption(a.TerminateTLS)
	case DropSYN:
		return "While the condition holds, the first SYN of a new unit (pageview) of the matching clients is " +
			"dropped; the client retransmits on its own schedule, learned from the capture's SYN retransmissions " +
			"(that client's, else its class's, else the capture's, else 1 s doubling; --syn-timeout sets one for all, " +
			"e.g. the classic 3 s, 6 s, 12 s) and each retransmission is judged again against the condition at its time. " +
			"After Options.SYNAttempts dropped attempts the unit fails and counts with the total time the client " +
			"waited (1 + 2 + 4 = 7 s for Linux, 21 s classic; a Linux client seen sending a SYN every second, " +
			"its linear timeouts, sends them until that doubling schedule's 7 s are up). " +
			"Admitted late, the unit runs as measured (with the other actions), shifted in time; its server load " +
			"moves with it and a failed unit's load disappears. Other units' server time scales with the load " +
			"model fitted on the capture: processing time = a + b x concurrency (least squares, b >= 0), predicted " +
			"= measured x model(new concurrency) / model(measured concurrency)."
	case HaltFastSYN:
		return "While the condition holds, FAST SYN does not apply to the matching units (so dropped SYNs are not " +
			"retransmitted for them by the front end)."
	case RemoveEmbeds:
		return "The pageview consists of its container alone: its time is the container transaction's end " +
			"(with the other actions) minus the pageview start. The removed objects' server load disappears " +
			"(load model as for DROP SYN). Pageviews without a seen container and transactions in per-transaction " +
			"mode keep their time."
	case RewriteEmbeds:
		return "Embedded objects whose body exceeds " + formatSize(a.Above) + " shrink to " +
			strconv.FormatFloat(a.Ratio, 'g', -1, 64) + " of their body. Transfer time follows slow start from the " +
			"measured client RTT: initial window 10 MSS, doubling per RTT until the window reaches the bottleneck " +
			"rate (fitted per transaction so the model reproduces the measured transfer; unlimited when the " +
			"measured transfer is already as fast as pure slow start), then rate-limited. The saving (old - new " +
			"model time, at most the measured transfer) ends the object earlier, and later transactions on the " +
			"same connection shift earlier by it; the pageview ends at the latest new end (critical path)."
	}
	return ""
}

// spliceTLSAssumption is what SPLICE assumes of HTTPS connections.
func spliceTLSAssumption(terminate bool) string {
	if terminate {
		return "On HTTPS the splicer terminates TLS: the client's TLS handshake is with the splicer (Ttls as " +
			"measured: the splicer stands where the capture point is, and is taken to compute as fast as the " +
			"server), and it binds when the request has come, as for HTTP, speaking plain HTTP to the server."
	}
	return "On HTTPS a splicer that does not terminate TLS cannot read the request: it binds at the client's " +
		"ClientHello (choosing the server by SNI), so the server-side handshake and its SYN waits delay the " +
		"client's TLS handshake (Ttls) instead, and the server holds the connection from there on: under the " +
		"queue server model the splicer's SYN meets the replayed backlog that much earlier, and a worker " +
		"waits for the request through the TLS handshake. SPLICE TERMINATE TLS models a splicer that terminates TLS."
}
