-- Leases: a gateway process's claim on itself ("gateway/<owner id>"),
-- renewed while it runs, so a replica sharing this database can tell
-- whether the containers labelled with that owner are still someone's.
-- Expiry is judged by the database's clock.
CREATE TABLE kb.leases (
    name       text PRIMARY KEY CHECK (name <> ''),
    holder     text NOT NULL CHECK (holder <> ''),
    expires_at timestamptz NOT NULL
);
