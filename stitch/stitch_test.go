package stitch

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/synth"
)

// browsing is the workload of the tests: browsers loading pages with their
// objects over several keep-alive connections, which sensorOf splits
// between two front ends.
var browsing = synth.Workload{Seed: 5, Clients: 12, Duration: 90 * time.Second, PageviewsPerClient: 5,
	SYNLossRate: 0.05}

// reference is what one sensor seeing every connection stores: the
// pageviews, each with the sensors its members' connections went to, and
// each transaction's pageview id.
type reference struct {
	pvs     map[string]*pageview.Pageview
	members map[string][]string
	from    int64
	to      int64
}

func newReference(items []item) reference {
	b := group(copyItems(items))
	ref := reference{pvs: map[string]*pageview.Pageview{}, members: map[string][]string{}, from: 1 << 62}
	sensors := map[string][]string{}
	for _, tx := range b.Transactions {
		ref.from, ref.to = min(ref.from, tx.Start), max(ref.to, tx.End)
		if tx.PageviewID == "" {
			continue
		}
		ref.members[tx.PageviewID] = append(ref.members[tx.PageviewID], tx.ID)
		if s := sensorOf(tx.ConnectionID); !slices.Contains(sensors[tx.PageviewID], s) {
			sensors[tx.PageviewID] = append(sensors[tx.PageviewID], s)
		}
	}
	for _, p := range b.Pageviews {
		p.Sensors = sensors[p.ID]
		slices.Sort(p.Sensors)
		ref.pvs[p.ID] = p
	}
	for _, m := range ref.members {
		slices.Sort(m)
	}
	return ref
}

func (ref reference) config() Config {
	return Config{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute),
		Window: 20 * time.Second, Margin: 40 * time.Second}
}

// check compares the store with the reference: every pageview once, with
// the same container, members, start, end and sensors.
func (ref reference) check(t *testing.T, got snapshot) {
	t.Helper()
	members := got.members()
	if got.n != len(ref.pvs) {
		t.Errorf("store holds %d pageviews, one sensor seeing everything makes %d", got.n, len(ref.pvs))
	}
	bad := 0
	for id, want := range ref.pvs {
		p := got.pvs[id]
		switch {
		case p == nil:
			t.Errorf("pageview %s (%s, sensors %v) missing", id, want.URL, want.Sensors)
		case p.ContainerID != want.ContainerID || p.Start != want.Start || p.End != want.End || !slices.Equal(p.Sensors, want.Sensors):
			t.Errorf("pageview %s: container %s start %d end %d sensors %v, want %s %d %d %v",
				id, p.ContainerID, p.Start, p.End, p.Sensors, want.ContainerID, want.Start, want.End, want.Sensors)
		case !slices.Equal(members[id], ref.members[id]):
			t.Errorf("pageview %s: members %v, want %v", id, members[id], ref.members[id])
		default:
			continue
		}
		if bad++; bad > 10 {
			t.Fatal("too many differences")
		}
	}
}

// stitchedCount counts the reference's pageviews that span both sensors.
func (ref reference) stitchedCount() int {
	n := 0
	for _, p := range ref.pvs {
		if len(p.Sensors) > 1 {
			n++
		}
	}
	return n
}

func run(t *testing.T, st store.Store, cfg Config) Stats {
	t.Helper()
	acc, err := store.StitchingOf(st)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := Run(context.Background(), acc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

// TestStitchEqualsOneSensor: two sensors each store their part of every
// client's connections with their own partial pageviews; after stitching
// the store holds exactly the pageviews one sensor seeing everything
// makes, and a second run changes nothing.
func TestStitchEqualsOneSensor(t *testing.T) {
	items := synthItems(t, browsing)
	ref := newReference(items)
	if n := ref.stitchedCount(); n < 10 {
		t.Fatalf("only %d of %d pageviews span both sensors: the split tests little", n, len(ref.pvs))
	}
	url := tempDuck(t, "sensors")
	writeSensors(t, url, items)
	st := openStore(t, url)
	r := store.TimeRange{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute)}
	before := readSnapshot(t, st, r)
	if before.n == len(ref.pvs) && reflect.DeepEqual(before.members(), ref.members) {
		t.Fatal("the sensors' own pageviews already equal the reference: nothing to stitch")
	}
	stats := run(t, st, ref.config())
	if stats.Stitched != ref.stitchedCount() {
		t.Errorf("stitched %d pageviews, %d span both sensors", stats.Stitched, ref.stitchedCount())
	}
	first := readSnapshot(t, st, r)
	ref.check(t, first)
	t.Logf("%d pageviews, %d across both sensors; stats %+v", len(ref.pvs), ref.stitchedCount(), stats)

	cfg := ref.config()
	cfg.IgnoreCheckpoint = true
	again := run(t, st, cfg)
	second := readSnapshot(t, st, r)
	if !reflect.DeepEqual(first, second) {
		t.Error("a second run changed the store")
	}
	if again.Stitched != stats.Stitched || again.Written != stats.Written {
		t.Errorf("second run stitched %d wrote %d, first %d %d", again.Stitched, again.Written, stats.Stitched, stats.Written)
	}
}

// TestStitchPartitions: partitions 0/2 and 1/2, run one after the other
// on one store, leave it as one 0/1 run leaves another.
func TestStitchPartitions(t *testing.T) {
	items := synthItems(t, browsing)
	ref := newReference(items)
	r := store.TimeRange{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute)}

	whole := tempDuck(t, "whole")
	writeSensors(t, whole, items)
	one := openStore(t, whole)
	run(t, one, ref.config())
	want := readSnapshot(t, one, r)

	parted := tempDuck(t, "parted")
	writeSensors(t, parted, items)
	two := openStore(t, parted)
	total := 0
	for part := range 2 {
		cfg := ref.config()
		cfg.Part, cfg.Parts = part, 2
		stats := run(t, two, cfg)
		if stats.Stitched == 0 || stats.Stitched == ref.stitchedCount() {
			t.Errorf("partition %d/2 stitched %d of %d: the clients are not shared out", part, stats.Stitched, ref.stitchedCount())
		}
		total += stats.Stitched
	}
	if total != ref.stitchedCount() {
		t.Errorf("partitions stitched %d together, want %d", total, ref.stitchedCount())
	}
	got := readSnapshot(t, two, r)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("two partitions: %d pageviews, one run: %d; or their members differ", got.n, want.n)
	}
	ref.check(t, got)
}

// TestStitchRestart: a run stopped part way resumes from its checkpoint
// and ends where one run over the whole range does; an overlapping run
// over part of the range (its checkpoint ignored) changes nothing.
func TestStitchRestart(t *testing.T) {
	items := synthItems(t, browsing)
	ref := newReference(items)
	r := store.TimeRange{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute)}
	url := tempDuck(t, "restart")
	writeSensors(t, url, items)
	st := openStore(t, url)

	cfg := ref.config()
	end := cfg.To
	cfg.To = cfg.From + 5*int64(cfg.Window)
	first := run(t, st, cfg)
	if first.Done != cfg.To || first.Stitched == 0 || first.Stitched == ref.stitchedCount() {
		t.Fatalf("first run: %+v, want done at %d with part of %d stitched", first, cfg.To, ref.stitchedCount())
	}
	// A restart knows no start: the checkpoint gives it.
	cfg.From, cfg.To = 0, end
	rest := run(t, st, cfg)
	if rest.Resumed != first.Done || rest.Done != end {
		t.Errorf("restart resumed at %d done %d, want %d and %d", rest.Resumed, rest.Done, first.Done, end)
	}
	if first.Stitched+rest.Stitched != ref.stitchedCount() {
		t.Errorf("stitched %d + %d, want %d", first.Stitched, rest.Stitched, ref.stitchedCount())
	}
	got := readSnapshot(t, st, r)
	ref.check(t, got)

	overlap := ref.config()
	overlap.From += 2 * int64(overlap.Window)
	overlap.To = overlap.From + 3*int64(overlap.Window) + int64(overlap.Window)/2
	overlap.IgnoreCheckpoint = true
	run(t, st, overlap)
	if again := readSnapshot(t, st, r); !reflect.DeepEqual(again, got) {
		t.Error("an overlapping run changed the store")
	}
}

// TestStitchNoStart: without a start and a checkpoint there is nothing to
// resume.
func TestStitchNoStart(t *testing.T) {
	st := openStore(t, "memory:")
	acc, err := store.StitchingOf(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), acc, Config{To: synth.Base}); err != ErrNoStart {
		t.Errorf("run without a start: %v, want ErrNoStart", err)
	}
	if _, err := Run(context.Background(), acc, Config{From: synth.Base, To: synth.Base + 1, Part: 2, Parts: 2}); err == nil {
		t.Error("partition 2/2 accepted")
	}
}

// TestStitchBrowsers: what real browsers add: HTML pages naming their
// objects (some gzipped), favicons and beacons after the load, clients that
// send no Referer and keep their connections across pages, and redirects
// before the container. The stitching still gives what one sensor seeing
// everything (and reading every page's HTML) gives.
func TestStitchBrowsers(t *testing.T) {
	items := synthItems(t, synth.Workload{Seed: 5, Clients: 30, Duration: 90 * time.Second, PageviewsPerClient: 5,
		HTML: true, GzipRate: 0.3, AfterLoad: true, NoRefererRate: 0.3, Redirects: 0.2, SYNLossRate: 0.05})
	ref := newReference(items)
	redirected := 0
	for _, p := range ref.pvs {
		if p.Redirects > 0 && len(p.Sensors) > 1 {
			redirected++
		}
	}
	if n := ref.stitchedCount(); n < 50 || redirected < 5 {
		t.Fatalf("%d pageviews span both sensors, %d of them redirected: the workload tests little", n, redirected)
	}
	url := tempDuck(t, "browsers")
	writeSensors(t, url, items)
	st := openStore(t, url)
	stats := run(t, st, ref.config())
	if stats.Stitched != ref.stitchedCount() {
		t.Errorf("stitched %d pageviews, %d span both sensors", stats.Stitched, ref.stitchedCount())
	}
	ref.check(t, readSnapshot(t, st, store.TimeRange{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute)}))
	t.Logf("%d pageviews, %d across both sensors (%d redirected); stats %+v", len(ref.pvs), ref.stitchedCount(), redirected, stats)
}
