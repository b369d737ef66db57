package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/store/query"
)

// Annotations: GET /api/annotations?from=&to= lists the marks the time
// charts draw; POST /api/annotations adds one (a deploy, a config change, an
// RLM action switched on). The POST is the UI's only write.
//
// A write must not be doable by another site's page through a browser that
// holds this UI's login (the SameSite=Strict cookie, or basic-auth
// credentials, which browsers attach to cross-site requests too). The POST
// therefore requires "Content-Type: application/json": an HTML form can
// only send urlencoded, multipart or text/plain bodies, and a script on
// another origin that sets application/json triggers a CORS preflight
// (OPTIONS), which this server never approves (405, no
// Access-Control-Allow-* headers), so the browser never sends the POST.
// originCheck refuses a foreign Origin besides. Non-browser clients
// (rtmon annotate, curl) send the JSON type and their credentials (Bearer
// token or basic auth) explicitly.

// maxAnnotationBody bounds a POST body: the text is cut to
// query.MaxAnnotationText anyway, so anything much longer is no annotation.
const maxAnnotationBody = 64 << 10

// annotationRequest is the POST body. Time is RFC 3339 (or YYYY-MM-DDTHH:MM
// UTC), a number of ms since the epoch, or absent for now.
type annotationRequest struct {
	Time  json.RawMessage `json:"time"`
	Text  string          `json:"text"`
	Tags  []string        `json:"tags"`
	Class string          `json:"class"`
}

type annotationsResponse struct {
	Annotations []query.Annotation `json:"annotations"`
	// Writable: this server stores annotations (POST works).
	Writable bool `json:"writable"`
}

func (s *Server) apiAnnotations(c *gin.Context) {
	var r query.TimeRange
	var err error
	if r.From, err = ParseTime(c.Query("from")); err != nil {
		bad(c, fmt.Errorf("from: %w", err))
		return
	}
	if r.To, err = ParseTime(c.Query("to")); err != nil {
		bad(c, fmt.Errorf("to: %w", err))
		return
	}
	limit := query.MaxAnnotations
	if l := c.Query("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit <= 0 || limit > query.MaxAnnotations {
			bad(c, fmt.Errorf("limit=%q: want 1 to %d", l, query.MaxAnnotations))
			return
		}
	}
	resp := annotationsResponse{Annotations: []query.Annotation{}, Writable: s.cfg.Annotations != nil}
	if s.cfg.Annotations == nil {
		c.JSON(http.StatusOK, resp)
		return
	}
	// ns in the URL like every range of the UI; ms in the store: an
	// annotation at ms m is at m*1e6 ns, inside [from, to) exactly when
	// ceil(from) <= m < ceil(to) in ms.
	q := query.AnnotationQuery{FromMs: ceilMs(r.From), Limit: limit}
	if r.To != 0 {
		q.ToMs = ceilMs(r.To)
	}
	list, err := s.cfg.Annotations.Annotations(c.Request.Context(), q)
	if err != nil {
		fail(c, err)
		return
	}
	resp.Annotations = nonNil(list)
	c.JSON(http.StatusOK, resp)
}

func ceilMs(ns int64) int64 { return floorMs(ns-1) + 1 }

func floorMs(ns int64) int64 {
	ms := ns / int64(time.Millisecond)
	if ns < 0 && ns%int64(time.Millisecond) != 0 {
		ms--
	}
	return ms
}

func (s *Server) postAnnotation(c *gin.Context) {
	if s.cfg.Annotations == nil {
		c.AbortWithStatusJSON(http.StatusNotImplemented, gin.H{
			"error": "this server does not store annotations: it was started without a store that takes them (rtmon serve and rtmon live do)"})
		return
	}
	if mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type")); err != nil || mt != "application/json" {
		c.AbortWithStatusJSON(http.StatusUnsupportedMediaType, gin.H{"error": "send the annotation as Content-Type: application/json"})
		return
	}
	a, err := readAnnotation(c)
	if err != nil {
		bad(c, err)
		return
	}
	stored, err := s.cfg.Annotations.AddAnnotation(c.Request.Context(), a)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, stored)
}

// readAnnotation decodes and checks the POST body. Text, tags and class are
// bounded by the store; the source is always "user" here: only rtmon itself
// writes "rtmon" annotations.
func readAnnotation(c *gin.Context) (query.Annotation, error) {
	var req annotationRequest
	dec := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, maxAnnotationBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return query.Annotation{}, fmt.Errorf("annotation body over %d bytes", maxAnnotationBody)
		}
		return query.Annotation{}, fmt.Errorf("annotation: want JSON {\"text\", \"time\", \"tags\", \"class\"}: %w", err)
	}
	if len(req.Tags) > 4*query.MaxAnnotationTags {
		return query.Annotation{}, fmt.Errorf("%d tags: want at most %d", len(req.Tags), query.MaxAnnotationTags)
	}
	ms, err := annotationTime(req.Time)
	if err != nil {
		return query.Annotation{}, err
	}
	if req.Text == "" {
		return query.Annotation{}, errors.New("annotation text is empty")
	}
	return query.Annotation{TimeMs: ms, Text: req.Text, Tags: req.Tags, Class: req.Class, Source: query.SourceUser}, nil
}

// annotationTime reads the time field: absent or null is 0 (the store's
// now), a number is ms since the epoch, a string what parseTime takes
// (a string of digits: ns, as in the URLs).
func annotationTime(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		if ms <= 0 {
			return 0, fmt.Errorf("time %d: want ms since the epoch", ms)
		}
		return ms, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, fmt.Errorf("time: want RFC 3339 or ms since the epoch: %w", err)
	}
	if str == "" {
		return 0, nil
	}
	ns, err := ParseTime(str)
	if err != nil {
		return 0, err
	}
	if ns <= 0 {
		return 0, fmt.Errorf("time %q: before 1970", str)
	}
	return floorMs(ns), nil
}
