//go:build !unix

package repoplane

const openReadNoFollow = 0

const openReadNonBlock = 0
