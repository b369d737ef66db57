// Package tlsdecrypt decrypts the TLS records a passive monitor captured,
// with the secrets of an NSS key log (the SSLKEYLOGFILE format that curl,
// Chromium, Firefox, Go's crypto/tls Config.KeyLogWriter and HAProxy
// write), so that the HTTP carried inside can be parsed.
//
// # What it does
//
// A KeyLog holds the secrets of a key log indexed by client random:
// CLIENT_RANDOM master secrets (TLS 1.2, any key exchange, RSA included)
// and the TLS 1.3 handshake, application, early and exporter secrets.
// OpenKeyLog reads a file after checking that nobody else can write it;
// Follow then reads the lines appended since, as a live capture grows
// the file, and starts again when the file shrank (truncation or
// rotation).
//
// A Session decrypts one connection. It is made from the key log entry
// of the connection's client random, the server random, the negotiated
// version and cipher suite (the caller reads them from the hellos, see
// reconstruct/tlswire), and is fed every record of each direction in
// order. It returns each protected record's plaintext with its real
// content type; cleartext records pass through. It follows the key
// changes itself: in TLS 1.2 the ChangeCipherSpec of each direction; in
// TLS 1.3 the switch from handshake to application secrets after each
// side's Finished, KeyUpdate, and 0-RTT early data ended by
// EndOfEarlyData (or rejected by the server, found by trial decryption
// bounded to a few records).
//
// In a live capture the key log line may be written after the handshake
// records arrive: NewSession fails with ErrNoSecret until Follow has read
// it, so the caller retries (keeping the connection's records meanwhile).
//
// Supported suites: TLS 1.3 AES-128-GCM, AES-256-GCM and
// ChaCha20-Poly1305; TLS 1.2 ECDHE-RSA, ECDHE-ECDSA and RSA key exchange
// with AES-GCM, and ECDHE with ChaCha20-Poly1305. Others give
// ErrUnsupportedSuite, which callers count.
//
// # What it does not do
//
// It decrypts nothing without the key log line of the connection: it does
// no key exchange, holds no private keys and breaks nothing. It does not
// frame records (tlswire does), reassemble TCP, parse HTTP, verify
// certificates or MACs other than the AEAD tag, or follow TLS 1.2
// renegotiation. CBC and other pre-AEAD suites, TLS 1.0/1.1 and SSL are
// not supported. Lost records can be skipped only when the caller says
// how many were lost or when no more than a few were (each failed record
// makes the session try the next sequence numbers, bounded).
//
// # Secrets
//
// Key log secrets are secrets. This package keeps them in memory only for
// as long as the KeyLog and its Sessions live, never writes them anywhere,
// never prints them (KeyLog and Session format and log as counts only) and
// never hands them back through its API. A record whose authentication
// tag does not verify yields an error and never any plaintext. Plaintext
// is returned in a fresh slice the session does not keep.
//
// # Bounds
//
// A key log holds at most KeyLogOptions.MaxEntries client randoms (1M by
// default; the oldest are evicted) and reads lines of at most
// MaxLineLen bytes; longer or malformed lines are counted and skipped,
// never fatal. A Session keeps a few bytes of handshake framing per
// direction, no plaintext, and tries a bounded number of keys and
// sequence numbers per record.
package tlsdecrypt
