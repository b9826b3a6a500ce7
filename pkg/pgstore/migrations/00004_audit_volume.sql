-- Audit at volume: `audit list --limit N` with one filter walks an index of that filter
-- in the listing's order and stops at N (O(N), not O(trail)); audit retention may delete
-- old events (the trail stays append-only for everything else).
--
-- Indexes, not partitions: a partitioned table's unique constraints must hold its
-- partition key, which would break the id's uniqueness (ON CONFLICT (id)) and seq as
-- the key; retention deletes in bounded batches instead of dropping partitions.
-- CREATE INDEX (not CONCURRENTLY: goose runs a migration in a transaction) blocks
-- appends to the trail while it builds: run `store migrate` at a quiet time.

-- +goose Up
CREATE INDEX audit_events_type_at ON audit_events (type, at_ms DESC NULLS LAST, seq DESC);
CREATE INDEX audit_events_outcome_at ON audit_events (outcome, at_ms DESC NULLS LAST, seq DESC);
CREATE INDEX audit_events_tool_at ON audit_events (tool, at_ms DESC NULLS LAST, seq DESC);
CREATE INDEX audit_events_owner_at ON audit_events (owner, at_ms DESC NULLS LAST, seq DESC);
CREATE INDEX audit_events_actor_at ON audit_events (actor, at_ms DESC NULLS LAST, seq DESC);

-- Retention (pgstore.PruneAudit) deletes events inside a transaction that sets
-- sharedos.audit_prune to 'on' (SET LOCAL); any other UPDATE or DELETE is still refused.
-- +goose StatementBegin
CREATE FUNCTION sharedos_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' AND current_setting('sharedos.audit_prune', true) = 'on' THEN
		RETURN OLD;
	END IF;
	RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME;
END
$$;
-- +goose StatementEnd
DROP TRIGGER audit_events_append_only ON audit_events;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
	FOR EACH ROW EXECUTE FUNCTION sharedos_audit_append_only();

-- +goose Down
DROP TRIGGER audit_events_append_only ON audit_events;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
	FOR EACH ROW EXECUTE FUNCTION sharedos_append_only();
DROP FUNCTION sharedos_audit_append_only();
DROP INDEX audit_events_actor_at;
DROP INDEX audit_events_owner_at;
DROP INDEX audit_events_tool_at;
DROP INDEX audit_events_outcome_at;
DROP INDEX audit_events_type_at;
