package testbed

// The validation workload's page loads: who loads which page when.

import (
	"net/netip"
	"time"
)

// lowClients are the low class's addresses: ValidateLow, or LowClients
// addresses from ValidateLow's first on (198.51.100.32 up; at most 96).
func (s ValidationSpec) lowClients() []netip.Addr {
	if s.LowClients <= 0 {
		return ValidateLow
	}
	out := make([]netip.Addr, 0, s.LowClients)
	for a := ValidateLow[0]; len(out) < min(s.LowClients, 96); a = a.Next() {
		out = append(out, a)
	}
	return out
}

// perClass is how many loads class makes.
func (s ValidationSpec) perClass(class string) int {
	if class == ValidateLowClass && s.LowPerClass > 0 {
		return s.LowPerClass
	}
	return s.PerClass
}

// validationPlan is one page load of the workload: when, by whom, which
// page.
type validationPlan struct {
	at     time.Duration
	class  string
	client netip.Addr
	page   Page
}

// validationPlans is the two classes' open-loop streams of page loads.
func validationPlans(spec ValidationSpec) []validationPlan {
	var plans []validationPlan
	n := len(spec.Site.Pages)
	lowEvery := spec.Interval
	if spec.LowInterval > 0 {
		lowEvery = spec.LowInterval
	}
	for i := range spec.PerClass {
		plans = append(plans,
			validationPlan{time.Duration(i) * spec.Interval, ValidateHighClass, ValidateHigh[i%len(ValidateHigh)], spec.Site.Pages[i%n]})
	}
	low := spec.lowClients()
	perBurst := spec.perClass(ValidateLowClass)
	if spec.LowBurst > 0 {
		perBurst = max(int(spec.LowBurst/lowEvery), 1)
	}
	for i := range spec.perClass(ValidateLowClass) {
		at := spec.LowOffset + time.Duration(i/perBurst)*(spec.LowBurst+spec.LowPause) + time.Duration(i%perBurst)*lowEvery
		plans = append(plans, validationPlan{at, ValidateLowClass, low[i%len(low)], spec.Site.Pages[(i+n/2)%n]})
	}
	return plans
}
