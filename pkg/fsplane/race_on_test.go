//go:build race

package fsplane

const raceEnabled = true
