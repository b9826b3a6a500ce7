-- Freshness across replicas: the revision of the shared state a replica may cache or a
-- client may read back (namespace selections, escalations and their resolutions, the
-- tokens of `--tokens store:`), bumped by a trigger in the transaction of every change of
-- those tables and announced on commit with NOTIFY sharedos_revision; and the tokens
-- table itself. Self-contained: nothing here depends on Go code to keep the revision.

-- +goose Up
-- One row: the revision. Updating it locks the row until the transaction ends, so the
-- revisions of the changes are in the order of their commits (a reader that sees
-- revision N sees every change numbered N or less).
CREATE TABLE sharedos_revision (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	rev bigint NOT NULL
);
INSERT INTO sharedos_revision (one, rev) VALUES (true, 0);

-- +goose StatementBegin
CREATE FUNCTION sharedos_bump_revision() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	r bigint;
BEGIN
	-- one revision per transaction (an INSERT … ON CONFLICT DO UPDATE fires the INSERT
	-- and the UPDATE triggers; a transaction may change several tables)
	IF coalesce(current_setting('sharedos.revision', true), '') <> '' THEN
		RETURN NULL;
	END IF;
	UPDATE sharedos_revision SET rev = rev + 1 RETURNING rev INTO r;
	-- delivered when (and only if) the transaction commits; a wake-up hint only:
	-- listeners poll the row as well (a notification is lost while one reconnects)
	PERFORM pg_notify('sharedos_revision', r::text);
	-- for the writer: the revision its transaction bumped the count to
	PERFORM set_config('sharedos.revision', r::text, true);
	RETURN NULL;
END
$$;
-- +goose StatementEnd

-- The tokens of `--tokens store:` (pkg/tokens' entries, kept in the database): the
-- SHA-256 of each token only, never the token.
CREATE TABLE tokens (
	id         text PRIMARY KEY,
	sha256     text NOT NULL UNIQUE CHECK (sha256 ~ '^[0-9a-f]{64}$'),
	actor      text NOT NULL,
	owner      text,
	authority  text,
	world      text NOT NULL DEFAULT '',
	purpose    text NOT NULL DEFAULT '',
	grants     text[] NOT NULL,
	expires_ms bigint,
	role       text NOT NULL DEFAULT 'agent' CHECK (role IN ('agent', 'operator')),
	created_ms bigint NOT NULL
);

CREATE TRIGGER namespace_settings_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON namespace_settings
	FOR EACH STATEMENT EXECUTE FUNCTION sharedos_bump_revision();
CREATE TRIGGER escalations_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON escalations
	FOR EACH STATEMENT EXECUTE FUNCTION sharedos_bump_revision();
CREATE TRIGGER escalation_resolutions_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON escalation_resolutions
	FOR EACH STATEMENT EXECUTE FUNCTION sharedos_bump_revision();
CREATE TRIGGER tokens_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tokens
	FOR EACH STATEMENT EXECUTE FUNCTION sharedos_bump_revision();

-- +goose Down
DROP TRIGGER escalation_resolutions_revision ON escalation_resolutions;
DROP TRIGGER escalations_revision ON escalations;
DROP TRIGGER namespace_settings_revision ON namespace_settings;
DROP TABLE tokens;
DROP FUNCTION sharedos_bump_revision();
DROP TABLE sharedos_revision;
