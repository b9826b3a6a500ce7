// Package fsplane is the files plane: the "files" ResourceProvider over one local
// directory (the CLI's --root) and the 12 files.* tool handlers of spec 10 §4.
//
// Tools (tools.go) parse and validate arguments strictly, resolve the exact capability
// requirement from the path argument, and hand a kernel.ResourceOperation to any
// ResourceProvider whose namespace is "files". Provider (provider.go) is the real
// implementation over a directory.
//
// # Confinement
//
// The provider must never read or change anything outside its root, and never give a
// files grant power over a Git repository's internals. The rules:
//
//   - Every path is resolved through the one os.Root opened on the root directory, one
//     segment at a time (sub-directories are opened as os.Roots from their parent); no
//     path is ever built by joining strings onto the root's name. Walks (grep, search,
//     directory snapshots) then read the entries below the directory they resolved with
//     openat(directory handle, name, O_NOFOLLOW), so the kernel itself refuses any link
//     met on the way. files.read resolves its path the same way from a raw descriptor
//     of the root (each directory opened with O_DIRECTORY|O_NOFOLLOW, the file examined
//     without following, opened with O_NOFOLLOW and compared): 8 system calls for a
//     small file one directory down, where the os.Root path took 11 (strace -c).
//   - A path is validated with kernel.ValidatePath first (invalid_path, denied).
//   - A segment that may name ".git" on some file system (any letter case, trailing
//     dots, the 8.3 name "git~1", code points HFS+ ignores), or starting with the
//     temporary-file prefix ".sharedos-tmp-" (any case), is refused not_permitted
//     (denied).
//   - A path with a symbolic link in any position (first, middle or last) is refused
//     path_escape (denied), whether the link points inside or outside the root. The
//     provider resolves a path one segment at a time: it Lstats the segment, refuses a
//     link, opens the directory through os.Root, and checks that the directory it holds
//     is the one it examined (same device and inode). A file is opened through os.Root
//     and its open handle compared the same way. A link swapped in between the check and
//     the use is therefore detected (path_escape) and can never redirect a read or a
//     write, and os.Root itself refuses anything that would leave the root.
//   - list shows a link as kind "symlink"; search, grep and snapshots skip links and
//     special files (FIFOs, sockets, devices), which are never opened. ".git" entries
//     and temporary files are hidden from list, search, grep and snapshots alike.
//     Names that are not valid path segments (spec 20 §1.2: a control character such
//     as a tab, a backslash, leading or trailing white space, bytes that are not UTF-8)
//     cannot be named by any tool, but they are not hidden: list, grep and search show
//     them (and what lies below such a directory) marked addressable:false, with bytes
//     that are not UTF-8 shown as U+FFFD. Directory snapshots and restores leave them
//     out (a restore leaves them untouched).
//   - delete refuses the root and any directory holding a .git entry anywhere below it;
//     a recursive delete removes links themselves, never their targets.
//   - Writes (create, replace, append, snapshot.restore) write a temporary file
//     ".sharedos-tmp-<random>" in the target's directory, fsync it and rename it over
//     the target, then fsync the directory: a crash leaves the old content or the new,
//     never a mix. Every write holds an exclusive flock(2) on the target's directory
//     (opened through os.Root) from before its version check until after the rename, so
//     expectedVersion is atomic across processes. Stale temporary files (left by a
//     crashed writer) are removed under that lock.
//   - Snapshot blobs live in ProviderOptions.SnapshotDir, which must be outside the root
//     (NewProvider refuses otherwise); snapshot metadata lives in a kernel.SnapshotIndex,
//     keyed by the world and owner of the context that took them: another owner or world
//     never lists or restores a snapshot.
//
// # Snapshots
//
//   - A directory snapshot is complete or fails: a file or directory below the path that
//     cannot be read fails snapshot.create (provider_error, naming it), as does content
//     beyond ProviderOptions.MaxSnapshotBytes (too_large); nothing is recorded. What a
//     snapshot never captures by design — links, special files, .git, temporary files,
//     names no tool can address, frozen paths — a restore never removes either.
//   - A directory restore makes the subtree equal to the snapshot: changed files are
//     put back, files created since are removed (and directories created since, once
//     that empties them). It leaves in place, counting them in preserved: frozen paths,
//     every directory holding a .git entry (a repository's working tree belongs to the
//     repo plane), and a directory holding anything but files and directories where the
//     snapshot had a file. Restoring a directory that itself holds a .git is refused
//     not_permitted, as deleting it is.
//   - A directory restore is all-or-nothing as far as the file system allows: every
//     file is first staged (streamed from its blob, its digest checked) in a temporary
//     file beside its target, a missing directory is built whole in a temporary
//     directory, and every directory involved stays locked; a failure then (a damaged
//     blob, a full disk) removes what was staged and names the entry, leaving the old
//     tree. Only then are the staged entries renamed into place, each rename atomic. A
//     crash during those renames can leave part of the tree restored; staged leftovers
//     are removed by the next write in their directory.
//   - An outage of the index or the blob store fails the operation
//     snapshot_index_unavailable or snapshot_store_unavailable (retryable, naming the
//     cause); a record or blob that is damaged or missing fails snapshot_damaged.
//
// # Memory
//
// No operation holds a whole file in memory: versions are hashed while streaming,
// appends and restores copy into the temporary file through a fixed buffer, and
// snapshots stream into the blob store. A files operation's memory is bounded by
// constants (the read and grep/search limits, the copy buffer), beside what is
// proportional to the entries of a tree it walks (names, a snapshot's entry list).
//
// # Frozen paths
//
// ProviderOptions.Frozen holds the host ceiling's files paths. The kernel's ceiling
// refuses a request named at or below one; the provider refuses those too
// (host_policy_denied, denied), comparing each name under the equivalence of its
// directory, probed at start (see NewProvider: case folding where the file system is
// case-insensitive or the probe cannot tell, canonical Unicode equivalence always), and
// it keeps what an operation reaches below its named path away from them. Each
// operation also looks the frozen paths up by identity (device and inode; for a frozen
// path configured through a link, both the link and what it leads to inside the root),
// so an entry that is a frozen path under another name (an 8.3 short name, a hard link,
// a bind mount, a link's target) is treated as the frozen path, in its named path and
// in its walks:
//
//   - list, grep, search: skip. A frozen entry is not listed, and the walks never open
//     it, so neither its names nor its content appear in any output.
//   - delete with recursive:true: refuse. Deleting a directory with a frozen path
//     anywhere below it fails host_policy_denied before anything is removed (whether or
//     not the frozen path exists).
//   - snapshot.create: skip. A directory snapshot does not capture a frozen subtree.
//   - snapshot.restore: preserve. A directory restore never writes, creates or removes
//     anything at or below a frozen path (content a snapshot holds there, from before
//     the path was frozen, is not put back), and leaves in place a directory holding a
//     frozen path even where the snapshot had a file.
//
// # Output budgets
//
// Every output is bounded in bytes, measured as its JSON encoding (escapes included):
//
//   - files.list, files.grep, files.search: DefaultMaxOutputBytes (1 MiB;
//     ProviderOptions.MaxOutputBytes). list keeps the first entries by name and grep
//     the first matches in path and line order that fit, with truncated:true; a grep
//     match whose context lines do not fit keeps the matching line and the context
//     lines nearest to it (the match carries truncated:true) and ends the output.
//     search keeps the best hits that fit and adds truncated:true. These sit on top of
//     the count caps (10,000 entries, 1,000 matches, the search limit) and grep's
//     1,000-character line cut. While grepping, a file's matches are collected only
//     up to the budget, so memory stays bounded by it per worker.
//   - files.read: the read limit (DefaultMaxReadBytes, 256 KiB of the file), and the
//     content's encoding within the output budget (or the limit's base64 size if
//     larger): text heavy in characters JSON escapes is cut further, at a character
//     boundary, with truncated:true.
//   - The other tools' outputs are bounded by their inputs (a path of at most 64
//     segments, a label of at most 256 characters, at most 100 snapshots listed) and
//     are never cut.
//
// # Search ranking
//
// files.search splits the query on white space (punctuation at a term's ends is
// dropped) and matches each term case-insensitively at token boundaries: a word starts
// after a non-word character, at a lower-to-upper change (fooBar), a letter/digit change
// (utf8) or the last capital before a lower-case letter (HTTPServer). The score of a
// file is, summed over the terms it holds, BM25 (k1 1.2, b 0.75, the inverse document
// frequency taken over the text files searched) plus 1.2 × idf for a term in the file's
// name (0.6 × idf in a directory name below the searched path; 0.6 × idf for a term of
// 4 or more bytes inside a word of the file's name), plus bonuses for the query's
// consecutive terms adjacent (a phrase) and for distinct terms within 200 bytes, all
// times the share of the query's terms the file holds. Scores are published relative to
// the best hit; TestSearchRelevanceReport measures the ranking on a copy of
// GOROOT/src.
//
// # Versions
//
// A file's version is the first 32 hexadecimal characters of the SHA-256 digest of its
// content (as the reference host). stat, read and every write return it; a mismatching
// expectedVersion fails version_conflict and changes nothing.
//
// The package must never follow a link, write outside the root, or keep state in
// globals; it does no work at construction beyond opening the root.
package fsplane
