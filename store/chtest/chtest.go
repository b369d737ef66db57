// Package chtest gives tests a ClickHouse server of their own: it installs the
// Debian package when the binary is missing (CI runs as root), starts
// clickhouse-server on free loopback ports with a config and data directory in
// a temp dir, and stops it by PID. Tests never touch a system-wide server.
package chtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is one clickhouse-server process started by this package.
type Server struct {
	Dir      string
	TCPPort  int
	HTTPPort int
	cmd      *exec.Cmd
	exited   chan struct{}
	logPath  string
}

// URL is the store URL for database db on this server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("clickhouse://127.0.0.1:%d/%s", s.TCPPort, db)
}

// Addr is host:port of the native protocol.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.TCPPort) }

// EnsureBinary installs clickhouse-server with apt-get when it is missing.
func EnsureBinary(ctx context.Context) (string, error) {
	if p, err := exec.LookPath("clickhouse-server"); err == nil {
		return p, nil
	}
	if err := AptInstall(ctx, "clickhouse-server"); err != nil {
		return "", err
	}
	return exec.LookPath("clickhouse-server")
}

// AptInstall installs Debian packages without their recommends (tests run
// as root on CI; package chcluster installs zookeeper with it too).
func AptInstall(ctx context.Context, pkgs ...string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s not installed and not root: apt-get install -y %s", strings.Join(pkgs, " "), strings.Join(pkgs, " "))
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	install := func() error {
		cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get install %s: %w: %s", strings.Join(pkgs, " "), err, tail(out))
		}
		return nil
	}
	if err := install(); err != nil {
		// A fresh CI image may have empty package lists.
		cmd := exec.CommandContext(ctx, "apt-get", "update")
		cmd.Env = env
		if out, uerr := cmd.CombinedOutput(); uerr != nil {
			return fmt.Errorf("apt-get update: %w: %s", uerr, tail(out))
		}
		return install()
	}
	return nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

const configTmpl = `<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{{DIR}}/server.log</log><errorlog>{{DIR}}/server.err.log</errorlog><size>100M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{{TCP}}</tcp_port>
  <http_port>{{HTTP}}</http_port>
  <path>{{DIR}}/data/</path>
  <tmp_path>{{DIR}}/tmp/</tmp_path>
  <user_files_path>{{DIR}}/user_files/</user_files_path>
  <format_schema_path>{{DIR}}/format_schemas/</format_schema_path>
  <users_config>{{DIR}}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <max_concurrent_queries>100</max_concurrent_queries>
  <timezone>UTC</timezone>
</yandex>
`

const usersXML = `<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users><default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks><profile>default</profile><quota>default</quota></default></users>
  <quotas><default></default></quotas>
</yandex>
`

// Start launches a server in dir (created if needed; reusing a dir keeps
// its data, which restart tests rely on). Ports 0 pick free ones.
func Start(ctx context.Context, dir string, tcpPort, httpPort int) (*Server, error) {
	bin, err := EnsureBinary(ctx)
	if err != nil {
		return nil, err
	}
	if tcpPort == 0 {
		if tcpPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if httpPort == 0 {
		if httpPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"data", "tmp", "user_files", "format_schemas"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	cfg := strings.NewReplacer("{{DIR}}", dir, "{{TCP}}", strconv.Itoa(tcpPort), "{{HTTP}}", strconv.Itoa(httpPort)).Replace(configTmpl)
	cfgPath := filepath.Join(dir, "config.xml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "users.xml"), []byte(usersXML), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "stdout.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config-file="+cfgPath)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group so a test binary's death does not leave it attached to our terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start clickhouse-server: %w", err)
	}
	s := &Server{Dir: dir, TCPPort: tcpPort, HTTPPort: httpPort, cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() { cmd.Wait(); logf.Close(); close(s.exited) }()
	if err := s.wait(ctx, 60*time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// wait polls the HTTP /ping endpoint, bounded in time.
func (s *Server) wait(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(s.Dir, "server.err.log"))
			o, _ := os.ReadFile(s.logPath)
			return fmt.Errorf("clickhouse-server exited during start-up: %s %s", tail(o), tail(b))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
	}
	return fmt.Errorf("clickhouse-server did not listen on %s within %v", s.Addr(), limit)
}

// Stop terminates the server by PID (SIGTERM, then SIGKILL after a bound).
func (s *Server) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// Exited reports whether the server process has ended (a crash, or Stop).
func (s *Server) Exited() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// PID is the server's process id (for harnesses that stop it from
// another process).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Restart stops the server and starts it again on the same dir and ports;
// s then refers to the new process (so a deferred Stop stops that one).
func (s *Server) Restart(ctx context.Context) error {
	s.Stop()
	n, err := Start(ctx, s.Dir, s.TCPPort, s.HTTPPort)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// CPUTime is the user+system CPU the server process has used so far, read
// from /proc; benchmarks report it to separate server from client cost.
func (s *Server) CPUTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("clickhouse server cpu: %w", err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// the 14th and 15th fields of the whole line.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("clickhouse server cpu: short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("clickhouse server cpu: bad /proc stat")
	}
	// USER_HZ is 100 on every Linux build Debian ships.
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// WaitMerges waits until the server runs no merge for a second, at most
// limit: benchmarks use it to measure queries in the steady state rather
// than while a bulk load's parts are still being merged.
func (s *Server) WaitMerges(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	quiet := 0
	for time.Now().Before(deadline) {
		u := fmt.Sprintf("http://127.0.0.1:%d/?query=%s", s.HTTPPort, url.QueryEscape("SELECT count() FROM system.merges"))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("clickhouse merges: %w", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(b)) == "0" {
			if quiet++; quiet >= 4 {
				return nil
			}
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("clickhouse merges still running after %v", limit)
}
