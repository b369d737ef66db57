package testbed

import (
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// clientRTPriority is the SCHED_FIFO priority of the test process's own
// threads while its Go clients measure: the same as curl's (curlRTPriority),
// below the bridge's.
const clientRTPriority = 10

var (
	rtMu    sync.Mutex
	rtUsers int
)

// clientRealtime puts every normal thread of this process under SCHED_FIFO
// until the returned function runs; nested calls share one switch. The Go
// clients' truth is their own clock: with other packages' tests loading
// both cores, a normally scheduled Go client notices its data tens of
// milliseconds after the kernel had it (seen: 150 ms), a delay that is the
// test machine's and no monitor can see. curl runs under chrt for the same
// reason. Threads created meanwhile inherit the policy; the undo sweep
// returns every thread at clientRTPriority to normal and leaves the
// bridge's (bridgeRTPriority) alone. Linux's real-time throttling still
// leaves other processes 5% of each second, so a runaway cannot lock up
// the machine.
func clientRealtime() (undo func()) {
	rtMu.Lock()
	defer rtMu.Unlock()
	rtUsers++
	if rtUsers == 1 {
		sweepThreads(func(a *unix.SchedAttr) *unix.SchedAttr {
			if a.Policy == unix.SCHED_NORMAL {
				return &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: clientRTPriority}
			}
			return nil
		})
	}
	return func() {
		rtMu.Lock()
		defer rtMu.Unlock()
		rtUsers--
		if rtUsers == 0 {
			sweepThreads(func(a *unix.SchedAttr) *unix.SchedAttr {
				if a.Policy == unix.SCHED_FIFO && a.Priority == clientRTPriority {
					return &unix.SchedAttr{Policy: unix.SCHED_NORMAL}
				}
				return nil
			})
		}
	}
}

// sweepThreads applies f's answer to each thread of the process (nil:
// leave it). Errors are ignored: a thread may exit meanwhile, and without
// the privilege the clients simply run at normal priority.
func sweepThreads(f func(*unix.SchedAttr) *unix.SchedAttr) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue
		}
		if n := f(a); n != nil {
			_ = unix.SchedSetAttr(tid, n, 0)
		}
	}
}
