package tlsdecrypt

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrKeyLogPermissions: the key log file could be altered by someone
// other than its reader, who could then feed the monitor chosen keys.
var ErrKeyLogPermissions = errors.New("key log file is writable by others")

// maxFollowRead bounds what one Follow call reads, so that a huge append
// is taken over several calls.
const maxFollowRead = 64 << 20

// fileState is where Follow is in the key log file.
type fileState struct {
	path     string
	offset   int64
	identity fileIdentity
	readable bool // group or others may read the file
}

// OpenKeyLog reads the key log file at path. It refuses a file that group
// or others may write, or that neither the current user nor root owns
// (wrapping ErrKeyLogPermissions); a file others may read is accepted and
// reported by ReadableByOthers, for the caller to warn. Call Follow to read
// what is appended later.
func OpenKeyLog(path string, opts KeyLogOptions) (*KeyLog, error) {
	kl := NewKeyLog(opts)
	kl.file = &fileState{path: path}
	if _, err := kl.Follow(); err != nil {
		return nil, err
	}
	return kl, nil
}

// ReadableByOthers reports whether the key log file, when last read, was
// readable by its group or by others: its secrets are exposed.
func (kl *KeyLog) ReadableByOthers() bool {
	kl.feedMu.Lock()
	defer kl.feedMu.Unlock()
	return kl.file != nil && kl.file.readable
}

// Follow reads the lines appended to the key log file since the last read
// and returns how many secret lines it accepted. A partial last line is
// kept until its newline arrives. A file that shrank or was replaced is
// read again from its start. The permission check runs on every call.
func (kl *KeyLog) Follow() (int, error) {
	kl.feedMu.Lock()
	defer kl.feedMu.Unlock()
	fs := kl.file
	if fs == nil {
		return 0, errors.New("tlsdecrypt: follow: key log was not opened from a file")
	}
	// Stat first: opening a FIFO planted under the name would block.
	if info, err := os.Stat(fs.path); err != nil {
		return 0, fmt.Errorf("tlsdecrypt: key log: %w", err)
	} else if err := checkKeyLogFile(info); err != nil {
		return 0, fmt.Errorf("tlsdecrypt: key log %s: %w", fs.path, err)
	}
	f, err := os.Open(fs.path)
	if err != nil {
		return 0, fmt.Errorf("tlsdecrypt: opening key log: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("tlsdecrypt: key log %s: %w", fs.path, err)
	}
	if err := checkKeyLogFile(info); err != nil {
		return 0, fmt.Errorf("tlsdecrypt: key log %s: %w", fs.path, err)
	}
	fs.readable = info.Mode().Perm()&0o044 != 0
	id := identityOf(info)
	if info.Size() < fs.offset || id != fs.identity {
		fs.offset = 0
		kl.lines.reset()
	}
	fs.identity = id
	return kl.readFrom(f, fs)
}

// readFrom reads the file from the follow offset to its end (bounded).
func (kl *KeyLog) readFrom(f *os.File, fs *fileState) (int, error) {
	before := kl.Stats().Lines
	buf := make([]byte, 64<<10)
	for read := 0; read < maxFollowRead; {
		n, err := f.ReadAt(buf, fs.offset)
		kl.lines.split(buf[:n], kl.addLine)
		fs.offset += int64(n)
		read += n
		if err != nil && err != io.EOF {
			return kl.Stats().Lines - before, fmt.Errorf("tlsdecrypt: reading key log %s: %w", fs.path, err)
		}
		if err == io.EOF || n == 0 {
			break
		}
	}
	return kl.Stats().Lines - before, nil
}

// checkKeyLogFile refuses a key log others could write.
func checkKeyLogFile(info os.FileInfo) error {
	if !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file: %w", ErrKeyLogPermissions)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("mode %04o lets group or others write it: %w", perm, ErrKeyLogPermissions)
	}
	return checkOwner(info)
}
