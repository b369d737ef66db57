package whatif

// The free null replay: the unchanged capture with every SYN judged by
// the model, the band of predictions that rest on it (FAST SYN, SPLICE).

import "fmt"

// judgeFree fills the per-class figures of the free null replay (see
// ClassFit.FreeBand). The anchored null replay is exact by construction
// on the SYNs it anchors, so its band says nothing of a replay that
// judges them all: on six overload baselines whose anchored null replay
// was exact, the free one put the high class's p90 off by 8-28%, about
// as far as FAST SYN's predictions then missed the real runs.
func (d *Dataset) judgeFree(f *queueFit, o *Options) {
	m := &f.model
	freeP50, freeP90 := map[string]int64{}, map[string]int64{}
	if m.Backlog > 0 {
		l := d.newClosedLoop(nil, o, f)
		l.ch.freeSYNs = true
		l.run()
		byClass := map[string][]int64{}
		for _, u := range l.out {
			byClass[u.Class] = append(byClass[u.Class], u.Predicted)
		}
		for c, v := range byClass {
			freeP50[c], freeP90[c] = pctl(v, 0.5), pctl(v, 0.9)
		}
	}
	m.FreeWorst = 0
	for i := range m.Fit {
		cf := &m.Fit[i]
		cf.FreeUnitP50, cf.FreeUnitP90, cf.FreeBand = cf.UnitP50[1], cf.UnitP90[1], cf.Band
		if m.Backlog > 0 {
			cf.FreeUnitP50, cf.FreeUnitP90 = freeP50[cf.Class], freeP90[cf.Class]
			cf.FreeBand = [2]float64{relErr(cf.FreeUnitP50, cf.UnitP50[0]), relErr(cf.FreeUnitP90, cf.UnitP90[0])}
		}
		m.FreeWorst = max(m.FreeWorst, cf.FreeBand[0], cf.FreeBand[1])
	}
	if m.FreeWorst > fitGoodEnough && m.FreeWorst > m.Worst {
		m.Notes = append(m.Notes, fmt.Sprintf("with every SYN judged by the model (FAST SYN, SPLICE) the null replay is off by up to %.0f%%: those predictions carry that uncertainty", 100*m.FreeWorst))
	}
}
