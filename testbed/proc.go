package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopTimeout bounds how long Stop waits after each signal.
const stopTimeout = 5 * time.Second

// Proc is a long-running process the testbed started inside a namespace. It
// is ended by its PID only: `ip netns exec` execs the command in place, so the
// PID we hold is the tool's own.
type Proc struct {
	Name   string
	PID    int
	Stdout string // path of the captured stdout
	Stderr string // path of the captured stderr

	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, valid after done is closed
}

// Start runs name with args inside namespace ns in the background, with
// stdout and stderr sent to files in tb.Dir. Close stops it if the caller
// does not.
func (tb *Testbed) Start(ns, name string, args ...string) (*Proc, error) {
	path, err := toolPath(name)
	if err != nil {
		return nil, err
	}
	ipPath, err := toolPath("ip")
	if err != nil {
		return nil, err
	}
	base := filepath.Join(tb.Dir, fmt.Sprintf("%s-%s-%d", filepath.Base(name), filepath.Base(ns), time.Now().UnixNano()))
	outF, err := os.Create(base + ".out")
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	errF, err := os.Create(base + ".err")
	if err != nil {
		outF.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(ipPath, append([]string{"netns", "exec", ns, path}, args...)...)
	cmd.Stdout, cmd.Stderr = outF, errF
	// If the test binary dies without running Close, the kernel ends our
	// children instead of leaving them running in a dangling namespace.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		outF.Close()
		errF.Close()
		return nil, fmt.Errorf("start %s in %s: %w", name, ns, err)
	}
	p := &Proc{Name: name, PID: cmd.Process.Pid, Stdout: outF.Name(), Stderr: errF.Name(),
		cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		outF.Close()
		errF.Close()
		close(p.done)
	}()
	tb.onClose(func() error {
		if err := p.Stop(syscall.SIGTERM); err != nil {
			return fmt.Errorf("stop %s (pid %d): %w", name, p.PID, err)
		}
		return nil
	})
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends sig to the PID and waits up to stopTimeout; if the process is
// still there it sends SIGKILL and waits again. Stopping an exited process is
// a no-op. The error reports a process that would not die, not its exit
// status (a signalled exit is the expected outcome).
func (p *Proc) Stop(sig syscall.Signal) error {
	if p.Exited() {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal %v: %w", sig, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill: %w", err)
	}
	select {
	case <-p.done:
		return fmt.Errorf("did not stop on %v within %v; killed", sig, stopTimeout)
	case <-time.After(stopTimeout):
		return fmt.Errorf("did not die on SIGKILL within %v", stopTimeout)
	}
}

// Wait waits up to d for the process to exit and returns its exit error.
func (p *Proc) Wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s (pid %d) still running after %v", p.Name, p.PID, d)
	}
}

// ReadStderr returns what the process wrote to stderr so far.
func (p *Proc) ReadStderr() string {
	b, _ := os.ReadFile(p.Stderr)
	return string(b)
}
