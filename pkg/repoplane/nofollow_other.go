//go:build !unix

package repoplane

const syscallNoFollow = 0

const openReadNoFollow = 0

const openReadNonBlock = 0
