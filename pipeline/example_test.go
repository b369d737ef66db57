package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/synth"
)

// Example analyzes a small synthetic capture as rtmon analyze does, with
// the records written as JSON Lines.
func Example() {
	dir, err := os.MkdirTemp("", "rtmon-pipeline-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	capture := filepath.Join(dir, "demo.pcap")
	if _, err := synth.GenerateFile(capture, synth.Options{Nanosecond: true},
		synth.Workload{Seed: 7, Clients: 3, Duration: 5 * time.Second}); err != nil {
		fmt.Println(err)
		return
	}

	cfg := pipeline.DefaultConfig()
	cfg.Files = []string{capture}
	cfg.OutDir = dir // connections.jsonl, transactions.jsonl, pageviews.jsonl
	p, err := pipeline.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Start(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	if err := p.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	s := p.Summary()
	fmt.Printf("%d connections, %d transactions\n", s.Connections, s.Transactions)
	for _, r := range p.ClassSummary().Rows() {
		fmt.Printf("class %s: %d pageviews\n", r.Class, r.Pageviews)
	}
	// Output:
	// 35 connections, 54 transactions
	// class default: 7 pageviews
}
