-- The lease and the fencing token of an idempotency claim (store.LeasedIdempotency):
-- epoch grows by one at every takeover of a claim whose lease ran out; held_ms is when
-- the claim was last renewed (NULL: claimed_ms, for claims made before this migration);
-- spent says that a use was spent under the claim (its spend's transaction set it, after
-- checking the epoch), so a claim that spent is never taken over.

-- +goose Up
ALTER TABLE idempotency
	ADD COLUMN epoch bigint NOT NULL DEFAULT 1,
	ADD COLUMN held_ms bigint,
	ADD COLUMN spent boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE idempotency DROP COLUMN spent, DROP COLUMN held_ms, DROP COLUMN epoch;
