-- Leases: a gateway process's claim on itself ("gateway/<owner id>"),
-- renewed while it runs, so another process sharing this store can tell
-- whether the containers labelled with that owner are still someone's.
CREATE TABLE kb_leases (
    name       TEXT PRIMARY KEY CHECK (name <> ''),
    holder     TEXT NOT NULL CHECK (holder <> ''),
    expires_at INTEGER NOT NULL -- microseconds since the epoch
);
