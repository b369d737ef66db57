package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// benchChildEnv makes this test binary act as rtmon: bench runs itself
// (os.Executable) to generate, measure and analyze.
const benchChildEnv = "RTMON_TEST_AS_RTMON"

func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// bench --https on a tiny capture: rtmon keyless and decrypting find the
// same transactions, and tshark, when installed, as many responses.
func TestBenchHTTPS(t *testing.T) {
	t.Setenv(benchChildEnv, "1")
	dir := t.TempDir()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"bench", "--https", "--size", "3MB", "--dir", dir, "--cpus", "0", "--runs", "1",
		"--conn-mem", "0", "--tools", "tshark,tcpdump"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rows := regexp.MustCompile(`(?m)^\s*(rtmon --keylog|rtmon|tshark)\s+full 3MB\s.*?(\d+) (transactions|http.response lines)$`).
		FindAllStringSubmatch(out.String(), -1)
	counts := map[string]string{}
	for _, r := range rows {
		counts[r[1]] = r[2]
	}
	if counts["rtmon"] == "" || counts["rtmon"] == "0" || counts["rtmon --keylog"] != counts["rtmon"] {
		t.Errorf("transactions keyless %q, decrypted %q:\n%s", counts["rtmon"], counts["rtmon --keylog"], out.String())
	}
	if _, err := exec.LookPath("tshark"); err == nil && counts["tshark"] != counts["rtmon"] {
		t.Errorf("tshark: %q responses, rtmon %q transactions:\n%s", counts["tshark"], counts["rtmon"], out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte("rtmon vs tshark, both decrypting")) && counts["tshark"] != "" {
		t.Errorf("no tshark summary:\n%s", out.String())
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("without --keep the bench left %d files in --dir", len(left))
	}
}

// bench on a tiny capture: the rtmon row and the 2-worker row report the
// same transactions, and the speed-up line is printed.
func TestBenchWorkers(t *testing.T) {
	t.Setenv(benchChildEnv, "1")
	dir := t.TempDir()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"bench", "--size", "4MB", "--clients", "50", "--dir", dir, "--cpus", "0", "--runs", "1",
		"--conn-mem", "0", "--tools", "", "--workers", "2"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rows := regexp.MustCompile(`(?m)^\s*(rtmon|rtmon 2w)\s+full 4MB\s.*?(\d+) transactions$`).FindAllStringSubmatch(out.String(), -1)
	counts := map[string]string{}
	for _, r := range rows {
		counts[r[1]] = r[2]
	}
	if counts["rtmon"] == "" || counts["rtmon"] == "0" || counts["rtmon 2w"] != counts["rtmon"] {
		t.Errorf("transactions with 1 worker %q, with 2 %q:\n%s", counts["rtmon"], counts["rtmon 2w"], out.String())
	}
	if !regexp.MustCompile(`rtmon 2w on full 4MB: [0-9.]+x the speed`).Match(out.Bytes()) {
		t.Errorf("no speed-up line:\n%s", out.String())
	}
}

// bench --live on a tiny capture at one slow rate: each reader's row
// accounts for what tcpreplay sent, and a reader that dropped nothing
// finds the transactions analyze finds in the file. Whether the kernel
// drops depends on how long the reader is kept off the CPU (a libpcap
// ring's blocks close every few ms), which a busy machine decides: a
// reader that counted drops is run again, up to three times, and only a
// dropless run is held to the file's count.
func TestBenchLive(t *testing.T) {
	if _, err := exec.LookPath("tcpreplay"); err != nil {
		installForTest(t, "tcpreplay")
	}
	t.Setenv(benchChildEnv, "1")
	pending := map[string]bool{"afpacket": true, "libpcap": true}
	for attempt := 1; attempt <= 3 && len(pending) > 0; attempt++ {
		dir := t.TempDir()
		out := benchLiveReport(t, dir)
		want := fileTransactions(t, dir)
		rows := regexp.MustCompile(`(?m)^\s*(afpacket|libpcap)\s+20k pps\s+\d+\s+(\d+)\s+(\d+)\s+[0-9.]+\s+(\d+)\s*$`).FindAllStringSubmatch(out, -1)
		if len(rows) != 2 {
			t.Fatalf("want a row per reader:\n%s", out)
		}
		for _, r := range rows {
			switch {
			case r[2] == "0":
				t.Errorf("%s: sent nothing:\n%s", r[1], out)
			case r[3] != "0":
				t.Logf("attempt %d: %s dropped %s of %s sent (counted): its transactions are not checked", attempt, r[1], r[3], r[2])
			case r[4] != want:
				t.Errorf("%s: sent %s, none dropped, %s transactions; analyze found %s in the file", r[1], r[2], r[4], want)
				delete(pending, r[1])
			default:
				delete(pending, r[1])
			}
		}
	}
	for reader := range pending {
		t.Logf("%s dropped packets in every attempt on this busy machine: its drops were counted, its transactions not compared", reader)
	}
}

// benchLiveReport runs rtmon bench --live at 20k pps and keeps its capture
// in dir; it returns the report.
func benchLiveReport(t *testing.T, dir string) string {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"bench", "--live", "--size", "3MB", "--clients", "40", "--dir", dir, "--keep", "--rates", "20000", "--workers", "2"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return out.String()
}

// fileTransactions is how many transactions rtmon analyze finds in the
// one capture bench left in dir.
func fileTransactions(t *testing.T, dir string) string {
	t.Helper()
	pcaps, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if len(pcaps) != 1 {
		t.Fatalf("captures in --dir: %v", pcaps)
	}
	cmd := newRootCommand()
	var sum bytes.Buffer
	cmd.SetOut(&sum)
	cmd.SetArgs([]string{"analyze", "--progress=false", pcaps[0]})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := txRe.FindStringSubmatch(sum.String())
	if want == nil {
		t.Fatalf("analyze printed no transactions:\n%s", sum.String())
	}
	return want[1]
}

// installForTest installs a Debian package the test needs (CI runs as
// root on a fresh machine; make deps installs it too).
func installForTest(t *testing.T, pkg string) {
	t.Helper()
	for _, args := range [][]string{{"update", "-q"}, {"install", "-y", "-q", pkg}} {
		c := exec.Command("apt-get", args...)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if b, err := c.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %v: %v\n%s", args, err, b)
		}
	}
}
