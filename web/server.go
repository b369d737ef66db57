// Package web serves rtmon's UI and API over a store: the overview an SRE
// keeps on a wall screen, pageview waterfalls, search, exports (CSV, JSON,
// HAR, HTML and PDF reports), Prometheus /metrics and /healthz.
//
// It depends on a query.Querier (Config.Store): the reads, and the
// writer's Stats for cache keys and health. It knows no engine, so any
// Querier serves, the one store.Open returns or a fake. Its one write is an
// annotation (Config.Annotations, optional; see annotations.go).
//
// Every string shown came from the network, so the front end builds DOM with
// textContent only, server-rendered pages use html/template, and every
// response carries a strict Content-Security-Policy. The UI is read-only:
// only GET and HEAD routes exist, but for POST /api/annotations, which
// takes only a JSON body so that no other site's page can make a browser
// send it (annotations.go).
package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/net/netutil"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store/query"
)

// DefaultListen is loopback only: the UI shows captured URLs and client
// addresses, which must not be exposed by accident.
const DefaultListen = "127.0.0.1:8080"

// Config configures a Server.
type Config struct {
	// Store is what the UI reads: the queries, and the writer's Stats
	// (a change counter for the caches, whether rollups are kept,
	// health). Required.
	Store query.Querier
	// Listen is host:port; default DefaultListen. A non-loopback address
	// needs Token or BasicAuth.
	Listen string
	// Token, if set, is required as "Authorization: Bearer TOKEN" or once
	// as ?token=TOKEN (which sets a cookie, so a wall screen can open a
	// plain link).
	Token string
	// BasicAuth "user:password", if set, is required with HTTP basic auth.
	BasicAuth string
	// AllowedHosts are the host names (no port) the UI answers to besides
	// loopback ones, when it runs without Token and BasicAuth: behind a
	// proxy that keeps the Host header, say. Any other Host is refused
	// (421), so that a page whose name was rebound to 127.0.0.1 (DNS
	// rebinding) cannot read a loopback UI. With credentials every Host is
	// served: such a page has none to send.
	AllowedHosts []string
	// PublicURL is where users reach the UI ("https://rtmon.example.com/")
	// when that is not a loopback name: its host joins AllowedHosts, and
	// a request whose Origin is neither the UI itself, a loopback name nor
	// an allowed host is refused (403): another site's page cannot make a
	// browser act on the UI.
	PublicURL string
	// LiveWriteTimeout bounds each write of the live stream: a browser
	// that reads nothing for this long is disconnected (default 30 s).
	LiveWriteTimeout time.Duration
	// TLSCert and TLSKey, if set, are PEM files: the UI is served over
	// HTTPS only, and the login cookie is marked Secure.
	TLSCert, TLSKey string
	// Annotations, if set, stores the marks drawn on the time charts
	// (POST /api/annotations); nil: none are listed and a POST answers
	// 501.
	Annotations query.Annotator
	// Live, if set, feeds the live panel (server-sent events) and the
	// pipeline metrics; nil for a UI over a stored capture.
	Live *LiveFeed
	// SLOs are the classes' objectives (pageview.Classes.SLOs): /metrics
	// exports them and gives the response-time histograms a bucket at each
	// threshold, for the rules `rtmon rules` writes.
	SLOs []pageview.ClassSLO
	// WhatIf, if set, serves the what-if page at /whatif with these
	// options and shows it in the navigation.
	WhatIf *WhatIfOptions
	// Chromium is the browser used for PDF reports; default /usr/bin/chromium
	// or "chromium" on PATH.
	Chromium string
	// MaxExportRows bounds CSV/JSON exports (default 1,000,000).
	MaxExportRows int
	// CacheTTL is how long an overview answer is reused for the same view
	// while the store has written nothing new (default 5 s; < 0: never).
	CacheTTL time.Duration
	// ExactBelow: the overview of a store with fewer transactions than
	// this computes exact percentiles from the records; from this many on
	// it reads the per-minute rollups (query.Summary), whose percentiles
	// are within query.RollupRelError, and which cost the same over a day
	// of 10M transactions as over a minute, if the store keeps them
	// (store.Options.Rollups). Default 1,000,000; < 0: always exact.
	ExactBelow int64
	// Title is shown in the header; default "rtmon".
	Title string
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Server is the UI's HTTP server.
type Server struct {
	cfg     Config
	engine  *gin.Engine
	metrics *metrics
	cache   overviewCache
	ln      net.Listener
	once    sync.Once
	lnErr   error
}

// NewServer checks cfg and builds the routes; Run starts serving.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("web: Config.Store is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.BasicAuth != "" && !strings.Contains(cfg.BasicAuth, ":") {
		return nil, errors.New("web: BasicAuth must be user:password")
	}
	loop, err := isLoopback(cfg.Listen)
	if err != nil {
		return nil, err
	}
	if !loop && cfg.Token == "" && cfg.BasicAuth == "" {
		return nil, fmt.Errorf("web: refusing to listen on %s without a token or basic auth: the UI shows captured URLs and client addresses (set a token, basic auth, or listen on 127.0.0.1)", cfg.Listen)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("web: TLS needs both a certificate and a key file")
	}
	if cfg.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, fmt.Errorf("web: TLS certificate: %w", err)
		}
	}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("web: public URL %q: want http(s)://host[:port]/", cfg.PublicURL)
		}
		cfg.AllowedHosts = append(slices.Clone(cfg.AllowedHosts), u.Hostname())
	}
	for i, h := range cfg.AllowedHosts {
		cfg.AllowedHosts[i] = strings.ToLower(strings.TrimSuffix(h, "."))
	}
	if cfg.MaxExportRows <= 0 {
		cfg.MaxExportRows = 1_000_000
	}
	if cfg.Title == "" {
		cfg.Title = "rtmon"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.LiveWriteTimeout <= 0 {
		cfg.LiveWriteTimeout = 30 * time.Second
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = 5 * time.Second
	}
	s := &Server{cfg: cfg, cache: overviewCache{ttl: cfg.CacheTTL}}
	s.metrics = newMetrics(cfg.Store, cfg.Live, cfg.SLOs)
	s.engine = s.routes()
	return s, nil
}

// isLoopback reports whether host:port binds only loopback addresses. An
// empty host binds every interface, so it is not loopback.
func isLoopback(listen string) (bool, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false, fmt.Errorf("web: listen address %q: %w", listen, err)
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		// A name could resolve anywhere; treat it as exposed.
		return false, nil
	}
	return ip.IsLoopback(), nil
}

// Handler is the server's http.Handler, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.engine }

// maxConns bounds the UI's open connections: a wall of screens and a few
// SREs need tens, and a client opening thousands must not exhaust the
// process's file descriptors.
const maxConns = 512

func (s *Server) listen() error {
	s.once.Do(func() {
		s.ln, s.lnErr = net.Listen("tcp", s.cfg.Listen)
		if s.lnErr != nil {
			s.lnErr = fmt.Errorf("web: listen on %s: %w", s.cfg.Listen, s.lnErr)
			return
		}
		s.ln = netutil.LimitListener(s.ln, maxConns)
	})
	return s.lnErr
}

// URL is where the UI is reachable, e.g. http://127.0.0.1:8080/. It binds
// the listener if Run has not yet, so a port of 0 yields the real port.
func (s *Server) URL() string {
	if err := s.listen(); err != nil {
		return "http://" + s.cfg.Listen + "/"
	}
	addr, ok := s.ln.Addr().(*net.TCPAddr)
	if !ok {
		return "http://" + s.cfg.Listen + "/"
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http://"
	if s.cfg.TLSCert != "" {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, fmt.Sprint(addr.Port)) + "/"
}

// Run serves until ctx ends, then shuts down gracefully (5 s).
func (s *Server) Run(ctx context.Context) error {
	if err := s.listen(); err != nil {
		return err
	}
	// Requests are GETs without bodies (an annotation's POST body is at
	// most maxAnnotationBody): reading one takes no time, and a
	// client that keeps an idle connection or a slow header is dropped.
	// Responses have no overall deadline (exports and the live stream are
	// long); the live stream bounds each write instead (LiveWriteTimeout).
	srv := &http.Server{
		Handler:           s.engine,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLSCert != "" {
			errc <- srv.ServeTLS(s.ln, s.cfg.TLSCert, s.cfg.TLSKey)
			return
		}
		errc <- srv.Serve(s.ln)
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("web: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Server-sent event streams end with ctx (BaseContext), so Shutdown
	// does not wait on them.
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("web: shutdown: %w", err)
	}
	return nil
}

// CSP is sent with every response: no inline scripts or styles, no
// framing, nothing loaded from elsewhere.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

func securityHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	c.Next()
}

const authCookie = "rtmon_token"

// hostCheck refuses, on a UI without credentials, a Host that is neither
// loopback nor in Config.AllowedHosts (see there).
func (s *Server) hostCheck(c *gin.Context) {
	if s.cfg.Token != "" || s.cfg.BasicAuth != "" {
		c.Next()
		return
	}
	host := c.Request.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if s.allowedName(host) {
		c.Next()
		return
	}
	c.AbortWithStatusJSON(http.StatusMisdirectedRequest, gin.H{
		"error": "this UI answers only to loopback names or its allowed hosts (--allow-host), or needs a token"})
}

// allowedName: a loopback name or address, or an allowed host.
func (s *Server) allowedName(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	ip := net.ParseIP(host)
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || ip != nil && ip.IsLoopback() ||
		slices.Contains(s.cfg.AllowedHosts, host)
}

// originCheck refuses a request a page of another site made the browser
// send: its Origin is neither the UI itself (the Host it asked for) nor a
// loopback name or allowed host. Requests without Origin (navigation,
// same-origin GETs, scripts) pass.
func (s *Server) originCheck(c *gin.Context) {
	origin := c.GetHeader("Origin")
	if origin == "" {
		c.Next()
		return
	}
	u, err := url.Parse(origin)
	if err == nil && u.Host != "" && (strings.EqualFold(u.Host, c.Request.Host) || s.allowedName(u.Hostname())) {
		c.Next()
		return
	}
	c.AbortWithStatusJSON(http.StatusForbidden, gin.H{"error": "cross-origin request refused (Origin is not this UI, a loopback name or --public-url)"})
}

func (s *Server) auth(c *gin.Context) {
	if s.cfg.Token == "" && s.cfg.BasicAuth == "" {
		c.Next()
		return
	}
	// Probes must work without credentials; they reveal nothing captured.
	if c.Request.URL.Path == "/healthz" {
		c.Next()
		return
	}
	if s.cfg.Token != "" {
		if tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok && equal(tok, s.cfg.Token) {
			c.Next()
			return
		}
		if ck, err := c.Cookie(authCookie); err == nil && validSessionCookie(ck, s.cfg.Token, time.Now()) {
			c.Next()
			return
		}
		if q := c.Query("token"); q != "" && equal(q, s.cfg.Token) {
			http.SetCookie(c.Writer, &http.Cookie{Name: authCookie, Value: sessionCookie(s.cfg.Token, time.Now()), Path: "/",
				MaxAge: int(sessionMaxAge / time.Second), HttpOnly: true, Secure: c.Request.TLS != nil,
				SameSite: http.SameSiteStrictMode})
			// Take the token out of the address bar and history.
			c.Redirect(http.StatusSeeOther, sameSiteTarget(c.Request.URL))
			c.Abort()
			return
		}
	}
	if s.cfg.BasicAuth != "" {
		user, pass, _ := strings.Cut(s.cfg.BasicAuth, ":")
		if u, p, ok := c.Request.BasicAuth(); ok && equal(u, user) && equal(p, pass) {
			c.Next()
			return
		}
		c.Header("WWW-Authenticate", `Basic realm="rtmon", charset="UTF-8"`)
	}
	c.AbortWithStatusJSON(http.StatusUnauthorized, gin.H{"error": "authentication required"})
}

// sessionMaxAge is how long a token login lasts: a wall screen logs in
// again weekly, a stolen cookie stops working.
const sessionMaxAge = 7 * 24 * time.Hour

// sessionCookie is the login cookie issued at now: the issue time, a
// random nonce and their HMAC under the token, so the token itself never
// enters the cookie jar, no two logins share a value, and an old one
// expires.
func sessionCookie(token string, now time.Time) string {
	msg := binary.BigEndian.AppendUint64(nil, uint64(now.Unix()))
	msg = append(msg, make([]byte, sessionNonce)...)
	_, _ = rand.Read(msg[8:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(append(msg, sessionMAC(token, msg)...))
}

// sessionNonce is the random part of a session cookie, in bytes.
const sessionNonce = 16

func sessionMAC(token string, msg []byte) []byte {
	m := hmac.New(sha256.New, []byte("rtmon-session\x00"+token))
	m.Write(msg)
	return m.Sum(nil)
}

// validSessionCookie checks the MAC and that the cookie was issued within
// sessionMaxAge before now (and not after it, give or take a minute).
func validSessionCookie(v, token string, now time.Time) bool {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	const msgLen = 8 + sessionNonce
	if err != nil || len(raw) != msgLen+sha256.Size || !hmac.Equal(raw[msgLen:], sessionMAC(token, raw[:msgLen])) {
		return false
	}
	issued := time.Unix(int64(binary.BigEndian.Uint64(raw[:8])), 0)
	return !issued.After(now.Add(time.Minute)) && now.Sub(issued) <= sessionMaxAge
}

// sameSiteTarget is u without its token parameter, as a path on this site:
// a path that starts with "//" or "/\" would send a browser to another
// host (an open redirect), so it loses its extra slashes.
func sameSiteTarget(u *url.URL) string {
	path := u.EscapedPath()
	if trimmed := strings.TrimLeft(path, "/\\"); trimmed != path || path == "" {
		path = "/" + trimmed
	}
	v := u.Query()
	v.Del("token")
	if q := v.Encode(); q != "" {
		return path + "?" + q
	}
	return path
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.Use(gin.Recovery(), securityHeaders, s.hostCheck, s.originCheck, s.auth)

	// Pages (HTML shells filled by the bundled script).
	r.GET("/", s.page("overview"))
	r.GET("/search", s.page("search"))
	r.GET("/pageview/:id", s.page("pageview"))
	r.GET("/tx/pageview", s.txPageview)
	r.GET("/compare", s.comparePage)
	s.whatIfRoutes(r)
	r.GET("/assets/*file", s.asset)

	api := r.Group("/api", func(c *gin.Context) { c.Header("Cache-Control", "no-store"); c.Next() })
	api.GET("/meta", s.apiMeta)
	api.GET("/overview", s.apiOverview)
	api.GET("/slo", s.apiSLO)
	api.GET("/sensors", s.apiSensors)
	api.GET("/search", s.apiSearch)
	api.GET("/compare", s.apiCompare)
	api.GET("/pageview/:id", s.apiPageview)
	api.GET("/live", s.apiLive)
	api.GET("/annotations", s.apiAnnotations)
	api.POST("/annotations", s.postAnnotation)

	r.GET("/export/search.csv", s.exportSearchCSV)
	r.GET("/export/search.json", s.exportSearchJSON)
	r.GET("/export/har/:id", s.exportHAR)
	r.GET("/export/report.html", s.exportReportHTML)
	r.GET("/export/report.pdf", s.exportReportPDF)

	r.GET("/metrics", gin.WrapH(s.metrics.handler()))
	r.GET("/healthz", s.healthz)

	// HEAD is answered like GET (without a body) on every route.
	for _, rt := range r.Routes() {
		if rt.Method == http.MethodGet {
			r.HEAD(rt.Path, rt.HandlerFunc)
		}
	}
	r.NoRoute(func(c *gin.Context) {
		s.errorPage(c, http.StatusNotFound, "Not found", "There is no page at this address.")
	})
	return r
}

func (s *Server) healthz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
	defer cancel()
	if _, err := s.cfg.Store.Classes(ctx, query.TimeRange{From: time.Now().UnixNano()}); err != nil {
		c.String(http.StatusServiceUnavailable, "store: %v\n", err)
		return
	}
	st := s.cfg.Store.Stats()
	if state := storeState(st); state != "" {
		c.String(http.StatusOK, "ok (store %s: %d queued: %s)\n", state, st.Queued, st.LastError)
		return
	}
	if st.LastError != "" && st.Queued > 0 {
		c.String(http.StatusOK, "ok (store writer retrying: %d queued: %s)\n", st.Queued, st.LastError)
		return
	}
	c.String(http.StatusOK, "ok\n")
}
