package tlswire

// minClientHelloLen is the smallest ClientHello body: version, random, an
// empty session id, one cipher suite and one compression method.
const minClientHelloLen = 2 + helloRandomLen + 1 + 2 + 2 + 1 + 1

// LooksLikeClientHello reports whether b, a connection's first client
// bytes or a prefix of them, starts a TLS handshake record (legacy record
// version 3.1 to 3.4) whose first message is a ClientHello. It needs the
// record header and the message type (6 bytes) and checks what else b
// holds of the message header and the hello's version. SSL 2.0
// compatible hellos are not recognised. It does not allocate.
func LooksLikeClientHello(b []byte) bool {
	if len(b) < recordHeaderLen+1 {
		return false
	}
	recLen := int(b[3])<<8 | int(b[4])
	if ContentType(b[0]) != TypeHandshake || b[1] != 3 || b[2] < 1 || b[2] > 4 ||
		recLen < handshakeHeaderLen || recLen > MaxRecordLen || HandshakeType(b[5]) != MsgClientHello {
		return false
	}
	if len(b) < recordHeaderLen+handshakeHeaderLen {
		return true
	}
	// The hello may continue in later records, so its length may exceed
	// the record's, but not fall short of the smallest hello.
	if msgLen := int(b[6])<<16 | int(b[7])<<8 | int(b[8]); msgLen < minClientHelloLen {
		return false
	}
	if len(b) < recordHeaderLen+handshakeHeaderLen+2 {
		return true
	}
	return b[9] == 3 && b[10] <= 4
}
