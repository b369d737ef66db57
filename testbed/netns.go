package testbed

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// inNS runs f on a fresh OS thread that has joined network namespace ns.
// Sockets created by f belong to ns for their whole life and may be used from
// any goroutine afterwards; f must create them synchronously (goroutines it
// starts run on other threads, in the root namespace). The thread is never
// unlocked: a goroutine that exits while locked takes its thread with it, so
// no thread of another namespace ever returns to the runtime's pool.
func inNS(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open netns %s: %w", ns, err)
			return
		}
		err = unix.Setns(fd, unix.CLONE_NEWNET)
		unix.Close(fd)
		if err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}
