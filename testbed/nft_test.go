package testbed

import (
	"slices"
	"testing"
)

// The counters are read from nft's JSON in rule order, whatever else the
// rules hold (output of nft 1.0.6, Debian 12).
func TestNFTCounters(t *testing.T) {
	out := `{"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
	{"table": {"family": "inet", "name": "t1", "handle": 1}},
	{"chain": {"family": "inet", "table": "t1", "name": "c", "handle": 1, "type": "filter", "hook": "input", "prio": 0, "policy": "accept"}},
	{"rule": {"family": "inet", "table": "t1", "chain": "c", "handle": 2, "expr": [
		{"match": {"op": "==", "left": {"numgen": {"mode": "inc", "mod": 7, "offset": 0}}, "right": 0}},
		{"counter": {"packets": 12, "bytes": 720}}, {"drop": null}]}},
	{"rule": {"family": "inet", "table": "t1", "chain": "c", "handle": 3, "expr": [{"accept": null}]}},
	{"rule": {"family": "inet", "table": "t1", "chain": "c", "handle": 4, "expr": [{"counter": {"packets": 3, "bytes": 180}}]}}]}`
	n, err := nftCounters([]byte(out))
	if err != nil || !slices.Equal(n, []int{12, 3}) {
		t.Fatalf("counters %v, %v; want [12 3]", n, err)
	}
	if _, err := nftCounters([]byte("table inet t1 {")); err == nil {
		t.Error("text output read as JSON")
	}
}
