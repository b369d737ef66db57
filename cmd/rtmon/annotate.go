package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rtmon/rtmon/store/query"
)

type annotateOptions struct {
	url, token, basic string
	text, at, class   string
	tags              []string
	timeout           time.Duration
}

func newAnnotateCommand() *cobra.Command {
	var o annotateOptions
	cmd := &cobra.Command{
		Use:   "annotate --text TEXT [--url URL] [--tag TAG...]",
		Short: "Mark a deploy, a config change or an RLM action on a running rtmon's charts",
		Long: `annotate posts an annotation to a running rtmon serve or rtmon live
(POST /api/annotations): every time chart of the UI then shows a line at its
time with its text. Credentials are the UI's: --token (default $RTMON_TOKEN)
or --basic-auth user:pass (default $RTMON_BASIC_AUTH).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := postAnnotation(cmd.Context(), o)
			if err != nil {
				return fmt.Errorf("annotate: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "annotated %s UTC: %s (id %s)\n", time.UnixMilli(a.TimeMs).UTC().Format(time.DateTime), a.Text, a.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "http://127.0.0.1:8080/", "the running rtmon's UI address")
	f.StringVar(&o.token, "token", "", "bearer token of the UI (default $RTMON_TOKEN)")
	f.StringVar(&o.basic, "basic-auth", "", "user:password of the UI (default $RTMON_BASIC_AUTH)")
	f.StringVar(&o.text, "text", "", "what happened (at most 1000 bytes are kept)")
	f.StringArrayVar(&o.tags, "tag", nil, "a tag (repeatable)")
	f.StringVar(&o.at, "time", "now", "when: now, RFC 3339 (2026-12-05T12:00:00Z) or YYYY-MM-DDTHH:MM (UTC)")
	f.StringVar(&o.class, "class", "", "the client class it concerns, if one")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this long")
	_ = cmd.MarkFlagRequired("text")
	return cmd
}

// annotationTime is --time in ms since the epoch (0: now, the server's).
func annotationTime(s string) (int64, error) {
	if s == "" || s == "now" {
		return 0, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("--time %q: want now, RFC 3339 or YYYY-MM-DDTHH:MM", s)
}

// postAnnotation sends o's annotation and returns it as the server stored it.
func postAnnotation(ctx context.Context, o annotateOptions) (query.Annotation, error) {
	var a query.Annotation
	if strings.TrimSpace(o.text) == "" {
		return a, fmt.Errorf("--text is empty")
	}
	ms, err := annotationTime(o.at)
	if err != nil {
		return a, err
	}
	base, err := url.Parse(o.url)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return a, fmt.Errorf("--url %q: want http(s)://host:port/", o.url)
	}
	body := map[string]any{"text": o.text, "tags": o.tags, "class": o.class}
	if ms != 0 {
		body["time"] = ms
	}
	js, err := json.Marshal(body)
	if err != nil {
		return a, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.JoinPath("/api/annotations").String(), bytes.NewReader(js))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := setCredentials(req, o); err != nil {
		return a, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return a, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct{ Error string }
		if json.Unmarshal(got, &e) == nil && e.Error != "" {
			return a, fmt.Errorf("%s: %s (%s)", req.URL.Redacted(), e.Error, resp.Status)
		}
		return a, fmt.Errorf("%s: %s", req.URL.Redacted(), resp.Status)
	}
	if err := json.Unmarshal(got, &a); err != nil {
		return a, fmt.Errorf("the answer: %w", err)
	}
	return a, nil
}

// setCredentials adds the token or basic auth given, or those of the
// environment, as the UI takes them.
func setCredentials(req *http.Request, o annotateOptions) error {
	if o.token == "" && o.basic == "" {
		o.token, o.basic = os.Getenv("RTMON_TOKEN"), os.Getenv("RTMON_BASIC_AUTH")
	}
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
		return nil
	}
	if o.basic != "" {
		user, pass, ok := strings.Cut(o.basic, ":")
		if !ok {
			return fmt.Errorf("--basic-auth: want user:password")
		}
		req.SetBasicAuth(user, pass)
	}
	return nil
}
