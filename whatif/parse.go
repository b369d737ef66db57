package whatif

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rtmon/rtmon/addrpattern"
)

// Bounds on rule sources, so a rule file or a form field cannot make the
// analyzer allocate or recurse without limit.
const (
	MaxRuleSource = 1 << 20 // bytes
	MaxRules      = 1000
	MaxActions    = 16 // per rule
	maxDepth      = 64 // parenthesis nesting and AND/OR terms per rule
	maxDuration   = time.Hour
	maxSize       = int64(1) << 40
)

// ParseError locates a syntax error: 1-based line and column (in characters).
type ParseError struct {
	Line, Col int
	Expected  string
	Found     string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("line %d, column %d: expected %s, found %s", e.Line, e.Col, e.Expected, e.Found)
}

// ParseRules parses RLM rules, one per line:
//
//	IF cond THEN action [, action ...]    # comment
//
//	cond    := and { OR and }            (AND binds tighter than OR)
//	and     := prim { AND prim }
//	prim    := ( cond ) | IP.SRC (==|!=) PATTERN | CLASS (==|!=) NAME
//	         | RT | RT_HIGH | RT_LOW | RT[NAME]  (< <= > >= == !=)  DURATION
//	action  := FAST SYN [GAP DURATION] | FAST SYN/ACK [GAP DURATION]
//	         | DROP SYN | HALT FAST SYN | REMOVE EMBEDS | SPLICE [TERMINATE TLS]
//	         | REWRITE EMBEDS [ABOVE SIZE] [RATIO NUMBER]
//
// Keywords are case-insensitive. DURATION takes ns, us, µs, ms, s or m
// ("3.0s", "500ms"); SIZE takes B, KB, MB (KB = 1024 B, as the RLM work's
// "256 KB" object), or no unit for bytes. Actions may also be separated by
// AND. Blank lines and lines holding only a comment are skipped.
func ParseRules(src string) ([]Rule, error) {
	if len(src) > MaxRuleSource {
		return nil, fmt.Errorf("rules: source is %d bytes, more than the %d allowed", len(src), MaxRuleSource)
	}
	var rules []Rule
	for i, line := range strings.Split(src, "\n") {
		p := parser{line: i + 1}
		if err := p.lex(strings.TrimSuffix(line, "\r")); err != nil {
			return nil, err
		}
		if len(p.toks) == 1 { // only the end token: blank or comment
			continue
		}
		if len(rules) == MaxRules {
			return nil, fmt.Errorf("rules: more than %d rules (line %d)", MaxRules, i+1)
		}
		r, err := p.rule()
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// ParseRule parses a single rule (a convenience for flags and form fields).
func ParseRule(src string) (Rule, error) {
	rs, err := ParseRules(src)
	if err != nil {
		return Rule{}, err
	}
	if len(rs) != 1 {
		return Rule{}, fmt.Errorf("rules: want exactly one rule, got %d", len(rs))
	}
	return rs[0], nil
}

type tokKind int

const (
	tWord  tokKind = iota // keywords, names, numbers, patterns
	tOp                   // == != < <= > >=
	tPunct                // ( ) [ ] ,
	tEnd
)

type token struct {
	kind tokKind
	text string
	col  int
}

func (t token) describe() string {
	if t.kind == tEnd {
		return "end of line"
	}
	return strconv.Quote(t.text)
}

type parser struct {
	line  int
	toks  []token
	pos   int
	depth int
}

func isWordByte(r rune) bool {
	return r == '.' || r == '*' || r == '/' || r == ':' || r == '_' || r == '-' || r == 'µ' ||
		(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
}

func (p *parser) lex(s string) error {
	col := 1
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '#':
			i = len(s)
			continue
		case r == ' ' || r == '\t':
			i, col = i+n, col+1
			continue
		case r == '(' || r == ')' || r == '[' || r == ']' || r == ',':
			p.toks = append(p.toks, token{tPunct, string(r), col})
			i, col = i+n, col+1
			continue
		case r == '=' || r == '!' || r == '<' || r == '>':
			op := string(r)
			if i+1 < len(s) && s[i+1] == '=' {
				op += "="
			}
			if op == "=" || op == "!" {
				return &ParseError{p.line, col, "an operator (==, !=, <, <=, >, >=)", strconv.Quote(op)}
			}
			p.toks = append(p.toks, token{tOp, op, col})
			i, col = i+len(op), col+len(op)
			continue
		case isWordByte(r):
			start, startCol := i, col
			for i < len(s) {
				r, n := utf8.DecodeRuneInString(s[i:])
				if !isWordByte(r) {
					break
				}
				i, col = i+n, col+1
			}
			p.toks = append(p.toks, token{tWord, s[start:i], startCol})
			continue
		}
		return &ParseError{p.line, col, "a keyword, value, operator or parenthesis", strconv.Quote(string(r))}
	}
	p.toks = append(p.toks, token{tEnd, "", col})
	return nil
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEnd {
		p.pos++
	}
	return t
}

func (p *parser) errAt(t token, expected string) error {
	return &ParseError{p.line, t.col, expected, t.describe()}
}

// isKw reports whether t is the keyword kw (case-insensitive).
func isKw(t token, kw string) bool { return t.kind == tWord && strings.EqualFold(t.text, kw) }

func (p *parser) expectKw(kw, expected string) error {
	t := p.next()
	if !isKw(t, kw) {
		return p.errAt(t, expected)
	}
	return nil
}

func (p *parser) rule() (Rule, error) {
	r := Rule{Line: p.line}
	if err := p.expectKw("IF", "IF"); err != nil {
		return r, err
	}
	c, err := p.or()
	if err != nil {
		return r, err
	}
	r.Cond = c
	if err := p.expectKw("THEN", "AND, OR or THEN"); err != nil {
		return r, err
	}
	for {
		if len(r.Actions) == MaxActions {
			return r, p.errAt(p.peek(), fmt.Sprintf("at most %d actions", MaxActions))
		}
		a, err := p.action()
		if err != nil {
			return r, err
		}
		r.Actions = append(r.Actions, a)
		t := p.next()
		if t.kind == tEnd {
			return r, nil
		}
		if !(t.kind == tPunct && t.text == ",") && !isKw(t, "AND") {
			return r, p.errAt(t, "\",\", AND or end of line")
		}
	}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errAt(p.peek(), fmt.Sprintf("a simpler condition (at most %d terms and nesting levels)", maxDepth))
	}
	return nil
}

func (p *parser) or() (Cond, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	return p.chain("OR", p.and, func(l, r Cond) Cond { return &Or{l, r} })
}

func (p *parser) and() (Cond, error) {
	return p.chain("AND", p.prim, func(l, r Cond) Cond { return &And{l, r} })
}

// chain parses operand (kw operand)*, folding to the left; every operand
// after the first counts against the nesting bound.
func (p *parser) chain(kw string, operand func() (Cond, error), join func(l, r Cond) Cond) (Cond, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for isKw(p.peek(), kw) {
		p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = join(l, r)
	}
	return l, nil
}

const condExpected = "a condition (IP.SRC, CLASS, RT, RT_HIGH, RT_LOW, RT[class] or \"(\")"

func (p *parser) prim() (Cond, error) {
	t := p.next()
	switch {
	case t.kind == tPunct && t.text == "(":
		if err := p.enter(); err != nil {
			return nil, err
		}
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		if t := p.next(); !(t.kind == tPunct && t.text == ")") {
			return nil, p.errAt(t, "AND, OR or \")\"")
		}
		return c, nil
	case isKw(t, "IP.SRC"):
		neg, err := p.eqOp()
		if err != nil {
			return nil, err
		}
		v := p.next()
		if v.kind != tWord {
			return nil, p.errAt(v, "an address pattern (*, 10.4.*.*, CIDR or address)")
		}
		pat, err := addrpattern.ParseAddr(v.text)
		if err != nil {
			return nil, &ParseError{p.line, v.col, "an address pattern (*, 10.4.*.*, CIDR or address)", v.describe()}
		}
		return &AddrCond{Neg: neg, Pattern: pat}, nil
	case isKw(t, "CLASS"):
		neg, err := p.eqOp()
		if err != nil {
			return nil, err
		}
		v := p.next()
		if !validName(v) {
			return nil, p.errAt(v, "a class name")
		}
		return &ClassCond{Neg: neg, Class: v.text}, nil
	case isKw(t, "RT"), isKw(t, "RT_HIGH"), isKw(t, "RT_LOW"):
		c := &RTCond{Metric: MetricRT}
		switch {
		case isKw(t, "RT_HIGH"):
			c.Metric = MetricHigh
		case isKw(t, "RT_LOW"):
			c.Metric = MetricLow
		default:
			if b := p.peek(); b.kind == tPunct && b.text == "[" {
				p.next()
				n := p.next()
				if !validName(n) {
					return nil, p.errAt(n, "a class name")
				}
				if e := p.next(); !(e.kind == tPunct && e.text == "]") {
					return nil, p.errAt(e, "\"]\"")
				}
				c.Metric, c.Class = MetricClass, n.text
			}
		}
		o := p.next()
		if o.kind != tOp {
			return nil, p.errAt(o, "a comparison (<, <=, >, >=, ==, !=)")
		}
		c.Op = Op(indexOf(opText[:], o.text))
		v := p.next()
		d, ok := parseDuration(v)
		if !ok {
			return nil, p.errAt(v, "a duration (e.g. 3.0s, 500ms, 250us)")
		}
		c.Value = d
		return c, nil
	}
	return nil, p.errAt(t, condExpected)
}

func indexOf(xs []string, s string) int {
	for i, x := range xs {
		if x == s {
			return i
		}
	}
	return -1
}

// validName accepts class names: word characters without pattern syntax.
func validName(t token) bool {
	if t.kind != tWord || strings.ContainsAny(t.text, "*/:") {
		return false
	}
	return true
}

func (p *parser) eqOp() (neg bool, err error) {
	o := p.next()
	if o.kind != tOp || (o.text != "==" && o.text != "!=") {
		return false, p.errAt(o, "== or !=")
	}
	return o.text == "!=", nil
}

const actionExpected = "an action (FAST SYN, FAST SYN/ACK, DROP SYN, HALT FAST SYN, REMOVE EMBEDS, REWRITE EMBEDS, SPLICE)"

func (p *parser) action() (Action, error) {
	t := p.next()
	switch {
	case isKw(t, "FAST"):
		k := p.next()
		var a Action
		switch {
		case isKw(k, "SYN"):
			a = Action{Kind: FastSYN, Gap: DefaultGap}
		case isKw(k, "SYN/ACK"), isKw(k, "SYNACK"):
			a = Action{Kind: FastSYNACK, Gap: DefaultGap}
		default:
			return a, p.errAt(k, "SYN or SYN/ACK")
		}
		if isKw(p.peek(), "GAP") {
			p.next()
			v := p.next()
			d, ok := parseDuration(v)
			if !ok || d <= 0 {
				return a, p.errAt(v, "a positive duration (e.g. 500ms)")
			}
			a.Gap = d
		}
		return a, nil
	case isKw(t, "DROP"):
		return Action{Kind: DropSYN}, p.expectKw("SYN", "SYN")
	case isKw(t, "HALT"):
		if err := p.expectKw("FAST", "FAST"); err != nil {
			return Action{}, err
		}
		return Action{Kind: HaltFastSYN}, p.expectKw("SYN", "SYN")
	case isKw(t, "REMOVE"):
		return Action{Kind: RemoveEmbeds}, p.expectKw("EMBEDS", "EMBEDS")
	case isKw(t, "SPLICE"):
		a := Action{Kind: Splice}
		if isKw(p.peek(), "TERMINATE") {
			p.next()
			a.TerminateTLS = true
			return a, p.expectKw("TLS", "TLS")
		}
		return a, nil
	case isKw(t, "REWRITE"):
		a := Action{Kind: RewriteEmbeds, Above: DefaultAbove, Ratio: DefaultRatio}
		if err := p.expectKw("EMBEDS", "EMBEDS"); err != nil {
			return a, err
		}
		if isKw(p.peek(), "ABOVE") {
			p.next()
			v := p.next()
			n, ok := parseSize(v)
			if !ok {
				return a, p.errAt(v, "a size (e.g. 100KB)")
			}
			a.Above = n
		}
		if isKw(p.peek(), "RATIO") {
			p.next()
			v := p.next()
			r, err := strconv.ParseFloat(v.text, 64)
			if v.kind != tWord || err != nil || !(r > 0 && r <= 1) {
				return a, p.errAt(v, "a ratio in (0, 1]")
			}
			a.Ratio = r
		}
		return a, nil
	}
	return Action{}, p.errAt(t, actionExpected)
}

// splitNumber splits "3.5ms" into 3.5 and "ms"; the number is decimal only.
func splitNumber(s string) (float64, string, bool) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return 0, "", false
	}
	f, err := strconv.ParseFloat(s[:i], 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, "", false
	}
	return f, s[i:], true
}

// Units a DURATION or SIZE may carry, as factors to ns or bytes.
var (
	durationUnits = map[string]float64{"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9}
	sizeUnits     = map[string]float64{"": 1, "b": 1, "kb": 1024, "kib": 1024, "k": 1024, "mb": 1 << 20, "mib": 1 << 20, "m": 1 << 20}
)

func parseDuration(t token) (time.Duration, bool) {
	v, ok := parseQuantity(t, durationUnits, int64(maxDuration))
	return time.Duration(v), ok
}

func parseSize(t token) (int64, bool) { return parseQuantity(t, sizeUnits, maxSize) }

// parseQuantity reads a number followed by one of units (case-insensitive),
// scaled by it and rounded; false past limit.
func parseQuantity(t token, units map[string]float64, limit int64) (int64, bool) {
	if t.kind != tWord {
		return 0, false
	}
	f, unit, ok := splitNumber(t.text)
	if !ok {
		return 0, false
	}
	scale, ok := units[strings.ToLower(unit)]
	if !ok {
		return 0, false
	}
	v := f * scale
	if v > float64(limit) {
		return 0, false
	}
	return int64(math.Round(v)), true
}
