package stitch

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// record is one stored record of the partition, as the Grouper takes it.
type record struct {
	at     int64 // when the tracker would have emitted it
	sensor string
	tx     *reconstruct.Transaction
	conn   *reconstruct.Connection
	stored string            // the transaction's stored pageview id
	flags  reconstruct.Flags // its stored flags (the after-load verdict with them)
	// declared: what the HTML of the pageview it contained named, which
	// stands in for its body (pageview.Grouper.Replay).
	declared string
}

// readWindow reads the partition's records of [from, to) of every sensor,
// in the order the tracker emits them: a transaction when its last packet
// was seen (what the Grouper's clock follows), a connection at its last
// packet. What the live grouping stamped on a transaction is cleared, so
// the grouping starts afresh.
func readWindow(ctx context.Context, st *store.Stitching, cfg *Config, from, to int64) ([]record, error) {
	var recs []record
	type txKey struct{ sensor, id string }
	declared := map[txKey]string{}
	err := st.Declared(ctx, from, to, func(sensor, containerID, d string) error {
		if len(declared) >= cfg.MaxRecords {
			return fmt.Errorf("more than %d pageviews in one window: use a smaller window or more partitions", cfg.MaxRecords)
		}
		declared[txKey{sensor, containerID}] = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	full := func() error {
		if len(recs) >= cfg.MaxRecords {
			return fmt.Errorf("more than %d records in one window: use a smaller window or more partitions", cfg.MaxRecords)
		}
		return nil
	}
	err = st.Transactions(ctx, from, to, func(sensor string, tx *reconstruct.Transaction) error {
		if !InPart(tx.Client, cfg.Part, cfg.Parts) {
			return nil
		}
		if err := full(); err != nil {
			return err
		}
		r := record{at: max(tx.RequestFirst, tx.RequestLast, tx.ResponseLast, tx.ResponseAcked), sensor: sensor, tx: tx,
			stored: tx.PageviewID, flags: tx.Flags, declared: declared[txKey{sensor, tx.ID}]}
		tx.PageviewID = ""
		tx.Flags &^= reconstruct.FlagAfterLoad
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = st.Connections(ctx, from, to, func(sensor string, c *reconstruct.Connection) error {
		if !InPart(c.Client, cfg.Part, cfg.Parts) {
			return nil
		}
		if err := full(); err != nil {
			return err
		}
		recs = append(recs, record{at: c.LastSeen, sensor: sensor, conn: c})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(recs, func(a, b record) int { return cmp.Compare(a.at, b.at) })
	return recs, nil
}

// collector keeps the Grouper's output: each transaction's new pageview
// id, and the pageviews.
type collector struct {
	pvID map[*reconstruct.Transaction]string
	pvs  []*pageview.Pageview
}

func (c *collector) Connection(*reconstruct.Connection) {}
func (c *collector) Transaction(tx *reconstruct.Transaction) {
	c.pvID[tx] = tx.PageviewID
}
func (c *collector) Pageview(p *pageview.Pageview) { c.pvs = append(c.pvs, p) }

// stitchWindow groups one window with its margins and replaces what the
// grouping across sensors changes among the pageviews starting in [w0, w1).
func stitchWindow(ctx context.Context, st *store.Stitching, cfg *Config, w0, w1 int64, stats *Stats) error {
	recs, err := readWindow(ctx, st, cfg, w0-int64(cfg.Margin), w1+int64(cfg.Margin))
	if err != nil {
		return err
	}
	out := &collector{pvID: map[*reconstruct.Transaction]string{}}
	g := pageview.NewGrouper(cfg.Grouper, cfg.Classes, out)
	byTx := map[*reconstruct.Transaction]*record{}
	for i := range recs {
		r := &recs[i]
		if r.tx != nil {
			byTx[r.tx] = r
			stats.Transactions++
			g.Replay(r.tx, r.declared)
		} else {
			g.Connection(r.conn)
		}
	}
	g.Flush()
	var pvs []*pageview.Pageview
	for _, p := range out.pvs {
		if p.Start >= w0 && p.Start < w1 {
			pvs = append(pvs, p)
		}
	}
	stats.Pageviews += len(pvs)
	rep, stitched := decide(pvs, byTx, out.pvID)
	stats.Stitched += stitched
	stats.Written += len(rep.Pageviews)
	stats.Deleted += len(rep.Delete)
	return st.Replace(ctx, rep)
}

// decide picks what to write. A pageview seen by several sensors is
// written; so, in turn, is every pageview holding a member of a stored
// pageview that a written one replaces (that stored pageview goes as a
// whole), until nothing changes. Everything else stays as its sensor
// grouped it: that sensor saw all of it, and read its bodies as they
// arrived (the replay has what they named from the start).
func decide(pvs []*pageview.Pageview, byTx map[*reconstruct.Transaction]*record, pvID map[*reconstruct.Transaction]string) (store.Replacement, int) {
	sensors := make([][]string, len(pvs))
	write := make([]bool, len(pvs))
	stitched := 0
	for i, p := range pvs {
		for _, tx := range p.Transactions {
			if r := byTx[tx]; r != nil && !slices.Contains(sensors[i], r.sensor) {
				sensors[i] = append(sensors[i], r.sensor)
			}
		}
		slices.Sort(sensors[i])
		if len(sensors[i]) > 1 {
			write[i] = true
			stitched++
		}
	}
	gone := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for i, p := range pvs {
			if !write[i] {
				continue
			}
			for _, tx := range p.Transactions {
				if r := byTx[tx]; r != nil && r.stored != "" && !gone[r.stored] {
					gone[r.stored], changed = true, true
				}
			}
			if !gone[p.ID] {
				gone[p.ID], changed = true, true
			}
		}
		for i, p := range pvs {
			if write[i] {
				continue
			}
			if gone[p.ID] || slices.ContainsFunc(p.Transactions, func(tx *reconstruct.Transaction) bool {
				r := byTx[tx]
				return r != nil && gone[r.stored]
			}) {
				write[i], changed = true, true
			}
		}
	}
	rep := store.Replacement{Tx: map[store.TxKey]store.TxUpdate{}}
	for id := range gone {
		rep.Delete = append(rep.Delete, id)
	}
	slices.Sort(rep.Delete)
	written := map[string]bool{}
	for i, p := range pvs {
		if !write[i] || len(p.Transactions) == 0 {
			continue
		}
		written[p.ID] = true
		container := byTx[p.Transactions[0]]
		p.Sensors = sensors[i]
		rep.Pageviews = append(rep.Pageviews, store.StitchedPageview{Sensor: container.sensor, Pageview: p})
	}
	// Members of written pageviews point at them, with the new grouping's
	// after-load verdict in their flags; members of replaced pageviews
	// that joined none (stand-alone now) point nowhere, after none.
	for tx, r := range byTx {
		want, ok := pvID[tx]
		if !ok || !(written[want] || (want == "" && gone[r.stored])) || want == r.stored && tx.Flags == r.flags {
			continue
		}
		rep.Tx[store.TxKey{Sensor: r.sensor, ID: tx.ID, Start: tx.Start}] = store.TxUpdate{Pageview: want, Flags: tx.Flags}
	}
	for _, p := range pvs {
		p.Transactions = nil
	}
	return rep, stitched
}
