package pgstore_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// sendGrants is a trusted grant source: the grants whose subject is the context's actor.
type sendGrants []kernel.CapabilityGrant

func (g sendGrants) LoadGrants(_ context.Context, actx kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	var out []kernel.CapabilityGrant
	for _, x := range g {
		if x.Subject == actx.Actor && x.Issuer == actx.Authority && x.NamespaceID == actx.World {
			out = append(out, x)
		}
	}
	return out, nil
}

// TestSameMessageIDThousandTimesFourHandles is issue 24's "the same message id sent
// 1,000 times concurrently ⇒ one row, one spent use, identical receipts" on PostgreSQL
// at the kernel: one envelope (one id) sent 1,000 times at once through 4 kernels, each
// over its own handle of the database (4 processes' worth of locks and connections),
// the message id claimed across them (Transport.Claims). A copy refused
// message_send_in_progress (the id claimed by another handle's send) is sent again, as
// its code says. Every copy ends with the same accepted receipt; the mailbox holds one
// row, the grant (5 uses) one spent use, the trail one accepted message.sent record.
func TestSameMessageIDThousandTimesFourHandles(t *testing.T) {
	const handles, copies = 4, 1000
	first, dsn := openFresh(t)
	const world = "w1"
	maxUses := int64(5)
	g := kernel.CapabilityGrant{ID: "g-send", NamespaceID: world, Subject: helper, Issuer: alice, IssuedAt: "2026-01-01T00:00:00.000Z",
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: kernel.MessagingNamespace, Path: []string{"human", "alice"}},
			Actions: []string{"send"}, Scope: kernel.ScopeExact}}, Constraints: kernel.CapabilityConstraints{MaxUses: &maxUses}}
	cfg := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{alice: {Mode: mailbox.ModeWait}}}
	kernels := make([]*kernel.Kernel, handles)
	for i := range handles {
		st := first
		if i > 0 {
			var err error
			if st, err = pgstore.Open(context.Background(), dsn, pgstore.Options{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
		}
		kernels[i] = kernel.New(kernel.Config{Grants: sendGrants{g}, Usage: st, Audit: st,
			MessageTransport: &mailbox.Transport{Box: st, Config: cfg, Claims: st}})
	}
	env := kernel.MessageEnvelope{Version: "1", ID: "same-id", Sender: helper, Receiver: alice, Purpose: "test",
		Payload: json.RawMessage(`{"ask":"deploy?"}`), TraceID: "trace-1", CreatedAt: "2026-01-01T00:00:00.000Z"}
	actx := kernel.AccessContext{World: world, Actor: helper, Authority: alice, Owner: alice, Purpose: "test", TraceID: "trace-1",
		Now: "2026-01-01T00:00:00.000Z"}
	receipts := make([]kernel.MessageDeliveryResult, copies)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // copies in flight at once: the pools' connections
	for n := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for try := 0; ; try++ {
				turn, err := kernels[n%handles].BeginTurn(actx)
				if err != nil {
					t.Error(err)
					return
				}
				r, err := turn.SendMessage(context.Background(), env)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Error != nil && r.Error.Code == kernel.CodeMessageSendInProgress && try < 10000 {
					time.Sleep(time.Millisecond)
					continue
				}
				receipts[n] = r
				return
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for n := range receipts {
		if receipts[n].Status != kernel.DeliveryAccepted || !reflect.DeepEqual(receipts[n], receipts[0]) {
			t.Fatalf("receipt %d = %+v, receipt 0 = %+v", n, receipts[n], receipts[0])
		}
	}
	ctx := context.Background()
	rows, err := first.ListMessages(ctx, store.MessageFilter{World: world})
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d rows (%v), want 1", len(rows), err)
	}
	if u, err := first.GetUsage(ctx, kernel.UsageKeyOf(&g)); err != nil || u != 1 {
		t.Fatalf("%d uses spent (%v), want 1", u, err)
	}
	evs, err := first.ListAudit(ctx, store.AuditFilter{Types: []string{string(kernel.EventMessageSent)}})
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, ev := range evs {
		if ev.Outcome == kernel.OutcomeSucceeded && ev.GrantID == g.ID {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("%d message.sent records of an authorized delivery, want 1", accepted)
	}
}
