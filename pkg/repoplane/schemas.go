package repoplane

// Tool descriptions, shown to models.
const (
	descStatus = "Show the working-tree status of the git repository at path. Returns {path, branch, head, detached, clean, " +
		"inProgress, entries, truncated, submodulesNotInspected}: one entry per changed, staged or untracked file with " +
		"porcelain-style letters for the index (staging) and the working tree. Ignored files are not listed."
	descDiff = "Show changes of the git repository at path as unified patches: the working tree against " +
		"the index, or with staged:true the index against HEAD. pathspec limits it to files or " +
		"directories. Returns {path, staged, files, truncated}, one unified patch per changed file; large diffs are cut (truncated:true)."
	descLog = "List the most recent commits reachable from HEAD of the git repository at path, newest " +
		"first (maxCount, default 20, at most 100). Returns {path, commits}, each commit with its hash, parents, author, committer and message."
	descStage = "Stage (git add) the additions, modifications and deletions under each pathspec entry " +
		"of the git repository at path. Ignored files, symbolic links and anything under .git are " +
		"never staged. Ignore rules come from the .gitignore files, .git/info/exclude and the " +
		"host's excludes files (config repo.excludesFiles; by default the user's global git ignore " +
		"file), never from a file the repository's own config names. Returns {path, staged, skipped?}: the index entries changed and the paths deliberately left unstaged."
	descCommit = "Commit the staged changes of the git repository at path on the current branch with a " +
		"one-line message. Trailers naming the acting principal, the authority and the world are " +
		"appended. Returns {path, hash, parents, branch, message, author} of the new commit."
)

func obj(props map[string]any, required ...string) map[string]any {
	req := make([]any, len(required))
	for i, r := range required {
		req[i] = r
	}
	return map[string]any{"type": "object", "additionalProperties": false, "properties": props, "required": req}
}

func repoPathSchema() map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 0, "maxItems": 64,
		"description": "The repository's directory (the one holding .git) as a list of path segments relative to the root, " +
			"e.g. [\"services\", \"api\"]; [] is a repository at the root itself. Never an absolute path or a segment holding \"/\"."}
}

// pathspecSchema is RepoPathspecSchema of spec 10 §5.
func pathspecSchema(d string) map[string]any {
	entry := map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1, "maxItems": 64}
	return map[string]any{"type": "array", "items": entry, "minItems": 1, "maxItems": 64, "description": d}
}

func statusInputSchema() map[string]any {
	return obj(map[string]any{"path": repoPathSchema()}, "path")
}

func diffInputSchema() map[string]any {
	return obj(map[string]any{"path": repoPathSchema(),
		"staged": map[string]any{"type": "boolean",
			"description": "Diff the index against HEAD (what repo.commit would commit) instead of the working tree against the index, e.g. true."},
		"pathspec": pathspecSchema("Limit the diff to these files or directories, each a list of segments relative to the repository, " +
			"e.g. [[\"src\"], [\"README.md\"]].")}, "path")
}

func logInputSchema() map[string]any {
	return obj(map[string]any{"path": repoPathSchema(),
		"maxCount": map[string]any{"type": "integer", "minimum": 1, "maximum": 100,
			"description": "How many commits to return, 1 to 100 (default 20), e.g. 5."}}, "path")
}

func stageInputSchema() map[string]any {
	return obj(map[string]any{"path": repoPathSchema(),
		"pathspec": pathspecSchema("The files or directories to stage, each a list of segments relative to the repository, " +
			"e.g. [[\"src\", \"main.go\"], [\"docs\"]].")}, "path", "pathspec")
}

func commitInputSchema() map[string]any {
	return obj(map[string]any{"path": repoPathSchema(),
		"message": map[string]any{"type": "string", "minLength": 1, "maxLength": 500,
			"description": "The commit message, one line of at most 500 characters, e.g. \"Fix the off-by-one in the pager\"."}}, "path", "message")
}

// --- output schemas ---------------------------------------------------------------

func described(s map[string]any, d string) map[string]any {
	s["description"] = d
	return s
}

func outRepoPath() map[string]any {
	return described(map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"The repository path, as given.")
}

func relPath(d string) map[string]any {
	return described(map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1}, d)
}

func str(d string) map[string]any { return described(map[string]any{"type": "string"}, d) }

func nullableStr(d string) map[string]any {
	return described(map[string]any{"type": []any{"string", "null"}}, d)
}

func boolean(d string) map[string]any { return described(map[string]any{"type": "boolean"}, d) }

func integer(d string) map[string]any {
	return described(map[string]any{"type": "integer", "minimum": 0}, d)
}

func letter(d string, letters ...string) map[string]any {
	e := make([]any, len(letters))
	for i, l := range letters {
		e[i] = l
	}
	return described(map[string]any{"type": "string", "enum": e}, d)
}

func signatureSchema() map[string]any {
	return obj(map[string]any{
		"name":  str("Name."),
		"email": str("Email address."),
		"time":  str("RFC 3339 time with the commit's own UTC offset."),
	}, "name", "email", "time")
}

func statusOutputSchema() map[string]any {
	entry := obj(map[string]any{
		"path":    relPath("File path relative to the repository, as segments."),
		"oldPath": relPath("For a staged rename (staging \"R\"): the path in HEAD."),
		"staging": letter("Index against HEAD: \".\" unchanged, \"A\" added, \"M\" modified, \"D\" deleted, "+
			"\"R\" renamed (identical content), \"T\" type changed, \"U\" unmerged, \"?\" untracked.",
			".", "A", "M", "D", "R", "T", "U", "?"),
		"worktree": letter("Working tree against the index: \".\" unchanged, \"M\" modified, \"D\" deleted, "+
			"\"T\" type changed, \"A\" intended to add (git add -N), \"U\" unmerged, \"?\" untracked.",
			".", "M", "D", "T", "A", "U", "?"),
		"addressable": described(map[string]any{"const": false}, "Present (false) when the path or its old path cannot be named in a pathspec "+
			"(a tab or other control character, a backslash, leading or trailing white space, bytes that are not UTF-8, a .git spelling): "+
			"stage such a file through its directory."),
		"filter": str("The filter driver the path's attributes name (git-lfs: \"lfs\"); absent when none. Its clean command is never run: " +
			"the working tree counts as modified only when its size differs from the one recorded in the index (or the entry is racily clean), " +
			"and repo.stage leaves the path to git."),
	}, "path", "staging", "worktree")
	return obj(map[string]any{
		"path":     outRepoPath(),
		"branch":   nullableStr("Current branch (short name, also on an unborn branch); null when HEAD is detached."),
		"head":     nullableStr("Commit hash of HEAD; null before the first commit."),
		"detached": boolean("True when HEAD names a commit rather than a branch."),
		"clean":    boolean("True when entries is empty."),
		"inProgress": described(map[string]any{"type": "array", "items": letter("An operation in progress.",
			"merge", "cherry-pick", "revert", "rebase", "am", "bisect")},
			"Operations git left in progress, as git status reports them: \"merge\" (repo.commit completes it with MERGE_HEAD as a further parent), "+
				"\"cherry-pick\", \"revert\", \"rebase\" and \"am\" (repo.commit refuses with operation_in_progress; finish them with git), \"bisect\" (commits are allowed). Empty when none."),
		"entries":   described(map[string]any{"type": "array", "items": entry}, "Changed and staged files sorted by path, then untracked files sorted by path (git's porcelain order); untracked files are listed one by one (git status -uall), a nested repository as one entry. Ignored files are never listed."),
		"truncated": boolean("True when more than 10000 entries existed and only the first were returned."),
		"submodulesNotInspected": described(map[string]any{"type": "array", "items": relPath("Submodule path.")},
			"Submodules present in the working tree whose contents were not inspected: only the commit each has checked out is compared, "+
				"so modified or untracked files inside one (git status: \" M sub\") are not reported. Empty when none."),
	}, "path", "branch", "head", "detached", "clean", "inProgress", "entries", "truncated", "submodulesNotInspected")
}

func diffOutputSchema() map[string]any {
	file := obj(map[string]any{
		"path":      relPath("File path (the new path of a rename), relative to the repository."),
		"oldPath":   relPath("For a rename: the old path."),
		"status":    letter("\"A\" added, \"M\" modified, \"D\" deleted, \"R\" renamed (identical content), \"T\" type changed.", "A", "M", "D", "R", "T"),
		"additions": integer("Lines added (0 for binary files, except text that is not UTF-8, whose lines are counted as git's numstat does)."),
		"deletions": integer("Lines deleted (0 for binary files, except text that is not UTF-8, whose lines are counted as git's numstat does)."),
		"binary": boolean("True when the patch text is not given; binaryReason says why: \"filter\" (the path's filter attribute names a " +
			"clean command, never run, so its working-tree bytes are not what git would store), \"attribute\" (-diff or binary), " +
			"\"size\" (a side larger than 8 MiB), \"nul\" (a NUL byte in a side's first 8000 bytes), \"encoding\" (a side that " +
			"is not UTF-8, or whose working-tree-encoding cannot be converted; lines are still counted, as git's numstat does)."),
		"binaryReason": letter("Why binary is true (absent when it is not).", binaryReasons...),
		"filter":       str("The filter driver the path's attributes name (git-lfs: \"lfs\"); absent when none. sharedos never runs it."),
		"patch":        str("git-style unified patch of this file (3 context lines); empty or cut when the byte budget ran out."),
	}, "path", "status", "additions", "deletions", "binary", "patch")
	return obj(map[string]any{
		"path":      outRepoPath(),
		"staged":    boolean("True: index against HEAD; false: working tree against the index."),
		"files":     described(map[string]any{"type": "array", "items": file}, "Changed files sorted by path. Untracked files are not part of a diff."),
		"truncated": boolean("True when files were left out (file cap) or patch text was cut (byte cap)."),
	}, "path", "staged", "files", "truncated")
}

func logOutputSchema() map[string]any {
	commit := obj(map[string]any{
		"hash":      str("Commit hash (40 hex)."),
		"parents":   described(map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, "Parent hashes."),
		"author":    signatureSchema(),
		"committer": signatureSchema(),
		"message":   str("Full commit message, trailers included."),
	}, "hash", "parents", "author", "committer", "message")
	return obj(map[string]any{
		"path":    outRepoPath(),
		"commits": described(map[string]any{"type": "array", "items": commit}, "Commits reachable from HEAD, newest committer time first; empty before the first commit."),
	}, "path", "commits")
}

func stageOutputSchema() map[string]any {
	entry := obj(map[string]any{
		"path":   relPath("File path relative to the repository."),
		"status": letter("What staging did to the index entry: \"A\" added, \"M\" updated, \"D\" removed, \"T\" type changed.", "A", "M", "D", "T"),
	}, "path", "status")
	return obj(map[string]any{
		"path":   outRepoPath(),
		"staged": described(map[string]any{"type": "array", "items": entry}, "Index entries this call changed, sorted by path; empty when everything under the pathspec was already staged."),
		"skipped": described(map[string]any{"type": "array", "items": obj(map[string]any{
			"path":   relPath("Path relative to the repository."),
			"reason": str("Why it was not staged."),
		}, "path", "reason")}, "Paths under the pathspec that were deliberately not staged (nested repositories, paths whose filter attribute would need a clean command to run); absent when none."),
	}, "path", "staged")
}

func commitOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":    outRepoPath(),
		"hash":    str("The new commit's hash."),
		"parents": described(map[string]any{"type": "array", "items": map[string]any{"type": "string"}}, "Parent hashes (empty for the first commit)."),
		"branch":  nullableStr("The branch that now points at the commit; null when HEAD was detached."),
		"message": str("The full message as recorded, trailers included."),
		"author":  signatureSchema(),
	}, "path", "hash", "parents", "branch", "message", "author")
}
