package pgstore

import (
	"encoding/json"

	"github.com/sharedos/sharedos/pkg/mailbox"
)

// # The mailbox's wake-up hints
//
// A request waiting for its reply (mailbox.Router) on one replica is answered, usually,
// through another: the answer or failure of a message (ReplyMessage, FailMessage, one
// statement) sends NOTIFY sharedos_message with the payload the JSON array [world, id]
// in its transaction, so it is delivered when (and only if) the resolution commits. The
// revision's listener (one connection per process, see Revision) LISTENs on that channel
// as well and hands each (world, id) to the store's hub (MessageHints), which wakes the
// waiters of that message at once; the router then reads the mailbox — a hint is never
// the answer.
//
// A hint may be lost (the listener's connection dropped, a replica of an older build
// that sends none): each time the listener (re)establishes its LISTEN it wakes every
// waiter once (Hub.NotifyAll), so a notification lost while it was disconnected costs
// one reconnect, not a poll; and each waiter still polls (mailbox.FallbackPoll, 1 s) in
// case the loss goes unnoticed (a connection that hangs instead of failing).
//
// The NOTIFY is in the Go statement rather than a trigger: no migration, so a replica
// of this build on a schema of the previous one sends it too, and the resolution is
// still one statement. The hub is the store's, not the process's: two replicas in one
// process (the tests, the benchmark) are woken by NOTIFY only, as two processes are.

// messageChannel is the NOTIFY channel of the mailbox (payload: JSON [world, id]).
const messageChannel = "sharedos_message"

// MessageHints returns the store's wake-up hints of waiting requests (mailbox.Notifier):
// Notify wakes the waiters of this process at once (a reply recorded by this process),
// and the NOTIFY of a resolution by any process wakes them through the listener, which
// the first Subscribe starts (a process that never waits opens no listening
// connection). A router given it polls as a fallback only (mailbox.FallbackPoll).
func (s *Store) MessageHints() mailbox.Notifier { return messageHints{s} }

type messageHints struct{ s *Store }

func (h messageHints) Notify(world, id string) { h.s.hints.Notify(world, id) }

func (h messageHints) Subscribe(world, id string) (<-chan struct{}, func()) {
	h.s.listen()
	return h.s.hints.Subscribe(world, id)
}

// messageNoted hands the payload of a mailbox notification to the hub (a payload that
// does not read is ignored: it is only a hint).
func (s *Store) messageNoted(payload string) {
	var wid []string
	if json.Unmarshal([]byte(payload), &wid) != nil || len(wid) != 2 {
		return
	}
	s.hints.Notify(wid[0], wid[1])
}
