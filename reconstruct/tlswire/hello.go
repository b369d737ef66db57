package tlswire

import (
	"bytes"
	"fmt"

	"golang.org/x/crypto/cryptobyte"
)

// ClientHello is what a ClientHello says in the clear.
type ClientHello struct {
	LegacyVersion     uint16
	Random            []byte   // the 32-byte client random: a key log's index
	SupportedVersions []uint16 // supported_versions extension, as offered (GREASE included); nil if absent
	ServerName        string   // first host_name of the server_name extension; "" if absent
	ALPN              []string // protocols offered, in order; nil if no ALPN extension
	CipherSuites      int      // number of cipher suites offered (SCSV and GREASE included)
	SessionID         []byte   // legacy_session_id (random in TLS 1.3 compatibility mode)
	SessionTicket     bool     // a non-empty session_ticket extension: TLS 1.2 ticket resumption offered
	PSK               bool     // pre_shared_key extension: TLS 1.3 resumption offered
	EarlyData         bool     // early_data extension: 0-RTT data may follow
	KeyShareGroups    []uint16 // groups of the key_share entries, in order
}

// offersOnlyTLS13 reports whether the client cannot end up below TLS 1.3,
// so that a ChangeCipherSpec it sends is the TLS 1.3 dummy.
func (ch *ClientHello) offersOnlyTLS13() bool {
	n := 0
	for _, v := range ch.SupportedVersions {
		if isGREASE(v) {
			continue
		}
		if v < versionTLS13 {
			return false
		}
		n++
	}
	return n > 0
}

// ServerHello is what a ServerHello (or HelloRetryRequest) says in the
// clear.
type ServerHello struct {
	LegacyVersion    uint16
	SupportedVersion uint16 // supported_versions extension (TLS 1.3 and later); 0 if absent
	CipherSuite      uint16
	Random           []byte // the 32-byte server random (TLS 1.2 key derivation)
	SessionID        []byte // legacy_session_id_echo
	// ALPN is the protocol selected when the ServerHello carries it (TLS 1.2
	// and earlier; TLS 1.3 sends it encrypted).
	ALPN string
	// PSK: the pre_shared_key extension selects a client PSK (TLS 1.3
	// resumption); PSKIdentity is its index in the client's list.
	PSK         bool
	PSKIdentity uint16
	// KeyShareGroup is the group of the server's key share or, in a
	// HelloRetryRequest, the group the server asks for; 0 if absent.
	KeyShareGroup uint16
	// HelloRetryRequest: the random is the RFC 8446 4.1.3 constant; a
	// second ClientHello follows.
	HelloRetryRequest bool
}

// Version is the negotiated protocol version: the supported_versions
// selection if present, otherwise the legacy version.
func (sh *ServerHello) Version() uint16 {
	if sh.SupportedVersion != 0 {
		return sh.SupportedVersion
	}
	return sh.LegacyVersion
}

// Resumed reports whether the server accepted to resume a session: in TLS
// 1.3 by selecting a PSK, earlier by echoing the client's non-empty session
// id (RFC 5246 7.4.1.3, RFC 5077 3.4). A HelloRetryRequest resumes nothing.
func Resumed(ch *ClientHello, sh *ServerHello) bool {
	if ch == nil || sh == nil || sh.HelloRetryRequest {
		return false
	}
	if sh.Version() >= versionTLS13 {
		return sh.PSK
	}
	return len(sh.SessionID) > 0 && bytes.Equal(ch.SessionID, sh.SessionID)
}

// helloRetryRequestRandom is SHA-256("HelloRetryRequest"), RFC 8446 4.1.3.
var helloRetryRequestRandom = []byte{
	0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
}

// Extension code points read here.
const (
	extServerName          = 0
	extALPN                = 16
	extSessionTicket       = 35
	extPreSharedKey        = 41
	extEarlyData           = 42
	extSupportedVersions   = 43
	extKeyShare            = 51
	maxSessionIDLen        = 32
	helloRandomLen         = 32
	serverNameTypeHostName = 0
)

// isGREASE reports a RFC 8701 reserved value (0x?A?A with equal bytes).
func isGREASE(v uint16) bool { return v&0x0f0f == 0x0a0a && v>>8 == v&0xff }

// parseClientHello parses a ClientHello body. On a malformed hello it
// returns what it read before the fault along with the error.
func parseClientHello(body []byte) (*ClientHello, error) {
	ch := &ClientHello{}
	s := cryptobyte.String(body)
	var sid, suites, compression cryptobyte.String
	var random []byte
	if !s.ReadUint16(&ch.LegacyVersion) || !s.ReadBytes(&random, helloRandomLen) ||
		!s.ReadUint8LengthPrefixed(&sid) || len(sid) > maxSessionIDLen ||
		!s.ReadUint16LengthPrefixed(&suites) || len(suites)%2 != 0 ||
		!s.ReadUint8LengthPrefixed(&compression) {
		return ch, fmt.Errorf("tlswire: ClientHello fixed fields: %w", ErrMalformedHello)
	}
	ch.Random = bytes.Clone(random)
	ch.SessionID = bytes.Clone(sid)
	ch.CipherSuites = len(suites) / 2
	return ch, readExtensions(&s, func(typ uint16, data cryptobyte.String) bool {
		return ch.extension(typ, data)
	}, "ClientHello")
}

// extension reads one ClientHello extension; false when malformed.
func (ch *ClientHello) extension(typ uint16, data cryptobyte.String) bool {
	switch typ {
	case extServerName:
		var list cryptobyte.String
		if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
			return false
		}
		for !list.Empty() {
			var nameType uint8
			var name cryptobyte.String
			if !list.ReadUint8(&nameType) || !list.ReadUint16LengthPrefixed(&name) {
				return false
			}
			if nameType == serverNameTypeHostName && ch.ServerName == "" {
				ch.ServerName = string(name)
			}
		}
	case extALPN:
		protos, ok := readALPNList(data)
		if !ok {
			return false
		}
		ch.ALPN = protos
	case extSupportedVersions:
		var list cryptobyte.String
		if !data.ReadUint8LengthPrefixed(&list) || !data.Empty() || len(list)%2 != 0 {
			return false
		}
		ch.SupportedVersions = make([]uint16, 0, len(list)/2)
		for !list.Empty() {
			var v uint16
			list.ReadUint16(&v)
			ch.SupportedVersions = append(ch.SupportedVersions, v)
		}
	case extSessionTicket:
		ch.SessionTicket = len(data) > 0
	case extPreSharedKey:
		ch.PSK = true
	case extEarlyData:
		ch.EarlyData = true
	case extKeyShare:
		var list cryptobyte.String
		if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
			return false
		}
		for !list.Empty() {
			var group uint16
			var key cryptobyte.String
			if !list.ReadUint16(&group) || !list.ReadUint16LengthPrefixed(&key) {
				return false
			}
			ch.KeyShareGroups = append(ch.KeyShareGroups, group)
		}
	}
	return true
}

func readALPNList(data cryptobyte.String) ([]string, bool) {
	var list cryptobyte.String
	if !data.ReadUint16LengthPrefixed(&list) || !data.Empty() {
		return nil, false
	}
	var protos []string
	for !list.Empty() {
		var p cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&p) || len(p) == 0 {
			return nil, false
		}
		protos = append(protos, string(p))
	}
	return protos, true
}

// parseServerHello parses a ServerHello body, HelloRetryRequest included.
// On a malformed hello it returns what it read before the fault along with
// the error.
func parseServerHello(body []byte) (*ServerHello, error) {
	sh := &ServerHello{}
	s := cryptobyte.String(body)
	var random []byte
	var sid cryptobyte.String
	var compression uint8
	if !s.ReadUint16(&sh.LegacyVersion) || !s.ReadBytes(&random, helloRandomLen) ||
		!s.ReadUint8LengthPrefixed(&sid) || len(sid) > maxSessionIDLen ||
		!s.ReadUint16(&sh.CipherSuite) || !s.ReadUint8(&compression) {
		return sh, fmt.Errorf("tlswire: ServerHello fixed fields: %w", ErrMalformedHello)
	}
	sh.HelloRetryRequest = bytes.Equal(random, helloRetryRequestRandom)
	sh.Random = bytes.Clone(random)
	sh.SessionID = bytes.Clone(sid)
	return sh, readExtensions(&s, func(typ uint16, data cryptobyte.String) bool {
		return sh.extension(typ, data)
	}, "ServerHello")
}

// extension reads one ServerHello extension; false when malformed.
func (sh *ServerHello) extension(typ uint16, data cryptobyte.String) bool {
	switch typ {
	case extSupportedVersions:
		return data.ReadUint16(&sh.SupportedVersion) && data.Empty()
	case extALPN:
		protos, ok := readALPNList(data)
		if !ok || len(protos) != 1 {
			return false
		}
		sh.ALPN = protos[0]
	case extPreSharedKey:
		sh.PSK = true
		return data.ReadUint16(&sh.PSKIdentity) && data.Empty()
	case extKeyShare:
		// A HelloRetryRequest names a group only; a ServerHello adds its
		// key exchange.
		if !data.ReadUint16(&sh.KeyShareGroup) {
			return false
		}
		if sh.HelloRetryRequest {
			return data.Empty()
		}
		var key cryptobyte.String
		return data.ReadUint16LengthPrefixed(&key) && data.Empty()
	}
	return true
}

// readExtensions walks the optional extensions block that ends a hello,
// handing each extension to read.
func readExtensions(s *cryptobyte.String, read func(uint16, cryptobyte.String) bool, msg string) error {
	if s.Empty() {
		return nil // hellos before extensions existed end here
	}
	var exts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return fmt.Errorf("tlswire: %s extensions block: %w", msg, ErrMalformedHello)
	}
	for !exts.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !exts.ReadUint16(&typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return fmt.Errorf("tlswire: %s extension header: %w", msg, ErrMalformedHello)
		}
		if !read(typ, data) {
			return fmt.Errorf("tlswire: %s extension %d: %w", msg, typ, ErrMalformedHello)
		}
	}
	return nil
}
