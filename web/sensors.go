package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/store/query"
)

// Several front ends' sensors can write into one store: the overview's
// sensor panel breaks a range down by sensor, and search and the what-if
// take sensor= to look at one front end alone.

// maxSensorName bounds the sensor= parameter (ids are operator-chosen
// names; a longer one cannot match and would only bloat cache keys).
const maxSensorName = 128

// maxSensorsShown bounds the sensors the panel lists. Where the overview
// reads rollups, all their percentiles come from one read of them; else
// each costs one exact query over the raw records.
const maxSensorsShown = 16

// sensorParam reads sensor= ("" = every sensor).
func sensorParam(c *gin.Context) (string, error) {
	s := c.Query("sensor")
	if len(s) > maxSensorName {
		return "", badRequest{fmt.Errorf("sensor: longer than %d bytes", maxSensorName)}
	}
	return s, nil
}

// SensorsResponse is /api/sensors: each sensor's records in the range
// and its classes' transaction-time percentiles (ns; Quantiles). Truncated:
// more sensors stored records than are listed.
type SensorsResponse struct {
	Range     query.TimeRange `json:"range"`
	Quantiles []float64       `json:"quantiles"`
	Sensors   []SensorRow     `json:"sensors"`
	Truncated bool            `json:"truncated"`
	// Approx: the percentiles are from the rollups, each within this
	// relative error of the exact value (0: exact).
	Approx float64 `json:"approx,omitempty"`
	// MissingShards: shards that were down, whose records are not counted
	// (see partial.go).
	MissingShards []int `json:"missing_shards,omitempty"`
}

// SensorRow is one sensor's share of the range.
type SensorRow struct {
	query.SensorCounts
	Classes []SensorClass `json:"classes"`
}

// SensorClass is one class's transactions at one sensor: how many, and
// their total time at the response's quantiles (ns).
type SensorClass struct {
	Class  string  `json:"class"`
	Count  int64   `json:"count"`
	Values []int64 `json:"values"`
}

func (s *Server) apiSensors(c *gin.Context) {
	ctx, partial, _, r, ok := s.partialRange(c)
	if !ok {
		return
	}
	counts, err := s.cfg.Store.Sensors(ctx, r)
	if err != nil {
		fail(c, fmt.Errorf("sensors: %w", err))
		return
	}
	resp := SensorsResponse{Range: r, Quantiles: quantiles, Sensors: []SensorRow{}}
	if len(counts) > maxSensorsShown {
		counts, resp.Truncated = counts[:maxSensorsShown], true
	}
	rolled, err := s.sensorRollups(ctx, r, len(counts))
	if err != nil {
		fail(c, fmt.Errorf("sensor percentiles: %w", err))
		return
	}
	if rolled != nil {
		resp.Approx = query.RollupRelError
	}
	for _, sc := range counts {
		row := SensorRow{SensorCounts: sc, Classes: []SensorClass{}}
		if sc.Transactions > 0 {
			pcts, ok := rolled[sc.Sensor]
			if !ok {
				pcts, err = s.cfg.Store.Percentiles(ctx, query.PercentileQuery{Kind: query.Transactions, Range: r,
					Sensor: sc.Sensor, Component: "total", Qs: quantiles})
				if err != nil {
					fail(c, fmt.Errorf("sensor %q percentiles: %w", sc.Sensor, err))
					return
				}
			}
			for _, p := range pcts {
				row.Classes = append(row.Classes, SensorClass{Class: p.Class, Count: p.Count, Values: p.Values})
			}
		}
		resp.Sensors = append(resp.Sensors, row)
	}
	resp.MissingShards = missingShards(partial)
	c.JSON(http.StatusOK, resp)
}

// sensorRollups reads every sensor's class percentiles from one read of
// the rollups, where the overview would read them (a store past
// ExactBelow that keeps them) and more than one sensor is listed; nil
// otherwise, and the panel asks each sensor's records.
func (s *Server) sensorRollups(ctx context.Context, r query.TimeRange, listed int) (map[string][]query.ClassPercentiles, error) {
	if listed < 2 {
		return nil, nil
	}
	ext, err := dataExtent(ctx, s.cfg.Store)
	if err != nil {
		return nil, err
	}
	if !s.useRollups(ext, overviewParams{component: "total"}, time.Minute) {
		return nil, nil
	}
	sum, err := s.cfg.Store.Summary(ctx, query.SummaryQuery{Kind: query.Transactions, Range: r, Qs: quantiles, BySensor: true})
	if err != nil {
		return nil, err
	}
	out := make(map[string][]query.ClassPercentiles, len(sum.BySensor))
	for _, sp := range sum.BySensor {
		out[sp.Sensor] = sp.Classes
	}
	return out, nil
}
