package tlsdecrypt

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Default bounds of a KeyLog.
const (
	DefaultMaxEntries = 1 << 20
	DefaultMaxLineLen = 1024
	clientRandomLen   = 32
	masterSecretLen   = 48
	maxSecretLen      = 64
)

// KeyLogOptions bound a KeyLog. Zero values take the defaults.
type KeyLogOptions struct {
	MaxEntries int // client randoms kept; the oldest are evicted beyond it
	MaxLineLen int // longer lines are counted as malformed and skipped
}

func (o KeyLogOptions) withDefaults() KeyLogOptions {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxLineLen <= 0 {
		o.MaxLineLen = DefaultMaxLineLen
	}
	return o
}

// secret is key material. It formats as a placeholder with every verb so
// that no accidental print or log line carries it.
type secret []byte

func (secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "[REDACTED]") }

// secretKind is a key log label the package uses.
type secretKind uint8

const (
	kindMaster secretKind = iota
	kindClientHandshake
	kindServerHandshake
	kindClientTraffic0
	kindServerTraffic0
	kindExporter
	kindClientEarly
	numKinds
)

var labelKinds = map[string]secretKind{
	"CLIENT_RANDOM":                   kindMaster,
	"CLIENT_HANDSHAKE_TRAFFIC_SECRET": kindClientHandshake,
	"SERVER_HANDSHAKE_TRAFFIC_SECRET": kindServerHandshake,
	"CLIENT_TRAFFIC_SECRET_0":         kindClientTraffic0,
	"SERVER_TRAFFIC_SECRET_0":         kindServerTraffic0,
	"EXPORTER_SECRET":                 kindExporter,
	"CLIENT_EARLY_TRAFFIC_SECRET":     kindClientEarly,
}

// secrets are the key log lines of one client random.
type secrets [numKinds]secret

// KeyLogStats counts what a KeyLog read.
type KeyLogStats struct {
	Entries   int // client randoms held
	Lines     int // secret lines accepted
	Ignored   int // comments, blank lines and unknown labels
	Malformed int // lines that could not be read (bad hex, lengths, too long)
	Evicted   int // client randoms dropped to stay within MaxEntries
}

// KeyLog holds key log secrets indexed by client random. It is safe for
// concurrent use: Follow may run while sessions are created.
type KeyLog struct {
	opts KeyLogOptions

	mu      sync.RWMutex
	entries map[[clientRandomLen]byte]*secrets
	order   [][clientRandomLen]byte // insertion order, for eviction
	head    int                     // first live element of order
	stats   KeyLogStats

	feedMu sync.Mutex // serializes Write, Parse and Follow over lines and file
	lines  lineSplitter
	file   *fileState // nil unless opened from a path
}

// NewKeyLog returns an empty key log.
func NewKeyLog(opts KeyLogOptions) *KeyLog {
	opts = opts.withDefaults()
	return &KeyLog{opts: opts, entries: make(map[[clientRandomLen]byte]*secrets),
		lines: lineSplitter{max: opts.MaxLineLen}}
}

// ParseKeyLog reads a whole key log from r; a last line without a newline
// counts. Only a read error fails it; bad lines are counted in Stats.
func ParseKeyLog(r io.Reader, opts KeyLogOptions) (*KeyLog, error) {
	kl := NewKeyLog(opts)
	if err := kl.Parse(r); err != nil {
		return kl, err
	}
	return kl, nil
}

// Parse adds the lines of r to the key log, the last one even without a
// newline.
func (kl *KeyLog) Parse(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	buf := make([]byte, 64<<10)
	for {
		n, err := br.Read(buf)
		kl.Write(buf[:n])
		if err == io.EOF {
			kl.flushLine()
			return nil
		}
		if err != nil {
			return fmt.Errorf("tlsdecrypt: reading key log: %w", err)
		}
	}
}

// Write adds key log text; a trailing partial line is kept until its
// newline arrives. It never fails (io.Writer for a KeyLogWriter).
func (kl *KeyLog) Write(p []byte) (int, error) {
	kl.feedMu.Lock()
	defer kl.feedMu.Unlock()
	kl.lines.split(p, kl.addLine)
	return len(p), nil
}

func (kl *KeyLog) flushLine() {
	kl.feedMu.Lock()
	defer kl.feedMu.Unlock()
	kl.lines.flush(kl.addLine)
}

// addLine reads one complete line (without its newline); tooLong marks a
// line cut at MaxLineLen.
func (kl *KeyLog) addLine(line []byte, tooLong bool) {
	kl.mu.Lock()
	defer kl.mu.Unlock()
	if tooLong {
		kl.stats.Malformed++
		return
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] == '#' {
		kl.stats.Ignored++
		return
	}
	fields := bytes.Fields(line)
	if len(fields) != 3 {
		kl.stats.Malformed++
		return
	}
	kind, known := labelKinds[string(fields[0])]
	if !known {
		kl.stats.Ignored++
		return
	}
	var cr [clientRandomLen]byte
	if hex.DecodedLen(len(fields[1])) != clientRandomLen {
		kl.stats.Malformed++
		return
	}
	if _, err := hex.Decode(cr[:], fields[1]); err != nil {
		kl.stats.Malformed++
		return
	}
	sec, ok := decodeSecret(kind, fields[2])
	if !ok {
		kl.stats.Malformed++
		return
	}
	kl.store(cr, kind, sec)
}

// decodeSecret checks a secret's length: 48 bytes for a master secret,
// a hash length (32 or 48, or 64 for a future SHA-512 suite) for TLS 1.3.
func decodeSecret(kind secretKind, h []byte) (secret, bool) {
	n := hex.DecodedLen(len(h))
	if len(h)%2 != 0 || n > maxSecretLen {
		return nil, false
	}
	if kind == kindMaster && n != masterSecretLen || kind != kindMaster && n != 32 && n != 48 && n != 64 {
		return nil, false
	}
	sec := make(secret, n)
	if _, err := hex.Decode(sec, h); err != nil {
		return nil, false
	}
	return sec, true
}

func (kl *KeyLog) store(cr [clientRandomLen]byte, kind secretKind, sec secret) {
	e := kl.entries[cr]
	if e == nil {
		e = &secrets{}
		kl.entries[cr] = e
		kl.order = append(kl.order, cr)
		kl.evict()
	}
	e[kind] = sec
	kl.stats.Lines++
}

// evict drops the oldest client randoms beyond MaxEntries, compacting the
// order queue when half of it is dead.
func (kl *KeyLog) evict() {
	for len(kl.entries) > kl.opts.MaxEntries {
		delete(kl.entries, kl.order[kl.head])
		kl.order[kl.head] = [clientRandomLen]byte{}
		kl.head++
		kl.stats.Evicted++
	}
	if kl.head > 1024 && kl.head > len(kl.order)/2 {
		kl.order = append(kl.order[:0:0], kl.order[kl.head:]...)
		kl.head = 0
	}
}

// lookup returns a copy of the secrets of a client random.
func (kl *KeyLog) lookup(clientRandom []byte) (secrets, bool) {
	var cr [clientRandomLen]byte
	if len(clientRandom) != clientRandomLen {
		return secrets{}, false
	}
	copy(cr[:], clientRandom)
	kl.mu.RLock()
	defer kl.mu.RUnlock()
	e := kl.entries[cr]
	if e == nil {
		return secrets{}, false
	}
	return *e, true
}

// Has reports whether the key log holds any secret for a client random.
func (kl *KeyLog) Has(clientRandom []byte) bool {
	_, ok := kl.lookup(clientRandom)
	return ok
}

// Stats returns the key log's counters.
func (kl *KeyLog) Stats() KeyLogStats {
	kl.mu.RLock()
	defer kl.mu.RUnlock()
	s := kl.stats
	s.Entries = len(kl.entries)
	return s
}

// String describes the key log by its counts, never its secrets.
func (kl *KeyLog) String() string {
	s := kl.Stats()
	return fmt.Sprintf("tlsdecrypt.KeyLog{entries: %d, malformed: %d, secrets: redacted}", s.Entries, s.Malformed)
}

// GoString is String, so that %#v prints no secret either.
func (kl *KeyLog) GoString() string { return kl.String() }

// LogValue logs the key log's counts only.
func (kl *KeyLog) LogValue() slog.Value {
	s := kl.Stats()
	return slog.GroupValue(slog.Int("entries", s.Entries), slog.Int("malformed", s.Malformed),
		slog.Int("evicted", s.Evicted), slog.String("secrets", "redacted"))
}

// lineSplitter cuts a byte stream into lines, keeping a partial last line
// (at most max bytes of it) until its newline arrives.
type lineSplitter struct {
	max     int
	partial []byte
	tooLong bool // the pending line passed max: its rest is discarded
}

func (ls *lineSplitter) split(p []byte, line func([]byte, bool)) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		ls.keep(chunk)
		if i < 0 {
			return
		}
		line(bytes.TrimSuffix(ls.partial, []byte("\r")), ls.tooLong)
		ls.reset()
		p = p[i+1:]
	}
}

func (ls *lineSplitter) keep(chunk []byte) {
	if ls.tooLong {
		return
	}
	if len(ls.partial)+len(chunk) > ls.max {
		ls.tooLong = true
		ls.partial = ls.partial[:0]
		return
	}
	ls.partial = append(ls.partial, chunk...)
}

// flush ends a pending line at end of input.
func (ls *lineSplitter) flush(line func([]byte, bool)) {
	if len(ls.partial) > 0 || ls.tooLong {
		line(ls.partial, ls.tooLong)
	}
	ls.reset()
}

func (ls *lineSplitter) reset() {
	ls.partial = ls.partial[:0]
	ls.tooLong = false
}

// pending reports whether a partial line waits for its newline.
func (ls *lineSplitter) pending() bool { return len(ls.partial) > 0 || ls.tooLong }
