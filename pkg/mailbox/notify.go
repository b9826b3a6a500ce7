package mailbox

import "sync"

// Notifier is the wake-up hint of a waiting router: Notify says that message id of world
// may have been resolved (answered or failed), Subscribe gives a channel that receives a
// value after such a hint. A hint is never the answer — the router reads the mailbox
// when woken — and may be lost: the router polls as well (Router.Poll; FallbackPoll with
// a notifier), so a dropped hint delays a reply, never loses it.
//
// Hub is the in-process implementation (a reply recorded by another turn of the same
// process — `serve`'s operator answering, an exec recipient's reply through the same
// serve — wakes the waiter at once). Across processes the hint comes from the store:
// on PostgreSQL, the store's answer or failure of a message (ReplyMessage, FailMessage)
// sends NOTIFY with the payload world and id in its transaction, and the store's
// listener (pgstore's LISTEN/NOTIFY connection, shared with the revision) calls
// Hub.Notify of the store's own hub for each notification, and Hub.NotifyAll each time
// it (re)establishes its LISTEN (see pgstore.Store.MessageHints).
type Notifier interface {
	Notify(world, id string)
	// Subscribe returns a channel that receives (buffered, once per hint) after a
	// Notify of (world, id), and cancel to stop listening.
	Subscribe(world, id string) (wake <-chan struct{}, cancel func())
}

type hubKey struct{ world, id string }

// Hub is an in-process Notifier.
type Hub struct {
	mu   sync.Mutex
	subs map[hubKey]map[chan struct{}]struct{}
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[hubKey]map[chan struct{}]struct{}{}} }

// Notify wakes every subscriber of (world, id); a subscriber already woken and not yet
// reading stays woken once.
func (h *Hub) Notify(world, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[hubKey{world, id}] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// NotifyAll wakes every subscriber, whatever it waits for: a source of hints that may
// have lost some (pgstore's listener, at each LISTEN it (re)establishes) sends it so
// that each waiter reads the mailbox once instead of waiting for its next poll.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// Subscribe listens for Notify of (world, id).
func (h *Hub) Subscribe(world, id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	k := hubKey{world, id}
	h.mu.Lock()
	if h.subs[k] == nil {
		h.subs[k] = map[chan struct{}]struct{}{}
	}
	h.subs[k][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[k], ch)
		if len(h.subs[k]) == 0 {
			delete(h.subs, k)
		}
		h.mu.Unlock()
	}
}
