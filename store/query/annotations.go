package query

import "context"

// Annotation marks a moment on the charts: a deploy, a config change, an
// RLM action switched on (source "user", posted through the UI's API or
// `rtmon annotate`), or something rtmon saw itself (source "rtmon": the
// capture began dropping packets).
type Annotation struct {
	ID     string   `json:"id"`
	TimeMs int64    `json:"time_ms"` // ms since the epoch
	Text   string   `json:"text"`
	Tags   []string `json:"tags"`
	Source string   `json:"source"`
	// Class, if set, is the client class the annotation is about.
	Class string `json:"class,omitempty"`
}

// Annotation sources.
const (
	SourceUser  = "user"
	SourceRtmon = "rtmon"
)

// Bounds of what an annotation keeps: longer texts, tags and classes are
// cut (on a UTF-8 boundary), extra tags dropped.
const (
	MaxAnnotationText  = 1000 // bytes
	MaxAnnotationTags  = 16
	MaxAnnotationTag   = 64 // bytes per tag
	MaxAnnotationClass = 64
	// MaxAnnotations bounds one listing.
	MaxAnnotations = 1000
)

// AnnotationQuery lists the annotations with FromMs <= time < ToMs (ToMs 0:
// no upper bound), oldest first; at most Limit (default and bound
// MaxAnnotations), the newest when there are more.
type AnnotationQuery struct {
	FromMs, ToMs int64
	Limit        int
}

// Annotator stores and lists annotations. It is apart from Querier so that
// readers that never write (a fake store, a replica) need not have it.
type Annotator interface {
	// AddAnnotation stores a (its ID and, if 0, TimeMs are set here) and
	// returns it as stored: text, tags and class bounded.
	AddAnnotation(ctx context.Context, a Annotation) (Annotation, error)
	Annotations(ctx context.Context, q AnnotationQuery) ([]Annotation, error)
}
