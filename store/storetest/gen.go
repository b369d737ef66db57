// Package storetest holds the conformance suite every store engine must
// pass, a reference implementation of the queries in plain Go that the
// engines are compared against (so "same answers" is checked exactly), and a
// fast synthetic record generator for tests and benchmarks.
package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// Gen produces deterministic synthetic records, connection by connection,
// with start times increasing from T0 (like a capture).
type Gen struct {
	rng     *rand.Rand
	seed    uint64
	T0      int64
	now     int64
	step    int64 // mean gap between connection starts
	nConn   int
	clients []netip.Addr
	servers []netip.Addr
	urls    []string
}

// Classify is the class rule of the synthetic data: 10.1.0.0/16 gold,
// 10.2.0.0/16 silver, everything else bronze.
func Classify(a netip.Addr) string {
	if a.Is4() {
		b := a.As4()
		if b[0] == 10 && b[1] == 1 {
			return "gold"
		}
		if b[0] == 10 && b[1] == 2 {
			return "silver"
		}
	}
	return "bronze"
}

// NewGen makes a generator; step is the mean ns between connections.
func NewGen(seed uint64, t0, step int64) *Gen {
	g := &Gen{rng: rand.New(rand.NewPCG(seed, 42)), seed: seed, T0: t0, now: t0, step: step}
	for i := 0; i < 600; i++ {
		var a netip.Addr
		switch i % 6 {
		case 0, 1:
			a = netip.AddrFrom4([4]byte{10, 1, byte(i / 200), byte(i)})
		case 2:
			a = netip.AddrFrom4([4]byte{10, 2, byte(i / 100), byte(i)})
		case 3:
			a = netip.AddrFrom4([4]byte{198, 51, 100, byte(i % 250)})
		case 4:
			a = netip.MustParseAddr(fmt.Sprintf("2001:db8::%x", i))
		default:
			a = netip.AddrFrom4([4]byte{10, 3, byte(i % 7), byte(i)})
		}
		g.clients = append(g.clients, a)
	}
	for i := 1; i <= 5; i++ {
		g.servers = append(g.servers, netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}))
	}
	for i := 0; i < 80; i++ {
		g.urls = append(g.urls, fmt.Sprintf("/app/%d/page-%d.html?q=%d", i%7, i, i*31))
	}
	g.urls = append(g.urls, "/static/ünïcode-ßpath.css", "/search?q=100%25&x=a+b")
	return g
}

func (g *Gen) dur(median float64, sigma float64) int64 {
	return int64(median * math.Exp(sigma*g.rng.NormFloat64()))
}

// Next generates connections until at least nTx transactions are made;
// every connection's transactions and its pageview are in the same batch.
// The draws from the generator's random source come in a fixed order, so
// a seed always gives the same records.
func (g *Gen) Next(nTx int) store.Batch {
	var b store.Batch
	b.Transactions = make([]*reconstruct.Transaction, 0, nTx+4)
	for len(b.Transactions) < nTx {
		c := g.connection()
		ntx := 1 + g.rng.IntN(4)
		// A few connections belong to no pageview and arrive without a
		// class, as from a caller that bypasses the pageview stage: the
		// store must then take the connection's class.
		bare := g.rng.IntN(12) == 0
		pvID := ""
		if !bare {
			pvID = "pv-" + fmt.Sprintf("%s/%d", c.ID, 0)
		}
		txs := g.transactions(c, ntx, pvID, bare)
		b.Transactions = append(b.Transactions, txs...)
		b.Connections = append(b.Connections, c)
		if !bare {
			b.Pageviews = append(b.Pageviews, pageviewOf(c, txs, pvID))
		}
	}
	return b
}

// connection opens the next connection, with its handshake losses and
// flags drawn.
func (g *Gen) connection() *reconstruct.Connection {
	g.nConn++
	g.now += 1 + g.rng.Int64N(2*g.step)
	cl := g.clients[g.rng.IntN(len(g.clients))]
	sv := g.servers[g.rng.IntN(len(g.servers))]
	c := &reconstruct.Connection{
		ID:        fmt.Sprintf("c%d-%d", g.seed, g.nConn),
		Interface: g.nConn % 2, Client: cl, ClientPort: uint16(1024 + g.nConn%60000), Server: sv, ServerPort: 80,
		FirstSeen: g.now, RTTClient: g.dur(20e6, 0.5), RTTServer: g.dur(1e6, 0.3), MSSClient: 1460, MSSServer: 1460,
		Class: Classify(cl),
	}
	c.SYNTimes = []int64{g.now}
	if g.rng.IntN(20) == 0 {
		c.SYNLosses = 1
		c.SYNLossGap = 1e9
		c.SYNTimes = append(c.SYNTimes, g.now+1e9)
	}
	if g.rng.IntN(40) == 0 {
		c.SYNACKLosses = 1
		c.SYNACKLossGap = 1e9
	}
	c.SYNACKTimes = []int64{c.SYNTimes[len(c.SYNTimes)-1] + c.RTTServer}
	c.Tconn = c.SYNLossGap + c.SYNACKLossGap + c.RTTClient + c.RTTServer
	c.Established = c.FirstSeen + c.Tconn
	if g.rng.IntN(50) == 0 {
		c.Flags |= reconstruct.FlagIncomplete
	}
	if g.rng.IntN(30) == 0 {
		c.Flags |= reconstruct.FlagReset
	}
	return c
}

// transactions makes n transactions one after another on c, and closes c
// after the last.
func (g *Gen) transactions(c *reconstruct.Connection, n int, pvID string, bare bool) []*reconstruct.Transaction {
	t := c.FirstSeen
	var txs []*reconstruct.Transaction
	for j := 0; j < n; j++ {
		tx := g.transaction(c, j, t, pvID, bare)
		if j > 0 {
			tx.Referer = "http://" + txs[0].Host + txs[0].URL
		}
		t = tx.End
		c.BytesClient += tx.RequestBytes
		c.BytesServer += tx.ResponseBytes
		txs = append(txs, tx)
	}
	c.Transactions = n
	c.LastSeen = t
	c.Closed = t + c.RTTClient
	return txs
}

// transaction makes c's j-th transaction, starting after t (the first
// one with the connection).
func (g *Gen) transaction(c *reconstruct.Connection, j int, t int64, pvID string, bare bool) *reconstruct.Transaction {
	tx := &reconstruct.Transaction{
		ID: fmt.Sprintf("%s/%d", c.ID, j), ConnectionID: c.ID, Index: j, Interface: c.Interface,
		Client: c.Client, ClientPort: c.ClientPort, Server: c.Server, ServerPort: 80,
		Trequest: g.dur(1e5, 1), Tserver: g.dur(30e6, 1.2), Ttransfer: g.dur(10e6, 1.5), RTTClient: c.RTTClient,
		Method: "GET", Host: fmt.Sprintf("www%d.example.com", g.rng.IntN(3)), URL: g.urls[g.rng.IntN(len(g.urls))],
		Status: 200, ContentType: "text/html", UserAgent: "Mozilla/5.0 (synthetic)", Accept: "*/*",
		RequestBytes: 300 + g.rng.Int64N(200), ResponseBytes: 1000 + g.rng.Int64N(100000),
		PageviewID: pvID,
	}
	if !bare {
		tx.Class = c.Class
	}
	if j == 0 {
		tx.Tconn = c.Tconn
		tx.Start = c.FirstSeen
	} else {
		tx.Start = t + g.rng.Int64N(5e6)
	}
	tx.BodyBytes = tx.ResponseBytes - 200
	tx.Total = tx.Tconn + tx.Trequest + tx.Tserver + tx.Ttransfer
	tx.End = tx.Start + tx.Total
	tx.RequestFirst = tx.Start + tx.Tconn
	tx.RequestLast = tx.RequestFirst + tx.Trequest
	tx.ResponseFirst = tx.RequestLast + tx.Tserver
	tx.ResponseLast = tx.ResponseFirst + tx.Ttransfer
	tx.ResponseAcked = tx.ResponseLast + c.RTTClient
	tx.RequestAcked = tx.RequestLast + min(tx.Tserver, 100e3)
	switch r := g.rng.IntN(100); {
	case r < 3:
		tx.Status = 404
	case r < 5:
		tx.Status = 500
	case r < 6:
		tx.Status = 503
	}
	if g.rng.IntN(25) == 0 {
		tx.RetransBytes = 1460 * (1 + g.rng.Int64N(4))
		c.RetransBytes += tx.RetransBytes
	}
	if g.rng.IntN(50) == 0 {
		tx.Flags |= reconstruct.FlagIncomplete
	}
	if g.rng.IntN(100) == 0 {
		tx.Flags |= reconstruct.FlagNoResponse
	}
	return tx
}

// pageviewOf is c's pageview: one per connection, its container the first
// transaction.
func pageviewOf(c *reconstruct.Connection, txs []*reconstruct.Transaction, id string) *pageview.Pageview {
	ct := txs[0]
	pv := &pageview.Pageview{
		ID: id, Interface: c.Interface, Client: c.Client, UserAgent: ct.UserAgent, Class: c.Class,
		Priority: map[string]string{"gold": "high", "silver": "normal", "bronze": "low"}[c.Class],
		Server:   c.Server, Host: ct.Host, URL: ct.URL, Status: ct.Status, ContainerID: ct.ID,
		Start: ct.Start, End: c.LastSeen, Objects: len(txs) - 1, Connections: 1, SYNLosses: c.SYNLosses,
		SYNACKLosses: c.SYNACKLosses, RetransBytes: c.RetransBytes,
	}
	for _, tx := range txs {
		pv.Bytes += tx.ResponseBytes
	}
	pv.Total = pv.End - pv.Start
	pv.Tconn = ct.Tconn
	pv.Tserver = ct.Tserver
	pv.Ttransfer = ct.Ttransfer
	pv.Tother = pv.Total - pv.Tconn - pv.Tserver - pv.Ttransfer
	if c.Flags&reconstruct.FlagIncomplete != 0 {
		pv.Flags |= reconstruct.FlagIncomplete
	}
	return pv
}
