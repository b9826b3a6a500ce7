// Package uuid mints UUIDs for trace, call and session ids: random ones (version 4), and
// time-ordered random ones (version 7) for the ids the audit trail indexes in the order
// they are minted.
package uuid

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// New returns a random (version 4) UUID in its canonical text form.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return format(b)
}

// NewV7 returns a version 7 UUID (RFC 9562): the Unix time in milliseconds, then 74
// random bits. Call ids are minted this way: the audit trail's operation index then grows
// at its end, as its rows do, instead of at a random place per call (a random id dirtied
// one more index page per call, about half of what recording a call wrote).
func NewV7() string {
	var b [16]byte
	_, _ = rand.Read(b[6:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return format(b)
}

func format(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
