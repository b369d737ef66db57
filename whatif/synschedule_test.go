package whatif

import (
	"testing"
	"time"
)

// DROP SYN times each client's retransmissions as that client's stack
// does, learned from the SYN retransmissions the capture holds: a Linux
// client's 1 s doubling, a stack with linear 3 s timeouts, the classic
// 3 s doubling of a class's other clients, and the whole capture's for a
// client and class with no evidence. --syn-timeout overrides them all.
func TestSYNSchedulesLearnedFromTheCapture(t *testing.T) {
	var b builder
	evidence := func(id, client, class string, syns ...int64) {
		b.add(spec{id: id, client: client, class: class, syns: syns, synacks: []int64{syns[len(syns)-1] + 30*us},
			est: syns[len(syns)-1] + 30*us + 50*ms, rtt: 50 * ms, proc: 10 * ms})
	}
	evidence("linux", "198.51.100.1", "web", 0, 1010*ms, 3030*ms)
	evidence("linear", "198.51.100.2", "web", 0, 3*sec, 6*sec)
	evidence("classic", "198.51.100.3", "old", 0, 3*sec, 9*sec)
	evidence("once", "198.51.100.6", "new", 0, sec)
	evidence("echo", "198.51.100.7", "new", 0, 30*ms) // a SYN seen twice, no timer
	targets := map[string]struct {
		client, class string
		fails         time.Duration
	}{
		"linux":   {"198.51.100.1", "web", 7070 * time.Millisecond}, // 1.01 + 2.02 + 4.04
		"linear":  {"198.51.100.2", "web", 9 * time.Second},
		"class":   {"198.51.100.4", "old", 21 * time.Second},          // its class's 3 s doubling
		"capture": {"198.51.100.5", "quiet", 7070 * time.Millisecond}, // the capture's lower median: 1.01 s, doubling
		"once":    {"198.51.100.6", "new", 7 * time.Second},           // its 1 s, the capture's doubling
	}
	ids := map[string]string{}
	for name, tg := range targets {
		ids[name] = b.add(spec{id: "t-" + name, client: tg.client, class: tg.class, syns: []int64{100 * sec},
			synacks: []int64{100*sec + 30*us}, est: 100*sec + 50*ms, rtt: 50 * ms, proc: 10 * ms}).ID
	}
	d := b.dataset(t, nil)
	for name, tg := range targets {
		res := eval(t, d, "IF IP.SRC == "+tg.client+" THEN DROP SYN", Options{})
		if u := unitByID(t, res, ids[name]); !u.Failed || time.Duration(u.Predicted) != tg.fails {
			t.Errorf("%s client: failed %v after %v, want failed after %v", name, u.Failed, time.Duration(u.Predicted), tg.fails)
		}
		res = eval(t, d, "IF IP.SRC == "+tg.client+" THEN DROP SYN", Options{SYNTimeout: time.Second})
		if u := unitByID(t, res, ids[name]); time.Duration(u.Predicted) != 7*time.Second {
			t.Errorf("%s client with a 1 s override: %v, want 7s", name, time.Duration(u.Predicted))
		}
	}
	want := map[string]SYNScheduleSummary{
		"web":   {Schedule: SYNSchedule{Initial: 1010 * time.Millisecond, Growth: 1, Source: "class", LinuxLinear: true}, OwnClients: 2, Clients: 2},
		"old":   {Schedule: SYNSchedule{Initial: 3 * time.Second, Growth: 2, Source: "class"}, OwnClients: 1, Clients: 2},
		"quiet": {Schedule: SYNSchedule{Initial: 1010 * time.Millisecond, Growth: 2, Source: "capture"}, OwnClients: 0, Clients: 1},
		"new":   {Schedule: SYNSchedule{Initial: time.Second, Growth: 2, Source: "class"}, OwnClients: 1, Clients: 2},
	}
	for _, s := range d.SYNSchedules(Options{}) {
		w, ok := want[s.Class]
		if !ok {
			t.Errorf("unexpected class %q", s.Class)
			continue
		}
		got := s
		got.Class, got.Schedule.Samples = "", 0
		if got != w {
			t.Errorf("class %s: %+v, want %+v", s.Class, s, w)
		}
	}
}

// TestSYNScheduleLinuxLinear: Linux since 6.x sends a SYN every second
// (tcp_syn_linear_timeouts) and gives up when the doubling schedule would
// (tcp_syn_retries 2: at 7 s). A client seen doing so is replayed that way
// by both server models: dropped, it fails after 7 s, not after three SYNs
// at 3 s; a stack with linear 3 s timeouts still fails after its three.
func TestSYNScheduleLinuxLinear(t *testing.T) {
	var b builder
	evidence := func(id, client string, syns ...int64) {
		b.add(spec{id: id, client: client, class: "web", syns: syns, synacks: []int64{syns[len(syns)-1] + 30*us},
			est: syns[len(syns)-1] + 30*us + 50*ms, rtt: 50 * ms, proc: 10 * ms})
	}
	evidence("modern", "198.51.100.8", 0, 1010*ms, 2020*ms, 3030*ms, 4040*ms, 5050*ms)
	evidence("linear", "198.51.100.9", 0, 3*sec, 6*sec)
	modern := b.add(spec{id: "t-modern", client: "198.51.100.8", class: "web", syns: []int64{100 * sec},
		synacks: []int64{100*sec + 30*us}, est: 100*sec + 50*ms, rtt: 50 * ms, proc: 10 * ms}).ID
	linear := b.add(spec{id: "t-linear", client: "198.51.100.9", class: "web", syns: []int64{200 * sec},
		synacks: []int64{200*sec + 30*us}, est: 200*sec + 50*ms, rtt: 50 * ms, proc: 10 * ms}).ID
	d := b.dataset(t, nil)
	for _, model := range []ServerModel{ServerLinear, ServerQueue} {
		for id, want := range map[string]time.Duration{modern: 7070 * time.Millisecond, linear: 9 * time.Second} {
			res := eval(t, d, "IF CLASS == web THEN DROP SYN", Options{ServerModel: model})
			if u := unitByID(t, res, id); !u.Failed || time.Duration(u.Predicted) != want {
				t.Errorf("%s model, %s: failed %v after %v, want failed after %v", model, id, u.Failed, time.Duration(u.Predicted), want)
			}
		}
	}
	if s := (SYNSchedule{Initial: 1010 * time.Millisecond, Growth: 1, LinuxLinear: true}).attemptsFor(3); s != 7 {
		t.Errorf("a Linux client with linear timeouts sends %d SYNs in 7.07 s, want 7 (0 to 6.06 s)", s)
	}
}
