// Package dirwalk reads a directory tree the way git does, on plain descriptors: a
// directory is listed with getdents64 (keeping each name's d_type, so a walker needs
// no lstat to tell a directory, a link or a file), its children are lstat'ed with
// fstatat and opened with openat relative to the directory's own descriptor, by a
// single-component name and with O_NOFOLLOW. Nothing is resolved by a full path, so a
// directory renamed or swapped for a link while a walk runs cannot redirect it: a link
// in a directory's place is "not a directory", never followed.
//
// The descriptors are plain ones (golang.org/x/sys/unix typed wrappers, no os.File):
// opening a directory through os.Root or os.Open registers it with Go's poller (fcntl,
// epoll_ctl), which a walk of thousands of directories pays for nothing.
//
// The package holds the primitives of a walk (open, list, lstat, open a child file or
// directory, read a link); the recursion, and what to do with each name, belong to the
// caller (pkg/repoplane's status walker). It is built on Linux only; elsewhere callers
// keep their portable os.Root path.
package dirwalk
