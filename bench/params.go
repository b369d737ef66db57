package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rtmon/rtmon/synth"
)

// Params are what decides the bytes of the generated capture. A file is reused
// only when its sidecar records the same Params, so a changed flag never
// benchmarks a stale file.
type Params struct {
	Version      int     `json:"version"` // bumped when the workload recipe here changes
	TargetBytes  int64   `json:"target_bytes"`
	Clients      int     `json:"clients"`
	Seed         int64   `json:"seed"`
	SYNLoss      float64 `json:"syn_loss"`
	SYNACKLoss   float64 `json:"synack_loss"`
	DataLoss     float64 `json:"data_loss"`
	PcapNanosecs bool    `json:"pcap_ns"`
	// HTTPS selects the HTTPS capture (see GenerateHTTPSFile) of Sessions
	// distinct TLS sessions; Clients and the loss rates do not apply to it.
	HTTPS    bool `json:"https,omitempty"`
	Sessions int  `json:"sessions,omitempty"`
}

// ParamsVersion is the current recipe version. 2: container pages are
// HTML markup (synth Workload.Markup) instead of filler.
const ParamsVersion = 2

// Workload is the synth workload the parameters describe. Its container
// pages are markup, so rtmon's HTML reading costs what real pages cost.
func (p Params) Workload() synth.Workload {
	return synth.Workload{Seed: p.Seed, Clients: p.Clients, TargetBytes: p.TargetBytes,
		SYNLossRate: p.SYNLoss, SYNACKLossRate: p.SYNACKLoss, DataLossRate: p.DataLoss, Markup: true}
}

// Options are the synth file options.
func (p Params) Options() synth.Options { return synth.Options{Nanosecond: p.PcapNanosecs} }

// Sidecar is the JSON file written next to a finished capture.
type Sidecar struct {
	Params  Params `json:"params"`
	Packets int64  `json:"packets"`
	Bytes   int64  `json:"bytes"`
}

// SidecarPath names the sidecar of capture path.
func SidecarPath(path string) string { return path + ".params.json" }

// WriteSidecar records that path holds a complete capture for s.Params. It is
// written only after the capture is closed, so an interrupted generation
// leaves no sidecar and is regenerated.
func WriteSidecar(path string, s Sidecar) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("sidecar: %w", err)
	}
	if err := os.WriteFile(SidecarPath(path), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("sidecar: %w", err)
	}
	return nil
}

// Reusable reports whether path is a complete capture for p: its sidecar
// holds the same parameters and the file has the recorded size.
func Reusable(path string, p Params) (Sidecar, bool, error) {
	var s Sidecar
	b, err := os.ReadFile(SidecarPath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("sidecar: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, false, nil // a damaged sidecar just means regenerate
	}
	if s.Params != p {
		return s, false, nil
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("capture: %w", err)
	}
	return s, st.Size() == s.Bytes, nil
}
