package chcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// state is DIR/cluster.json: what another process needs to reach or stop
// the cluster. A PID of 0 is a stopped process.
type state struct {
	Name   string      `json:"name"`
	ZKPort int         `json:"zk_port"`
	ZKPID  int         `json:"zk_pid"`
	Nodes  []nodeState `json:"nodes"`
}

type nodeState struct {
	Shard     int `json:"shard"`
	Replica   int `json:"replica"`
	TCPPort   int `json:"tcp_port"`
	HTTPPort  int `json:"http_port"`
	InterPort int `json:"interserver_port"`
	PID       int `json:"pid"`
}

const stateFile = "cluster.json"

func (c *Cluster) saveState() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := state{Name: c.Name, ZKPort: c.ZKPort}
	if c.ZK != nil {
		st.ZKPID = c.ZK.PID()
	}
	for _, n := range c.Nodes {
		ns := nodeState{Shard: n.Shard, Replica: n.Replica, TCPPort: n.TCPPort, HTTPPort: n.HTTPPort, InterPort: n.InterPort}
		if n.srv != nil {
			ns.PID = n.srv.PID()
		}
		st.Nodes = append(st.Nodes, ns)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	tmp := filepath.Join(c.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.Dir, stateFile)); err != nil {
		return fmt.Errorf("cluster state: %w", err)
	}
	return nil
}

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("cluster state %s: %w", dir, err)
	}
	if !nameRe.MatchString(st.Name) || len(st.Nodes) == 0 || len(st.Nodes) > 8 {
		return nil, fmt.Errorf("cluster state %s: bad name or server count", dir)
	}
	return &st, nil
}

// cluster is the stopped cluster st describes (PIDs are not adopted:
// this process can only stop those through StopDir).
func (st *state) cluster(dir string) *Cluster {
	c := &Cluster{Dir: dir, Name: st.Name, ZKPort: st.ZKPort}
	for _, ns := range st.Nodes {
		c.Nodes = append(c.Nodes, &Node{Shard: ns.Shard, Replica: ns.Replica, Dir: filepath.Join(dir, fmt.Sprintf("s%dr%d", ns.Shard, ns.Replica)),
			TCPPort: ns.TCPPort, HTTPPort: ns.HTTPPort, InterPort: ns.InterPort})
	}
	return c
}

// Describe reports on the cluster in dir as a stopped Cluster (for its
// URL and ports) and whether any of its processes still runs.
func Describe(dir string) (c *Cluster, running bool, err error) {
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, false, err
	}
	st, err := readState(dir)
	if err != nil {
		return nil, false, err
	}
	running = ours(st.ZKPID, dir)
	for _, n := range st.Nodes {
		running = running || ours(n.PID, dir)
	}
	return st.cluster(dir), running, nil
}

// ours says whether pid is alive and one of this cluster's processes: its
// command line names a file in dir (so a reused PID is left alone).
func ours(pid int, dir string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), dir+string(filepath.Separator))
}

// StopDir stops the cluster another process started in dir, by the PIDs
// in its state file: the servers first, then ZooKeeper.
func StopDir(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	st, err := readState(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := range st.Nodes {
		errs = append(errs, stopPID(st.Nodes[i].PID, dir))
		st.Nodes[i].PID = 0
	}
	errs = append(errs, stopPID(st.ZKPID, dir))
	st.ZKPID = 0
	if err := st.cluster(dir).saveState(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// stopPID sends SIGTERM and waits for the process to go, then SIGKILL.
// The process is not our child, so it is gone when /proc no longer shows
// it as ours (init reaps it).
func stopPID(pid int, dir string) error {
	if !ours(pid, dir) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop %d: %w", pid, err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if sig == syscall.SIGKILL {
			syscall.Kill(pid, sig)
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if !ours(pid, dir) || zombie(pid) {
				return nil
			}
		}
	}
	return fmt.Errorf("process %d did not exit", pid)
}

// zombie: exited, waiting for a parent that is still alive to reap it.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}
