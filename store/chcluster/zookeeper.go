package chcluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rtmon/rtmon/store/chtest"
)

// zkJar is Debian's ZooKeeper server; its manifest's Class-Path names the
// other jars it needs, so the classpath is this one file (plus a logger).
const (
	zkJar       = "/usr/share/java/zookeeper.jar"
	slf4jSimple = "/usr/share/java/slf4j-simple.jar"
)

// ZooKeeper is one standalone ZooKeeper server started by this package.
type ZooKeeper struct {
	Dir    string
	Port   int
	cmd    *exec.Cmd
	exited chan struct{}
	pid    int
}

// ensureZooKeeper installs Debian's zookeeper package (the jars, no
// service) when the server jar is missing, and finds java.
func ensureZooKeeper(ctx context.Context) (java string, err error) {
	if _, err := os.Stat(zkJar); err != nil {
		if err := chtest.AptInstall(ctx, "zookeeper"); err != nil {
			return "", err
		}
	}
	java, err = exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("zookeeper: no java on PATH (the zookeeper package depends on one): %w", err)
	}
	return java, nil
}

// zkConfig: tickTime 2000 lets sessions of up to 40 s (ClickHouse asks
// for 30 s); the admin HTTP server is off (it would take port 8080); the
// four-letter words ruok/srvr are on for the readiness probe.
const zkConfig = `tickTime=2000
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
`

// startZooKeeper launches ZooKeeper on port in dir (reused: its data
// survives a restart, which the failure tests rely on).
func startZooKeeper(ctx context.Context, dir string, port int) (*ZooKeeper, error) {
	java, err := ensureZooKeeper(ctx)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, fmt.Errorf("zookeeper dir: %w", err)
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(zkConfig, filepath.Join(dir, "data"), port)), 0o644); err != nil {
		return nil, fmt.Errorf("zookeeper config: %w", err)
	}
	cp := zkJar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple
	}
	logf, err := os.OpenFile(filepath.Join(dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zookeeper log: %w", err)
	}
	// A small serial-GC heap: the cluster's metadata is tiny and the
	// machine runs four ClickHouse servers beside it.
	cmd := exec.Command(java, "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dzookeeper.jmx.log4j.disable=true", "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	z := &ZooKeeper{Dir: dir, Port: port, cmd: cmd, exited: make(chan struct{}), pid: cmd.Process.Pid}
	go func() { cmd.Wait(); logf.Close(); close(z.exited) }()
	if err := z.wait(ctx, 90*time.Second); err != nil {
		z.Stop()
		return nil, err
	}
	return z, nil
}

// wait polls "srvr" until ZooKeeper reports its mode, bounded in time.
// "ruok" is not enough: it answers "imok" while the server still closes
// every session ("ZooKeeperServer not running"), and an 18.16 server that
// connects then can crash (its DDL worker uses the failed session).
func (z *ZooKeeper) wait(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-z.exited:
			b, _ := os.ReadFile(filepath.Join(z.Dir, "zookeeper.log"))
			return fmt.Errorf("zookeeper exited during start-up: %s", tailText(b))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if strings.Contains(fourLetter(z.Port, "srvr"), "Mode:") {
			return nil
		}
	}
	return fmt.Errorf("zookeeper did not answer on 127.0.0.1:%d within %v", z.Port, limit)
}

// fourLetter sends a ZooKeeper four-letter command and returns the
// answer ("" on any failure).
func fourLetter(port int, word string) string {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(c, 1<<16))
	return strings.TrimSpace(string(b))
}

// PID is the ZooKeeper JVM's process id.
func (z *ZooKeeper) PID() int { return z.pid }

// Stop terminates ZooKeeper by PID (SIGTERM, then SIGKILL after a bound).
func (z *ZooKeeper) Stop() {
	if z == nil || z.cmd == nil || z.cmd.Process == nil {
		return
	}
	z.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-z.exited:
	case <-time.After(20 * time.Second):
		z.cmd.Process.Kill()
		<-z.exited
	}
}

func tailText(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}
