// Package repoplane is the repo plane of sharedos: the "repo" ResourceProvider over the
// git repositories beneath a root directory, and its five tool handlers (repo.status,
// repo.diff, repo.log, repo.stage, repo.commit) per spec 10 §5.
//
// Git is implemented in-process on go-git's object store plus this package's own index
// reader/writer and working-tree walk; no git binary is ever run.
//
// # Hardening
//
// A repository is untrusted input: anyone able to write into the working tree can
// write its .git directory too. The provider therefore guarantees, whatever the
// repository contains, that no tool executes a program and that nothing outside the
// root is read or written (except the operator's excludes files, read-only):
//
//   - Nothing is ever executed. The package does not import os/exec; hooks
//     (including core.hooksPath), clean/smudge filters, diff.*.textconv, external diff
//     drivers, core.fsmonitor, credential helpers, pagers, editors and signing programs
//     are configuration that is simply never consulted. Content is hashed and diffed
//     byte for byte, except for git's built-in conversions (end of line: the text,
//     eol and crlf attributes and core.autocrlf; ident; working-tree-encoding), which
//     are data applied as git applies them (see Attributes); a path whose filter
//     attribute names a driver is reported and left to git, never hashed raw.
//   - Attributes come from .gitattributes files and .git/info/attributes only
//     (core.attributesFile and the global attributes file are never read); excludes
//     from .gitignore files, .git/info/exclude and ProviderOptions.ExcludesFiles (the
//     operator's stand-in for core.excludesFile: config repo.excludesFiles, which the
//     host defaults to the user's global git ignore file, $XDG_CONFIG_HOME/git/ignore
//     or ~/.config/git/ignore, when that exists outside the root), matched by the
//     package's own wildmatch with git's precedence.
//   - Only .git/config is read. System and global configuration (~/.gitconfig,
//     $XDG_CONFIG_HOME/git) and a core.excludesFile any configuration names are never
//     opened; the commit identity comes from ProviderOptions or the acting principal,
//     never from git config.
//   - Everything is opened through os.Root descriptors: the root, then each path
//     segment (a symbolic link in the repository path is path_escape), then .git. go-git's
//     storage runs on a billy.Filesystem over the .git os.Root, so no name it resolves
//     can leave .git. Layouts that redirect git elsewhere are refused with
//     not_permitted before anything else is read: a .git file (gitdir:), a symbolic
//     .git, objects/info/alternates, commondir, core.worktree, include.path and
//     includeIf, links among git's own files and unknown formats. A bare repository
//     (its layout at the path, or core.bare set) is refused with not_a_repository: it
//     has no working tree to show or stage.
//   - Paths git records are validated: an index or tree entry naming "..", ".git" (in
//     any case or NTFS/HFS spelling) or an absolute path is refused; pathspecs and the
//     repository path may not name .git at all.
//   - The working tree is walked one directory descriptor at a time, links are never
//     followed, and nested repositories are never entered. Staging refuses symbolic
//     links and paths through them, and reports nested repositories as skipped. Of a
//     submodule only the commit it has checked out is read: HEAD (and its branch,
//     loose or packed) of its .git directory, or of the .git/modules/<name> its
//     gitdir: file names; any other layout reads as not checked out.
//   - Names in patch headers are C-quoted as git quotes them, so a file name holding a
//     newline or other control bytes cannot forge patch lines; content that is not
//     UTF-8 is reported as binary rather than altered on its way into JSON.
//   - Objects are read with bounded memory, never through go-git's object storage
//     (which inflates loose objects whole and resolves delta chains by recursion): the
//     header of every object, and of every delta on its chain, is read before anything
//     is inflated. A commit over 1 MiB, a tree over 16 MiB, a delta chain deeper than
//     4095 links (git never writes one), a chain through an object over 64 MiB or one
//     producing over 1 GiB fail with provider_error naming the object; a blob over
//     8 MiB is shown by repo.diff as binary without being read. One operation reads
//     at most 64 MiB of commits and walks trees at most 4096 levels deep. Every object
//     read is checked against its name (SHA-1).
//   - Writes follow git's lock protocol: index.lock and <ref>.lock are created with
//     O_EXCL, written and renamed into place, and removed on every failure, so
//     concurrent sharedos processes and real git never corrupt the index or lose a
//     commit; the loser gets repo_busy (retryable). A branch is only moved if, under its
//     lock, it still points at the commit the new one was built on. The reflog is only
//     appended to a regular file with a single link (a hard link could share its inode
//     with a file outside the root) and never waits on a FIFO; otherwise it is skipped
//     and the commit stands.
//
// # Attributes
//
// Every attribute git defines and what sharedos does with it: applied as git applies
// it (as data), declined (reported and left to git, with a code), or ignored (it only
// shapes what sharedos never does). This table is attributeTable (attributes.go); a
// test holds them equal. Attributes come only from the files named under Hardening.
//
//	text                   applied   end-of-line conversion when staging and comparing (with core.autocrlf)
//	eol                    applied   makes a file text; its lf/crlf choice shapes only checkout
//	crlf                   applied   git's legacy spelling of text
//	ident                  applied   $Id: ...$ collapsed to $Id$ when staging and comparing; nothing expanded
//	working-tree-encoding  applied   converted to UTF-8 when staging and comparing; unconvertible: encoding_unsupported
//	diff                   applied   -diff: binary; diff, diff=NAME: text, NAME's built-in funcname patterns
//	binary                 applied   the built-in macro -diff -merge -text
//	filter                 declined  never run: reported (filter), skipped under a directory, refused by name (filter_required)
//	merge                  ignored   sharedos never merges
//	conflict-marker-size   ignored   sharedos never merges
//	whitespace             ignored   shapes only git diff --check and git apply
//	export-ignore          ignored   shapes only git archive
//	export-subst           ignored   shapes only git archive
//	delta                  ignored   shapes only packing; sharedos writes loose objects
//	encoding               ignored   shapes only gitk and git gui display
//
// # Operations in progress
//
// repo.status lists the operations git left in progress (inProgress: merge,
// cherry-pick, revert, rebase, am, bisect). repo.commit completes a merge as git commit
// does (MERGE_HEAD becomes the further parents; MERGE_HEAD, MERGE_MSG, MERGE_MODE and
// AUTO_MERGE are removed), refuses during a cherry-pick, revert, rebase or am with
// operation_in_progress (only git's --continue records those correctly), and commits
// normally during a bisect. inprogress.go gives the reasons.
//
// # Frozen paths
//
// The host fills ProviderOptions.Frozen with the host ceiling's frozen files paths, so
// the promise "nothing under a frozen path can be reached" holds in this plane too:
// a repository at or beneath a frozen path (or with one in its .git) is refused
// host_policy_denied for every action; inside a working tree, status and diff omit
// frozen paths (never listed, read, or compared, in the working tree, the index or
// HEAD), and stage refuses a pathspec entry at or beneath one (host_policy_denied) but,
// for a directory holding one, stages the rest and leaves the frozen entries as they
// are. Commit records the index as it is; log shows commit messages only.
//
// # Speed
//
// Status and unstaged diff compare the working tree with the index in one walk that
// prunes ignored directories (unless they hold tracked files) and trusts index stat
// data (with git's racy-timestamp rule) instead of re-hashing files, takes a size other
// than the recorded one as a change without reading the file (git's rule too), and
// skips skip-worktree and assume-unchanged entries as git does; HEAD is compared
// with the index through the index's cache tree, so unchanged directories cost one hash
// comparison. Stage visits only the pathspec's subtrees; log stops after maxCount
// commits; diff is capped in files and bytes.
package repoplane
