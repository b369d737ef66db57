//go:build unix

package tlsdecrypt

import (
	"fmt"
	"os"
	"syscall"
)

// fileIdentity tells a replaced (rotated) file from the one read before.
type fileIdentity struct{ dev, ino uint64 }

func identityOf(info os.FileInfo) fileIdentity {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return fileIdentity{dev: uint64(st.Dev), ino: st.Ino}
	}
	return fileIdentity{}
}

// checkOwner accepts a file owned by the current user or by root.
func checkOwner(info os.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if uid := os.Getuid(); st.Uid != 0 && int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, neither root nor the current user %d: %w", st.Uid, uid, ErrKeyLogPermissions)
	}
	return nil
}
