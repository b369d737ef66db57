//go:build !unix

package tlsdecrypt

import "os"

// fileIdentity is empty where the system gives no inode: rotation is then
// found by the file shrinking only.
type fileIdentity struct{}

func identityOf(os.FileInfo) fileIdentity { return fileIdentity{} }

// checkOwner cannot read ownership here; the mode check still applies.
func checkOwner(os.FileInfo) error { return nil }
