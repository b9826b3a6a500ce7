-- The first schema of the PostgreSQL store (its own history; sqlitestore keeps its own).

-- +goose Up
CREATE TABLE namespace_settings (
	world     text NOT NULL,
	owner     text NOT NULL,
	selection text[] NOT NULL,
	PRIMARY KEY (world, owner)
);

-- One counter per grant identity; exact across processes: a use is spent by one
-- conditional statement (uses < max) that locks the row until its transaction ends.
CREATE TABLE grant_usage (
	world    text NOT NULL,
	issuer   text NOT NULL,
	subject  text NOT NULL,
	grant_id text NOT NULL,
	uses     bigint NOT NULL CHECK (uses >= 0),
	PRIMARY KEY (world, issuer, subject, grant_id)
);

-- The append-only audit trail. seq is the order of recording (see audit.go: it is assigned
-- under a lock held until commit, so it is also the order of commit). owner and actor are
-- the addresses' "kind:id" forms, so that a filter on them is an equality.
CREATE TABLE audit_events (
	seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text NOT NULL UNIQUE,
	type         text NOT NULL,
	outcome      text NOT NULL,
	at           text NOT NULL,
	at_ms        bigint,
	tool         text NOT NULL,
	operation_id text NOT NULL,
	trace_id     text NOT NULL,
	world        text NOT NULL,
	owner        text NOT NULL,
	actor        text NOT NULL,
	event        text NOT NULL
);
-- audit list (ByInstant) walks this index from its start and stops at the limit.
CREATE INDEX audit_events_at ON audit_events (at_ms DESC NULLS LAST, seq DESC);
CREATE INDEX audit_events_operation ON audit_events (operation_id);
CREATE INDEX audit_events_trace ON audit_events (trace_id);

-- +goose StatementBegin
CREATE FUNCTION sharedos_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% rows are append-only', TG_TABLE_NAME;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
	FOR EACH ROW EXECUTE FUNCTION sharedos_append_only();

CREATE TABLE escalations (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	world      text NOT NULL,
	owner      text NOT NULL,
	trace_id   text NOT NULL,
	call_id    text NOT NULL,
	escalation text NOT NULL
);
CREATE INDEX escalations_world_owner ON escalations (world, owner);
CREATE INDEX escalations_call ON escalations (call_id);

-- At most one resolution per escalation, never updated or deleted.
CREATE TABLE escalation_resolutions (
	escalation  bigint PRIMARY KEY REFERENCES escalations (seq),
	status      text NOT NULL CHECK (status IN ('approved', 'denied')),
	resolved_by text NOT NULL,
	resolved_at text NOT NULL,
	note        text NOT NULL
);
CREATE TRIGGER escalation_resolutions_append_only BEFORE UPDATE OR DELETE ON escalation_resolutions
	FOR EACH ROW EXECUTE FUNCTION sharedos_append_only();

CREATE TABLE snapshots (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	world      text NOT NULL,
	owner      text NOT NULL,
	root       text NOT NULL,
	path       text NOT NULL,
	id         text NOT NULL,
	kind       text NOT NULL,
	label      text,
	created_ms bigint NOT NULL,
	entries    text NOT NULL,
	UNIQUE (world, owner, root, path, id)
);
CREATE INDEX snapshots_list ON snapshots (world, owner, root, path, created_ms DESC, seq DESC);

-- A cache: losing an entry costs a re-hash.
CREATE TABLE file_digests (
	dev         bigint NOT NULL,
	ino         bigint NOT NULL,
	size        bigint NOT NULL,
	mtime_ns    bigint NOT NULL,
	ctime_ns    bigint NOT NULL,
	digest      bytea NOT NULL CHECK (length(digest) = 32),
	recorded_ns bigint NOT NULL,
	PRIMARY KEY (dev, ino)
);

-- A cache, never authority.
CREATE TABLE gateway_catalogs (
	key       text PRIMARY KEY,
	stored_ms bigint NOT NULL,
	tools     text NOT NULL
);

-- +goose Down
DROP TABLE gateway_catalogs;
DROP TABLE file_digests;
DROP TABLE snapshots;
DROP TABLE escalation_resolutions;
DROP TABLE escalations;
DROP TABLE audit_events;
DROP FUNCTION sharedos_append_only();
DROP TABLE grant_usage;
DROP TABLE namespace_settings;
