package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/web"
)

// uiOptions are the web UI flags shared by serve-like commands (live, demo).
type uiOptions struct {
	listen, token, basic string
	tlsCert, tlsKey      string
	allowHosts           []string
	publicURL            string
	disabled             bool
	// classes is the classes file whose objectives /metrics exports
	// (serve's --classes; live's, which also classifies).
	classes string
}

func addUIFlags(f *pflag.FlagSet, o *uiOptions) {
	f.StringVar(&o.listen, "listen", web.DefaultListen, "web UI address (non-loopback needs --token or --basic-auth)")
	f.StringVar(&o.token, "token", "", "bearer token required from UI clients (default $RTMON_TOKEN)")
	f.StringVar(&o.basic, "basic-auth", "", "user:password required from UI clients (default $RTMON_BASIC_AUTH)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve the web UI over HTTPS with this PEM certificate (with --tls-key)")
	f.StringVar(&o.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	f.StringSliceVar(&o.allowHosts, "allow-host", nil, "host names the UI answers to besides loopback ones when it has no --token or --basic-auth (DNS-rebinding guard)")
	f.StringVar(&o.publicURL, "public-url", "", "where users reach the UI (https://rtmon.example.com/): its host is allowed, and requests from pages of other origins are refused")
	f.BoolVar(&o.disabled, "no-ui", false, "do not serve the web UI")
}

func (o uiOptions) server(st store.Store, feed *web.LiveFeed) (*web.Server, error) {
	if o.token == "" {
		o.token = os.Getenv("RTMON_TOKEN")
	}
	if o.basic == "" {
		o.basic = os.Getenv("RTMON_BASIC_AUTH")
	}
	var slos []pageview.ClassSLO
	if o.classes != "" {
		classes, err := pageview.LoadClasses(o.classes)
		if err != nil {
			return nil, fmt.Errorf("web UI: %w", err)
		}
		slos = classes.SLOs()
	}
	return web.NewServer(web.Config{Store: st, Annotations: st, Live: feed, Listen: o.listen, Token: o.token, BasicAuth: o.basic,
		TLSCert: o.tlsCert, TLSKey: o.tlsKey, AllowedHosts: o.allowHosts, PublicURL: o.publicURL,
		WhatIf: &web.WhatIfOptions{}, SLOs: slos})
}
