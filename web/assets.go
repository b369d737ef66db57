package web

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/gin-gonic/gin"
)

// dist holds the bundle `make ui` builds (app.js, app.css). A clean checkout
// has only PLACEHOLDER.txt there, so a plain `go build` works and the pages
// say how to get the full UI.
//
//go:embed all:dist
var dist embed.FS

// bundle is dist, replaceable in tests.
var bundle fs.FS = dist

// style.css is hand-written and committed, so even the placeholder pages
// are readable.
//
//go:embed ui/src/style.css
var styleCSS []byte

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.ParseFS(templateFS, "templates/page.html"))

// HasBundle reports whether the built front end is embedded.
func HasBundle() bool {
	_, err := fs.Stat(bundle, "dist/app.js")
	return err == nil
}

type pageData struct {
	Page, Title, Heading, Message string
	Live, WhatIf, HasBundle       bool
}

var headings = map[string]string{"overview": "Overview", "search": "Search", "pageview": "Pageview"}

func (s *Server) page(name string) gin.HandlerFunc {
	return func(c *gin.Context) {
		s.render(c, http.StatusOK, pageData{Page: name, Heading: headings[name]})
	}
}

func (s *Server) errorPage(c *gin.Context, status int, heading, msg string) {
	if strings.HasPrefix(c.Request.URL.Path, "/api/") || strings.HasPrefix(c.Request.URL.Path, "/export/") {
		c.JSON(status, gin.H{"error": msg})
		return
	}
	s.render(c, status, pageData{Page: "error", Heading: heading, Message: msg})
}

func (s *Server) render(c *gin.Context, status int, d pageData) {
	d.Title = s.cfg.Title
	d.Live = s.cfg.Live != nil
	d.WhatIf = s.cfg.WhatIf != nil
	d.HasBundle = HasBundle()
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, "page.html", d); err != nil {
		c.String(http.StatusInternalServerError, "template: %v", err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

func (s *Server) asset(c *gin.Context) {
	name := strings.TrimPrefix(path.Clean(c.Param("file")), "/")
	var data []byte
	if name == "style.css" {
		data = styleCSS
	} else {
		if name == "PLACEHOLDER.txt" {
			c.Status(http.StatusNotFound)
			return
		}
		b, err := fs.ReadFile(bundle, "dist/"+name)
		if err != nil {
			c.Status(http.StatusNotFound)
			return
		}
		data = b
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	// Assets change only with the binary; revalidation is cheap on loopback.
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, ct, data)
}
