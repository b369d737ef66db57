package testbed

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNS runs f on an OS thread that has joined network namespace ns, then
// moves the thread back. Sockets created by f belong to ns for their whole
// life and may be used from any goroutine afterwards; f must create them
// synchronously (goroutines it starts run on other threads).
//
// The thread is returned to its namespace rather than left to exit with the
// goroutine: the testbed starts its processes with Pdeathsig, which the
// kernel fires when the forking *thread* exits, and the Go runtime may have
// forked nginx or tcpdump from this very thread earlier. Only if the way
// back fails does the thread stay locked and die, as it must not be reused.
func inNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open netns %s: %w", ns, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(home, unix.CLONE_NEWNET); err != nil {
			// Stay locked: the thread exits with this goroutine.
			errc <- fmt.Errorf("setns back from %s: %w (after %v)", ns, err, ferr)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
