package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/rtmon/rtmon/compare"
	"github.com/rtmon/rtmon/synth"
)

// premiumNet holds synth clients 1-7 (198.51.100.1-7); 8-16 are others.
const premiumNet = "198.51.100.0/29"

// compareStore analyzes into a DuckDB store a minute of normal traffic
// from synth.Base, then, from Base+120s, a minute in which premium's
// server times are 60-120 ms instead of 1-20 ms while the others' stay
// as they were (another seed of the same workload). It returns the store
// URL and the captures analyzed into it: the first minute, premium's
// shifted slow minute and the others' shifted minute.
func compareStore(t *testing.T) (string, [3]string) {
	t.Helper()
	dir := t.TempDir()
	wl := synth.Workload{Clients: 16, Duration: time.Minute, PageviewsPerClient: 6}
	gen := func(name string, seed int64, serverTime, containerTime [2]time.Duration) string {
		p := filepath.Join(dir, name)
		w := wl
		w.Seed, w.ServerTime, w.ContainerTime = seed, serverTime, containerTime
		if _, err := synth.GenerateFile(p, synth.Options{Nanosecond: true}, w); err != nil {
			t.Fatal(err)
		}
		return p
	}
	normal := [2]time.Duration{time.Millisecond, 20 * time.Millisecond}
	container := [2]time.Duration{20 * time.Millisecond, 300 * time.Millisecond} // synth's default
	before := gen("before.pcap", 1, normal, container)
	// The same traffic as before, served slower: only the timings differ.
	slow := gen("slow.pcap", 1, [2]time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		[2]time.Duration{300 * time.Millisecond, 600 * time.Millisecond})
	same := gen("same.pcap", 3, normal, container)
	premium := netip.MustParsePrefix(premiumNet)
	shift := int64(120 * time.Second)
	afterSlow, afterSame := filepath.Join(dir, "after-slow.pcap"), filepath.Join(dir, "after-same.pcap")
	if err := shiftCapture(slow, afterSlow, shift, premium.Contains); err != nil {
		t.Fatal(err)
	}
	clients := netip.MustParsePrefix("198.51.100.0/24") // synth's first 254
	if err := shiftCapture(same, afterSame, shift, func(a netip.Addr) bool { return clients.Contains(a) && !premium.Contains(a) }); err != nil {
		t.Fatal(err)
	}
	classes := filepath.Join(dir, "classes.yaml")
	yaml := fmt.Sprintf("classes:\n  - {name: premium, priority: high, match: %q}\ndefault: {name: others, priority: low}\n", premiumNet)
	if err := os.WriteFile(classes, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "duckdb:" + filepath.Join(dir, "c.duckdb")
	if out, err := runCmd(t, "analyze", "--store", url, "--classes", classes, before, afterSlow, afterSame); err != nil {
		t.Fatalf("analyze: %v\n%s", err, out)
	}
	return url, [3]string{before, afterSlow, afterSame}
}

// shiftCapture copies the packets of in whose client (the source or
// destination keep accepts; keep must refuse the servers) to out, later
// by shift ns.
func shiftCapture(in, out string, shift int64, keep func(netip.Addr) bool) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", in, err)
	}
	g, err := os.Create(out)
	if err != nil {
		return err
	}
	defer g.Close()
	w := pcapgo.NewWriterNanos(g)
	if err := w.WriteFileHeader(65535, r.LinkType()); err != nil {
		return err
	}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", in, err)
		}
		p := gopacket.NewPacket(data, r.LinkType(), gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		nl := p.NetworkLayer()
		if nl == nil {
			continue
		}
		src, _ := netip.AddrFromSlice(nl.NetworkFlow().Src().Raw())
		dst, _ := netip.AddrFromSlice(nl.NetworkFlow().Dst().Raw())
		if !keep(src) && !keep(dst) {
			continue
		}
		ci.Timestamp = ci.Timestamp.Add(time.Duration(shift))
		if err := w.WritePacket(ci, data); err != nil {
			return err
		}
	}
}

func TestCompareCommand(t *testing.T) {
	url, captures := compareStore(t)
	at := time.Unix(0, synth.Base+int64(100*time.Second)).UTC().Format(time.RFC3339)
	out, err := runCmd(t, "compare", "--store", url, "--at", at, "--window", "100s", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep compare.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	verdicts := map[string]compare.ClassReport{}
	for _, c := range rep.Classes {
		verdicts[c.Class] = c
	}
	p, o := verdicts["premium"], verdicts["others"]
	if p.Verdict != compare.Slower || o.Verdict != compare.NoChange || len(rep.Classes) != 2 {
		t.Fatalf("verdicts: premium %q, others %q, want %q and %q\n%s", p.Verdict, o.Verdict, compare.Slower, compare.NoChange, out)
	}
	if p.CountA < 100 || p.CountB < 100 {
		t.Errorf("premium counts %d, %d: the sides read too little", p.CountA, p.CountB)
	}
	for _, r := range p.Rows {
		switch {
		case r.Kind == "transactions" && r.Component == "tserver":
			// The median moves by 150-300 ms.
			if r.DeltaMedian < int64(100*time.Millisecond) || r.MedianCI.Lo <= 0 || r.Verdict != compare.Slower {
				t.Errorf("premium tserver: %+v", r.Result)
			}
		case r.Kind == "transactions" && r.Component == "tconn":
			if r.Verdict == compare.Slower && r.DeltaMedian > int64(10*time.Millisecond) {
				t.Errorf("premium tconn moved by %d ns though the network did not change", r.DeltaMedian)
			}
		case r.Kind == "pageviews":
			if r.Verdict != compare.Slower {
				t.Errorf("premium pageviews: %q", r.Verdict)
			}
		}
	}

	// Text: one headline per class; the same ranges given explicitly.
	a0 := time.Unix(0, synth.Base).UTC().Format(time.RFC3339)
	b1 := time.Unix(0, synth.Base+int64(200*time.Second)).UTC().Format("2006-01-02T15:04:05")
	text, err := runCmd(t, "compare", "--store", url, "--a-from", a0, "--a-to", at, "--b-from", at, "--b-to", b1)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for _, want := range []string{"premium: " + compare.Slower, "others: " + compare.NoChange, "transactions tserver"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}

	// CSV of one class: a header and its five rows.
	csvOut, err := runCmd(t, "compare", "--store", url, "--at", at, "--window", "100s", "--class", "premium", "--format", "csv")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(csvOut)).ReadAll()
	if err != nil || len(rows) != 1+len(compare.TxComponents)+len(compare.PvComponents) {
		t.Fatalf("csv: %v, %d rows\n%s", err, len(rows), csvOut)
	}
	for _, r := range rows[1:] {
		if r[0] != "premium" {
			t.Errorf("csv row of class %q with --class premium", r[0])
		}
	}
	checkSensors(t, captures)
}

func TestCompareFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"compare", "--at", "2026-01-01T00:00:00Z"},                                                          // no store
		{"compare", "--store", "memory:", "--at", "yesterday"},                                               // bad time
		{"compare", "--store", "memory:", "--at", "2026-01-01T00:00:00Z", "--a-from", "2026-01-01"},          // both forms
		{"compare", "--store", "memory:", "--a-from", "2026-01-02", "--a-to", "2026-01-01", "--b-from", "1"}, // backwards
		{"compare", "--store", "memory:"},                                                                    // the same sides
		{"compare", "--store", "memory:", "--at", "2026-01-01", "--format", "xml"},
		{"compare", "--store", "memory:", "--a-class", "premium"}, // one class only
	} {
		if out, err := runCmd(t, args...); err == nil {
			t.Errorf("%v: no error\n%s", args, out)
		}
	}
	var buf bytes.Buffer
	if err := runCompare(context.Background(), &buf, compareOptions{storeURL: "memory:", at: "2026-01-01T00:00:00Z", window: time.Minute, format: "text"}); err != nil ||
		!strings.Contains(buf.String(), "no records") {
		t.Errorf("empty store: %v\n%s", err, buf.String())
	}
}

// checkSensors stores the first minute as sensor east and premium's slow
// minute as sensor west, and compares the two sensors over all the data:
// premium slower, the others (at east alone) too few.
func checkSensors(t *testing.T, captures [3]string) {
	url := "duckdb:" + filepath.Join(t.TempDir(), "s.duckdb")
	classes := filepath.Join(filepath.Dir(captures[0]), "classes.yaml")
	for i, sensor := range []string{"east", "west"} {
		if out, err := runCmd(t, "analyze", "--store", url, "--classes", classes, "--sensor", sensor, captures[i]); err != nil {
			t.Fatalf("analyze: %v\n%s", err, out)
		}
	}
	out, err := runCmd(t, "compare", "--store", url, "--a-sensor", "east", "--b-sensor", "west", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep compare.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rep.Classes {
		got[c.Class] = c.Verdict
	}
	if got["premium"] != compare.Slower || got["others"] != compare.TooFew || rep.B.Sensor != "west" {
		t.Errorf("sensors east vs west: %v", got)
	}
}
