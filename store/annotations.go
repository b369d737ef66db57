package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/rtmon/rtmon/store/query"
)

// Annotations are few and small (a deploy, a capture drop episode): one
// row each, written at once rather than batched with the records. time_ms
// is an Int64 of ms, not a DateTime64, which ClickHouse 18.16 lacks; day
// partitions them like the records, so retention drops them with the
// records they annotate. Tags are one comma-separated string (18.16 has
// arrays of strings, but the colSet feeds only int64 arrays, and a tag
// needs no comma).
var annotationTable = table{"annotations", cols(`day:d time_ms:i64 id:s source:s class:s tags:s text:s`)}

type (
	Annotation      = query.Annotation
	AnnotationQuery = query.AnnotationQuery
	Annotator       = query.Annotator
)

// annotationTimeBound: a ClickHouse Date (the day column) ends in 2105;
// nothing annotated is that far out.
var annotationTimeBound = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// AddAnnotation stores a bounded copy of a; see query.Annotator.
func (q *querier) AddAnnotation(ctx context.Context, a Annotation) (Annotation, error) {
	a, err := normalizeAnnotation(a, time.Now())
	if err != nil {
		return Annotation{}, err
	}
	cs := newColSet(annotationTable, 1)
	cs.next()
	cs.Day(a.TimeMs * int64(time.Millisecond))
	cs.I64(a.TimeMs)
	cs.Str(a.ID)
	cs.Str(a.Source)
	cs.Str(a.Class)
	cs.Str(strings.Join(a.Tags, ","))
	cs.Str(a.Text)
	cs.done()
	if err := q.ins.insert(ctx, cs); err != nil {
		return Annotation{}, fmt.Errorf("store annotation: %w", err)
	}
	return a, nil
}

// Annotations lists the annotations of q's range; see query.AnnotationQuery.
func (q *querier) Annotations(ctx context.Context, aq AnnotationQuery) ([]Annotation, error) {
	limit := aq.Limit
	if limit <= 0 || limit > query.MaxAnnotations {
		limit = query.MaxAnnotations
	}
	var w where
	w.add("time_ms >= ?", aq.FromMs)
	if aq.ToMs != 0 {
		w.add("time_ms < ?", aq.ToMs)
	}
	sqlText := fmt.Sprintf("SELECT time_ms, id, source, class, tags, text FROM %s WHERE %s ORDER BY time_ms DESC, id ASC LIMIT ?",
		q.d.table(annotationTable.name), w.String())
	out, err := queryAll(ctx, q.db(), sqlText, append(w.args, limit), func(rows *sql.Rows) (Annotation, error) {
		var a Annotation
		var tags string
		err := rows.Scan(&a.TimeMs, &a.ID, &a.Source, &a.Class, &tags, &a.Text)
		a.Tags = splitTags(tags)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("annotations: %w", err)
	}
	slices.Reverse(out) // the newest were kept; hand them oldest first
	return out, nil
}

func splitTags(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// normalizeAnnotation bounds a and fills in its id and, if unset, its time
// (now) and source (user).
func normalizeAnnotation(a Annotation, now time.Time) (Annotation, error) {
	if a.TimeMs == 0 {
		a.TimeMs = now.UnixMilli()
	}
	if a.TimeMs < 0 || a.TimeMs >= annotationTimeBound {
		return a, fmt.Errorf("annotation time %d ms: want a time between 1970 and 2100", a.TimeMs)
	}
	switch a.Source {
	case "":
		a.Source = query.SourceUser
	case query.SourceUser, query.SourceRtmon:
	default:
		return a, fmt.Errorf("annotation source %q: want %s or %s", a.Source, query.SourceUser, query.SourceRtmon)
	}
	a.Text = clip(strings.TrimSpace(strings.Map(dropControl(true, false), a.Text)), query.MaxAnnotationText)
	if a.Text == "" {
		return a, errors.New("annotation text is empty")
	}
	a.Class = clip(strings.TrimSpace(strings.Map(dropControl(false, false), a.Class)), query.MaxAnnotationClass)
	tags := []string{}
	for _, t := range a.Tags {
		t = clip(strings.TrimSpace(strings.Map(dropControl(false, true), t)), query.MaxAnnotationTag)
		if t != "" && !slices.Contains(tags, t) && len(tags) < query.MaxAnnotationTags {
			tags = append(tags, t)
		}
	}
	a.Tags = tags
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go 1.24+)
	a.ID = hex.EncodeToString(id[:])
	return a, nil
}

// dropControl removes control characters (but line breaks and tabs if
// keepLines) and commas, the tag separator, if dropCommas.
func dropControl(keepLines, dropCommas bool) func(rune) rune {
	return func(r rune) rune {
		if dropCommas && r == ',' {
			return -1
		}
		if unicode.IsControl(r) && !(keepLines && (r == '\n' || r == '\t')) {
			return -1
		}
		return r
	}
}
