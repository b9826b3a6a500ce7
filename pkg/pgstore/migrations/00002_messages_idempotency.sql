-- The mailbox (store.Mailbox) and the idempotency keys of serve (store.Idempotency).

-- +goose Up
-- One row per message of a world; pending until answered or failed, never changed after.
CREATE TABLE messages (
	seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	world       text NOT NULL,
	id          text NOT NULL,
	sender      text NOT NULL,
	receiver    text NOT NULL,
	envelope    text NOT NULL,
	accepted_at text NOT NULL,
	status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'failed')),
	reply       text,
	failed_code text,
	resolved_at text,
	UNIQUE (world, id)
);
CREATE INDEX messages_receiver ON messages (world, receiver, status);
CREATE INDEX messages_sender ON messages (world, sender, status);

-- The responses of requests sent with an Idempotency-Key, by (scope, key); status 0 while
-- the first request runs. scope and fingerprint are bytes: a scope may hold NUL
-- separators, which text cannot.
CREATE TABLE idempotency (
	scope       bytea NOT NULL,
	key         text NOT NULL,
	fingerprint bytea NOT NULL,
	claimed_ms  bigint NOT NULL,
	status      integer NOT NULL,
	body        bytea,
	PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_claimed ON idempotency (claimed_ms);

-- +goose Down
DROP TABLE idempotency;
DROP TABLE messages;
