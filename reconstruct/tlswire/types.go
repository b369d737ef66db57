package tlswire

import "strconv"

// ContentType is a TLS record's content type.
type ContentType uint8

// Record content types (RFC 8446 5.1, RFC 6520).
const (
	TypeChangeCipherSpec ContentType = 20
	TypeAlert            ContentType = 21
	TypeHandshake        ContentType = 22
	TypeApplicationData  ContentType = 23
	TypeHeartbeat        ContentType = 24
)

func (t ContentType) String() string {
	switch t {
	case TypeChangeCipherSpec:
		return "change_cipher_spec"
	case TypeAlert:
		return "alert"
	case TypeHandshake:
		return "handshake"
	case TypeApplicationData:
		return "application_data"
	case TypeHeartbeat:
		return "heartbeat"
	}
	return "unknown(" + strconv.Itoa(int(t)) + ")"
}

// HandshakeType is a handshake message's type.
type HandshakeType uint8

// Handshake message types (RFC 8446 4, RFC 5246 7.4).
const (
	MsgHelloRequest        HandshakeType = 0
	MsgClientHello         HandshakeType = 1
	MsgServerHello         HandshakeType = 2
	MsgNewSessionTicket    HandshakeType = 4
	MsgEndOfEarlyData      HandshakeType = 5
	MsgEncryptedExtensions HandshakeType = 8
	MsgCertificate         HandshakeType = 11
	MsgServerKeyExchange   HandshakeType = 12
	MsgCertificateRequest  HandshakeType = 13
	MsgServerHelloDone     HandshakeType = 14
	MsgCertificateVerify   HandshakeType = 15
	MsgClientKeyExchange   HandshakeType = 16
	MsgFinished            HandshakeType = 20
	MsgCertificateStatus   HandshakeType = 22
	MsgKeyUpdate           HandshakeType = 24
)

var handshakeNames = map[HandshakeType]string{
	MsgHelloRequest: "hello_request", MsgClientHello: "client_hello", MsgServerHello: "server_hello",
	MsgNewSessionTicket: "new_session_ticket", MsgEndOfEarlyData: "end_of_early_data",
	MsgEncryptedExtensions: "encrypted_extensions", MsgCertificate: "certificate",
	MsgServerKeyExchange: "server_key_exchange", MsgCertificateRequest: "certificate_request",
	MsgServerHelloDone: "server_hello_done", MsgCertificateVerify: "certificate_verify",
	MsgClientKeyExchange: "client_key_exchange", MsgFinished: "finished",
	MsgCertificateStatus: "certificate_status", MsgKeyUpdate: "key_update",
}

func (t HandshakeType) String() string {
	if n, ok := handshakeNames[t]; ok {
		return n
	}
	return "unknown(" + strconv.Itoa(int(t)) + ")"
}

// Protocol versions as they appear on the wire.
const (
	versionTLS10 = 0x0301
	versionTLS12 = 0x0303
	versionTLS13 = 0x0304
)

// Kind says what an Event reports.
type Kind uint8

const (
	// KindRecord: a record ended (Event.Record). Events about its content
	// (handshake messages, alerts) come before it.
	KindRecord Kind = iota + 1
	// KindHandshake: a cleartext handshake message ended (Event.Handshake);
	// Event.Err is set when a hello was malformed.
	KindHandshake
	// KindAlert: an alert (Event.Alert), cleartext or encrypted.
	KindAlert
	// KindLost: record framing was lost (Event.Err says why); the Stream
	// hunts for a header and reports no records until KindResync.
	KindLost
	// KindResync: record framing was regained; the held first record
	// follows.
	KindResync
)

func (k Kind) String() string {
	switch k {
	case KindRecord:
		return "record"
	case KindHandshake:
		return "handshake"
	case KindAlert:
		return "alert"
	case KindLost:
		return "lost"
	case KindResync:
		return "resync"
	}
	return "unknown(" + strconv.Itoa(int(k)) + ")"
}

// Event is one thing a Stream learned. At is the capture time of the Feed
// call that completed it (for a Gap, that of the last Feed).
type Event struct {
	Kind      Kind
	At        int64
	Record    Record    // KindRecord
	Handshake Handshake // KindHandshake
	Alert     Alert     // KindAlert
	Err       error     // KindLost; KindHandshake when a hello failed to parse
	// Body is a KindRecord's body as captured, when the Stream keeps
	// bodies (KeepBodies) and the record was wholly captured in sync; nil
	// otherwise. The caller owns it.
	Body []byte
}

// Record is one TLS record.
type Record struct {
	Type    ContentType
	Version uint16 // legacy_record_version
	// Len is the body length from the header: the ciphertext length when
	// the record is protected.
	Len int
	// Offset is the stream offset of the header's first byte.
	Offset int64
	// StartAt and At are the times of the Feed calls that carried the
	// header's first byte and completed the record.
	StartAt, At int64
	// Encrypted: the body is protected (application data always; handshake,
	// alert and heartbeat records after a TLS 1.2 ChangeCipherSpec).
	Encrypted bool
	// Truncated: some body bytes were never captured (snap length or gap),
	// so the record's content was not wholly parsed.
	Truncated bool
}

// Handshake is one cleartext handshake message.
type Handshake struct {
	Type HandshakeType
	Len  int // body length from the message header
	// Truncated: the body was not wholly captured, or it is a hello larger
	// than MaxHelloLen, so it was not parsed.
	Truncated   bool
	ClientHello *ClientHello // Type MsgClientHello, parsed
	ServerHello *ServerHello // Type MsgServerHello, parsed (also a HelloRetryRequest)
}

// Alert is one alert message. An encrypted alert record yields one Alert
// with Encrypted set and no level or description (it may hold several).
type Alert struct {
	Level       uint8 // 1 warning, 2 fatal
	Description uint8 // e.g. 0 close_notify, 40 handshake_failure, 42 bad_certificate
	Encrypted   bool
}
