package testbed

import (
	"fmt"
	"strconv"
)

// StartCPUHog starts a busy process pinned to CPU cpu (taskset -c cpu
// sha256sum /dev/zero, from util-linux and coreutils), so a scenario runs
// on a machine where one core is always taken, as on a busy server or CI
// runner. It runs in the client namespace (it does no networking) and,
// like every process of the testbed, is tracked and ended by its PID
// (Stop, or Close at the latest).
func (tb *Testbed) StartCPUHog(cpu int) (*Proc, error) {
	p, err := tb.Start(tb.Client.NS, "taskset", "-c", strconv.Itoa(cpu), "sha256sum", "/dev/zero")
	if err != nil {
		return nil, fmt.Errorf("cpu hog: %w", err)
	}
	return p, nil
}
