//go:build unix

package repoplane

import "syscall"

// openReadNoFollow opens for reading without following a final link and without
// blocking: a FIFO planted where a file is expected cannot hang an operation (the
// opened file is then checked to be a regular file).
const openReadNoFollow = syscall.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// openReadNonBlock is O_RDONLY|O_NONBLOCK, for opens that must follow links inside
// their root (go-git's own reads).
const openReadNonBlock = syscall.O_RDONLY | syscall.O_NONBLOCK
