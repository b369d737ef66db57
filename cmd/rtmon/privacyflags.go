package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/pipeline"
)

// addPrivacyFlags adds what analyze and live take out of the records.
func addPrivacyFlags(f *pflag.FlagSet, o *analyzeOptions) {
	f.BoolVar(&o.keepSecrets, "keep-url-secrets", false, "store URLs and Referers as captured (default: tokens, passwords, signatures and session ids in them are REDACTED)")
	f.StringSliceVar(&o.redactParams, "redact-param", nil, "also redact the values of URL and Referer parameters named `NAME` (repeatable; whole names, any case)")
	f.BoolVar(&o.redactQuery, "redact-query", false, "replace whole query strings and fragments of URLs and Referers by REDACTED (paths are kept)")
	f.StringVar(&o.clientKey, "anonymize-clients", "", "anonymize client addresses with the Crypto-PAn key in `KEYFILE` (32 bytes or 64 hex digits: openssl rand -hex 32 > KEYFILE); prefix-preserving, the same mapping wherever the key is used; classes still come from the real addresses")
}

// privacyConfig puts the privacy flags into cfg.
func (o analyzeOptions) privacyConfig(cfg *pipeline.Config) error {
	if o.keepSecrets && (o.redactQuery || len(o.redactParams) > 0) {
		return errors.New("--keep-url-secrets keeps URLs as captured: it cannot be combined with --redact-query or --redact-param")
	}
	for _, p := range o.redactParams {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("--redact-param %q: want a parameter name", p)
		}
	}
	cfg.Tracker.KeepURLSecrets = o.keepSecrets
	cfg.Tracker.Redaction.Params = o.redactParams
	cfg.Tracker.Redaction.WholeQuery = o.redactQuery
	cfg.ClientKeyFile = o.clientKey
	return nil
}
