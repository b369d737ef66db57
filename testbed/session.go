package testbed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// This file runs one session of a scenario: one client program's loads.

// runSession runs one client program's loads.
func runSession(ctx context.Context, tb *Testbed, site *Site, base string, s Session) ([]PageTruth, error) {
	switch s.Browser {
	case BrowserChromium:
		return runChromiumSession(ctx, tb, site, base, s)
	case BrowserGo:
		return runGoSession(ctx, tb, site, base, s)
	case BrowserPipeline:
		return runPipelineSession(ctx, tb, site, base, s)
	}
	return nil, fmt.Errorf("unknown browser %q", s.Browser)
}

// loadPage is the site's page a load asks for.
func loadPage(site *Site, l Load) Page { return site.Pages[l.Page%len(site.Pages)] }

// loadURL is the URL a load starts at: the page, through the back end
// and/or a redirect as the load says.
func loadURL(site *Site, base string, l Load) string {
	p := loadPage(site, l)
	switch {
	case l.Redirect && l.ServerMS > 0:
		return base + p.AppRedirectPath(l.ServerMS)
	case l.Redirect:
		return base + p.RedirectPath()
	case l.ServerMS > 0:
		return base + p.AppPath(l.ServerMS)
	}
	return base + p.Path
}

// sleepCtx waits d, or until ctx ends (its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// inParallel runs f(0), ..., f(n-1) at once and returns their results and
// errors by index once all have returned.
func inParallel[T any](n int, f func(i int) (T, error)) ([]T, []error) {
	out := make([]T, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = f(i)
		}()
	}
	wg.Wait()
	return out, errs
}

// loadInTurn runs the loads one after the other, gap apart, and returns
// the pages loaded until the first error.
func loadInTurn(ctx context.Context, loads []Load, gap time.Duration, load func(Load) (PageTruth, error)) ([]PageTruth, error) {
	var out []PageTruth
	for i, l := range loads {
		if i > 0 {
			if err := sleepCtx(ctx, gap); err != nil {
				return out, err
			}
		}
		pt, err := load(l)
		if err != nil {
			return out, fmt.Errorf("load %d: %w", i, err)
		}
		out = append(out, pt)
	}
	return out, nil
}

// runChromiumSession loads each tab's pages back to back, the tabs at
// once, stays afterLoadDwell for the last pages' after-load requests and
// returns every tab's pages.
func runChromiumSession(ctx context.Context, tb *Testbed, site *Site, base string, s Session) ([]PageTruth, error) {
	chrome, err := tb.StartChromium(ctx, s.Client)
	if err != nil {
		return nil, err
	}
	defer chrome.Close()
	byTab := map[int][]Load{}
	ntabs := 0
	for _, l := range s.Loads {
		byTab[l.Tab] = append(byTab[l.Tab], l)
		ntabs = max(ntabs, l.Tab+1)
	}
	for len(chrome.Tabs) < ntabs {
		if _, err := chrome.NewTab(); err != nil {
			return nil, err
		}
	}
	_, errs := inParallel(ntabs, func(ti int) (struct{}, error) {
		for _, l := range byTab[ti] {
			if _, err := chrome.Tabs[ti].Load(ctx, loadURL(site, base, l)); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := sleepCtx(ctx, afterLoadDwell); err != nil {
		return nil, err
	}
	byPath := map[string]Page{}
	for _, p := range site.Pages {
		byPath[p.Path] = p
		byPath["/app"+p.Path] = p
	}
	var out []PageTruth
	for _, t := range chrome.Tabs {
		for _, pt := range t.Pages() {
			u, _, _ := strings.Cut(pt.URL, "?")
			pt.NoReferer = byPath[u].NoReferrer
			out = append(out, pt)
		}
	}
	return out, chrome.Close()
}

// runGoSession loads with the Go client: every load at once, each with its
// own client (Concurrent), or one client loading in turn.
func runGoSession(ctx context.Context, tb *Testbed, site *Site, base string, s Session) ([]PageTruth, error) {
	// Real-time only when asked: the truth is the wire, not the
	// client's clock, and real-time client threads beside a busy
	// Chromium starved the kernel's network processing (ksoftirqd),
	// which made the emulated link late by tens of ms (MeasureLink).
	if s.Realtime {
		defer clientRealtime()()
	}
	newClient := func() *GoClient {
		g := tb.NewGoClient(s.Client, base)
		g.NoReferer, g.KeepConnections, g.AcceptBrotli, g.AfterLoad = s.NoReferer, s.KeepConnections, s.Brotli, s.AfterLoad
		return g
	}
	if s.Concurrent {
		out, errs := inParallel(len(s.Loads), func(i int) (PageTruth, error) {
			return newClient().Load(ctx, pathOf(loadURL(site, base, s.Loads[i])))
		})
		return out, errors.Join(errs...)
	}
	g := newClient()
	defer g.Close()
	return loadInTurn(ctx, s.Loads, s.Gap, func(l Load) (PageTruth, error) {
		return g.Load(ctx, pathOf(loadURL(site, base, l)))
	})
}

// runPipelineSession loads in turn with the pipelining client.
func runPipelineSession(ctx context.Context, tb *Testbed, site *Site, base string, s Session) ([]PageTruth, error) {
	if s.Realtime {
		defer clientRealtime()()
	}
	return loadInTurn(ctx, s.Loads, s.Gap, func(l Load) (PageTruth, error) {
		return tb.Pipeline(ctx, s.Client, base, pathOf(loadURL(site, base, l)), loadPage(site, l))
	})
}
