package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// rtmon analyze with the privacy flags writes no real client address
// (the synthetic clients are 198.51.100.1-4) and keyed connection ids.
func TestAnalyzePrivacyFlags(t *testing.T) {
	in := generated(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "client.key")
	if err := os.WriteFile(key, []byte(strings.Repeat("5a", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var outs [2]string
	for i, extra := range [][]string{nil, {"--anonymize-clients", key, "--redact-query", "--redact-param", "ticket"}} {
		outs[i] = filepath.Join(dir, "out"+itoa(i))
		cmd := newAnalyzeCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"--out", outs[i], "--progress=false", in}, extra...))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
	}
	real := regexp.MustCompile(`"198\.51\.100\.[1-4]"`)
	for _, name := range []string{"connections.jsonl", "transactions.jsonl", "pageviews.jsonl"} {
		plain, err := os.ReadFile(filepath.Join(outs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		anon, err := os.ReadFile(filepath.Join(outs[1], name))
		if err != nil {
			t.Fatal(err)
		}
		if !real.Match(plain) || real.Match(anon) || bytes.Count(plain, []byte("\n")) != bytes.Count(anon, []byte("\n")) {
			t.Errorf("%s: real addresses without the flag %v, with it %v; %d and %d lines", name, real.Match(plain), real.Match(anon),
				bytes.Count(plain, []byte("\n")), bytes.Count(anon, []byte("\n")))
		}
		if id := regexp.MustCompile(`"id":"[0-9a-f]{16}`).Find(plain); id == nil || bytes.Contains(anon, id) {
			t.Errorf("%s: the id %s is the same with the key", name, id)
		}
	}
}

func TestPrivacyFlagsReachConfig(t *testing.T) {
	for _, cmd := range []string{"analyze", "live"} {
		c := newAnalyzeCommand()
		if cmd == "live" {
			c = newLiveCommand()
		}
		for _, f := range []string{"keep-url-secrets", "redact-param", "redact-query", "anonymize-clients"} {
			if c.Flags().Lookup(f) == nil {
				t.Errorf("%s has no --%s", cmd, f)
			}
		}
	}
	o := liveOptions{analyzeOptions: defaultAnalyze(), ifaces: []string{"lo"}}
	o.redactParams, o.redactQuery, o.clientKey = []string{"ticket", "nonce"}, true, "/etc/rtmon/client.key"
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if r := cfg.Tracker.Redaction; !slices.Equal(r.Params, o.redactParams) || !r.WholeQuery || cfg.ClientKeyFile != o.clientKey || cfg.Tracker.KeepURLSecrets {
		t.Errorf("config %+v, key file %q", r, cfg.ClientKeyFile)
	}
}

func TestPrivacyFlagConflicts(t *testing.T) {
	for name, mod := range map[string]func(*analyzeOptions){
		"keep and redact-query": func(o *analyzeOptions) { o.keepSecrets, o.redactQuery = true, true },
		"keep and redact-param": func(o *analyzeOptions) { o.keepSecrets, o.redactParams = true, []string{"x"} },
		"empty param":           func(o *analyzeOptions) { o.redactParams = []string{"a", " "} },
	} {
		o := defaultAnalyze()
		mod(&o)
		if _, err := o.config(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
