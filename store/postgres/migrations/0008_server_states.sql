-- The last state each server of a project was seen in, so a restarted
-- gateway shows it for servers it has not connected yet.
CREATE TABLE kb.server_states (
    project_id text NOT NULL REFERENCES kb.projects (id) ON DELETE CASCADE,
    server     text NOT NULL CHECK (server <> ''),
    state      text NOT NULL CHECK (state <> ''),
    error      text NOT NULL DEFAULT '',
    at         timestamptz NOT NULL,
    PRIMARY KEY (project_id, server)
);
