package mailbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// staleBox answers GetMessage with the record as it was before its resolution (still
// pending): what a reply admitted just before another reply won sees.
type staleBox struct {
	*sqlitestore.Store
	stale map[string]store.MessageRecord
}

func (b *staleBox) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	if rec, ok := b.stale[id]; ok {
		return rec, nil
	}
	return b.Store.GetMessage(ctx, world, id)
}

// TestRefusedReplySpendsNothing (issue 24): a reply the mailbox refuses — to a message
// that does not exist (message_not_found), that was answered or failed
// (message_already_resolved), from a principal that is not its receiver
// (receiver_mismatch) — spends no use of the replier's grant, changes no message and
// writes its message.sent record with the code. Checked before the use is spent
// (AdmitMessage), so with or without a recording transport; and a reply admitted while
// its request was pending that loses the race to another reply (refused inside the
// delivery's transaction) spends nothing over a recording transport (Recorded: the use
// is spent in that transaction), one use without one (the use was spent before the
// delivery). A reply that is delivered spends one use, written with its records.
func TestRefusedReplySpendsNothing(t *testing.T) {
	type tc struct {
		name   string
		sender kernel.Address
		to     string // the request answered
		race   bool
		code   kernel.ErrorCode
	}
	cases := []tc{
		{"unknown message", reviewer, "zz", false, mailbox.CodeMessageNotFound},
		{"answered message", reviewer, "done", false, mailbox.CodeMessageAlreadyResolved},
		{"failed message", reviewer, "gone", false, mailbox.CodeMessageAlreadyResolved},
		{"not its receiver", runner, "pend", false, kernel.CodeReceiverMismatch},
		{"lost the race to another reply", reviewer, "raced", true, mailbox.CodeMessageAlreadyResolved},
	}
	for _, recorded := range []bool{true, false} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/recorded=%v", c.name, recorded), func(t *testing.T) {
				ctx := context.Background()
				st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
				cfg := config()
				for _, id := range []string{"pend", "done", "gone", "raced"} {
					if _, _, err := st.DeliverMessage(ctx, world, request(id, reviewer), "2026-08-03T09:00:00.000Z", 0); err != nil {
						t.Fatal(err)
					}
				}
				box := &staleBox{Store: st, stale: map[string]store.MessageRecord{}}
				raced, err := st.GetMessage(ctx, world, "raced")
				if err != nil {
					t.Fatal(err)
				}
				box.stale["raced"] = raced
				for id, win := range map[string]string{"done": `"first"`, "raced": `"winner"`} {
					if _, err := st.ReplyMessage(ctx, world, answerOf(request(id, reviewer), win), "2026-08-03T09:00:01.000Z"); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := st.FailMessage(ctx, world, "gone", kernel.CodeMessageReplyResolutionFailed, "2026-08-03T09:00:01.000Z"); err != nil {
					t.Fatal(err)
				}
				g := sendGrant("g-reply", c.sender, asker, 10)
				k := kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Audit: st,
					MessageTransport: &mailbox.Transport{Box: box, Config: cfg, Recorded: recorded}})
				before, err := st.ListMessages(ctx, store.MessageFilter{World: world})
				if err != nil {
					t.Fatal(err)
				}
				reply := answerOf(request(c.to, reviewer), `"late"`)
				reply.Sender = c.sender
				turn, err := k.BeginTurn(actxOf(c.sender, "review", "trace-"+c.to))
				if err != nil {
					t.Fatal(err)
				}
				r, err := turn.SendMessage(ctx, reply)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != kernel.DeliveryDenied || r.Error == nil || r.Error.Code != c.code {
					t.Fatalf("the reply got %+v %+v, want denied %s", r, r.Error, c.code)
				}
				want := int64(0)
				if c.race && !recorded {
					want = 1 // spent before the delivery, which refused it
				}
				if u := used(t, st, g); u != want {
					t.Errorf("%d uses of the replier's grant spent, want %d", u, want)
				}
				after, err := st.ListMessages(ctx, store.MessageFilter{World: world})
				if err != nil {
					t.Fatal(err)
				}
				if a, b := asJSON(t, after), asJSON(t, before); a != b {
					t.Errorf("the mailbox changed: %s -> %s", b, a)
				}
				evs, err := st.ListAudit(ctx, store.AuditFilter{})
				if err != nil {
					t.Fatal(err)
				}
				var refusals int
				for _, ev := range evs {
					if ev.Type == kernel.EventMessageSent && ev.Outcome == kernel.OutcomeDenied && ev.Reason == c.code && ev.Metadata["messageId"] == reply.ID {
						refusals++
					}
				}
				if refusals != 1 {
					t.Errorf("%d message.sent records of the refusal, want 1: %+v", refusals, evs)
				}
			})
		}
	}
	t.Run("delivered", func(t *testing.T) {
		ctx := context.Background()
		st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
		if _, _, err := st.DeliverMessage(ctx, world, request("pend", reviewer), "2026-08-03T09:00:00.000Z", 0); err != nil {
			t.Fatal(err)
		}
		g := sendGrant("g-reply", reviewer, asker, 10)
		k := kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Audit: st,
			MessageTransport: &mailbox.Transport{Box: st, Config: config(), Recorded: true}})
		turn, err := k.BeginTurn(actxOf(reviewer, "review", "trace-pend"))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := turn.SendMessage(ctx, answerOf(request("pend", reviewer), `"yes"`)); err != nil || r.Status != kernel.DeliveryDelivered {
			t.Fatalf("the reply got %+v, %v", r, err)
		}
		if u := used(t, st, g); u != 1 {
			t.Errorf("%d uses spent, want 1", u)
		}
		evs, err := st.ListAudit(ctx, store.AuditFilter{Oldest: true})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range evs {
			if ev.Type != kernel.EventAuthorityResolved {
				types = append(types, string(ev.Type)+"/"+string(ev.Outcome))
			}
		}
		if fmt.Sprint(types) != "[authorization.checked/allowed message.sent/succeeded]" {
			t.Errorf("the trail of a delivered reply: %v", types)
		}
	})
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
