-- The gateway's instance id: the default name it labels its containers and
-- volumes with on the Docker engine (MCP_SERVER_INSTANCE overrides it), so
-- two deployments whose stores look alike (two compose projects on
-- postgres:5432/switchboard, two images on /data) never take each other's
-- containers for their own. Made here, once, for a new store; a store
-- that already served (it has projects) gets none, and the gateway keeps
-- the name it derived before, so it still finds its containers.
CREATE TABLE kb_gateway_instance (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    id        TEXT NOT NULL CHECK (id <> '')
);
INSERT INTO kb_gateway_instance (singleton, id)
    SELECT 1, lower(hex(randomblob(6))) WHERE NOT EXISTS (SELECT 1 FROM kb_projects);
