package reconstruct

import "fmt"

// Invariants reports the first rule of the record contract the transaction
// breaks, or nil: every component >= 0, the components add up to Total,
// Total == End - Start (so End >= Start), a request acknowledged no earlier
// than its last byte was seen. Tests assert it on every record
// they see; a record that broke it would be a bug, whatever the capture.
func (t *Transaction) Invariants() error {
	if err := CheckTiming("transaction", t.ID, t.Start, t.End, t.Total, []string{"tconn", "ttls", "trequest", "tserver", "ttransfer"},
		[]int64{t.Tconn, t.Ttls, t.Trequest, t.Tserver, t.Ttransfer}); err != nil {
		return err
	}
	switch {
	case t.RTTClient < 0 || t.RetransBytes < 0 || t.HoleBytes < 0:
		return fmt.Errorf("transaction %s: negative rtt %d, retransmitted %d or hole %d bytes", t.ID, t.RTTClient, t.RetransBytes, t.HoleBytes)
	case t.RequestAcked != 0 && t.RequestAcked < t.RequestLast:
		return fmt.Errorf("transaction %s: request acknowledged at %d, before its last byte at %d", t.ID, t.RequestAcked, t.RequestLast)
	}
	return nil
}

// Invariants reports the first rule of the record contract the connection
// breaks, or nil: no negative time, count or gap; LastSeen >= FirstSeen.
func (c *Connection) Invariants() error {
	switch {
	case c.Tconn < 0 || c.Ttls < 0 || c.RTTClient < 0 || c.RTTServer < 0 || c.SYNLossGap < 0 || c.SYNACKLossGap < 0:
		return fmt.Errorf("connection %s: negative time (tconn %d, rtt %d/%d, loss gaps %d/%d)",
			c.ID, c.Tconn, c.RTTClient, c.RTTServer, c.SYNLossGap, c.SYNACKLossGap)
	case c.SYNLosses < 0 || c.SYNACKLosses < 0 || c.BytesClient < 0 || c.BytesServer < 0 || c.RetransBytes < 0:
		return fmt.Errorf("connection %s: negative count", c.ID)
	case c.LastSeen < c.FirstSeen:
		return fmt.Errorf("connection %s: last seen %d before first %d", c.ID, c.LastSeen, c.FirstSeen)
	}
	return nil
}
