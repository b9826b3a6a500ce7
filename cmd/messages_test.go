package cmd

import "testing"

func TestNewCmdMessagesInbox(t *testing.T) {
	t.Parallel()
	type p struct {
		Status string
		Limit  int
	}
	for _, tc := range []struct {
		argv    []string
		want    p
		wantErr string
	}{
		{argv: nil},
		{argv: []string{"--status", "pending", "--limit", "3"}, want: p{"pending", 3}},
		{argv: []string{"--status", "lost"}, wantErr: "lost"},
		{argv: []string{"--limit", "-1"}, wantErr: "invalid --limit"},
		{argv: []string{"x"}, wantErr: "takes no arguments"},
	} {
		checkParse(t, newMessagesInboxCmd, tc.argv, func(o *MessagesInboxOptions) p { return p{o.Status, o.Limit} }, tc.want, tc.wantErr)
	}
}

func TestNewCmdMessagesShow(t *testing.T) {
	t.Parallel()
	checkParse(t, newMessagesShowCmd, []string{"m-1"}, func(o *MessagesShowOptions) string { return o.ID }, "m-1", "")
	checkParse(t, newMessagesShowCmd, nil, func(o *MessagesShowOptions) string { return o.ID }, "", "message id")
	checkParse(t, newMessagesWaitCmd, []string{"m-2"}, func(o *MessagesShowOptions) string { return o.ID }, "m-2", "")
	checkParse(t, newMessagesWaitCmd, nil, func(o *MessagesShowOptions) string { return o.ID }, "", "message id")
}

func TestNewCmdMessagesSendAndReply(t *testing.T) {
	t.Parallel()
	type p struct{ To, ID, Payload, File string }
	project := func(o *MessagesSendOptions) p { return p{o.To, o.ID, o.Payload, o.PayloadFile} }
	for _, tc := range []struct {
		argv    []string
		want    p
		wantErr string
	}{
		{argv: []string{"--to", "agent:reviewer", "--payload", `{"a":1}`}, want: p{To: "agent:reviewer", Payload: `{"a":1}`}},
		{argv: []string{"--to", "agent:reviewer", "--payload-file", "a.json"}, want: p{To: "agent:reviewer", File: "a.json"}},
		{argv: []string{"--payload", "1"}, wantErr: "no recipient"},
		{argv: []string{"--to", "robot:x", "--payload", "1"}, wantErr: "invalid address"},
		{argv: []string{"--to", "agent:reviewer"}, wantErr: "no payload"},
		{argv: []string{"--to", "agent:reviewer", "--payload", "1", "--payload-file", "a"}, wantErr: "exclusive"},
	} {
		checkParse(t, newMessagesSendCmd, tc.argv, project, tc.want, tc.wantErr)
	}
	for _, tc := range []struct {
		argv    []string
		want    p
		wantErr string
	}{
		{argv: []string{"m-1", "--payload", `"yes"`}, want: p{ID: "m-1", Payload: `"yes"`}},
		{argv: []string{"m-1"}, wantErr: "no payload"},
		{argv: []string{"--payload", "1"}, wantErr: "message id"},
	} {
		checkParse(t, newMessagesReplyCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}
