//go:build !unix

package tokens

import "os"

// inode is 0 where the platform has no inode numbers (size and time still apply).
func inode(os.FileInfo) uint64 { return 0 }
