-- The last state each server of a project was seen in, so a restarted
-- gateway shows it for servers it has not connected yet.
CREATE TABLE kb_server_states (
    project_id TEXT NOT NULL REFERENCES kb_projects (id) ON DELETE CASCADE,
    server     TEXT NOT NULL CHECK (server <> ''),
    state      TEXT NOT NULL CHECK (state <> ''),
    error      TEXT NOT NULL DEFAULT '',
    at         INTEGER NOT NULL, -- microseconds since the epoch
    PRIMARY KEY (project_id, server)
);
