-- record_id is the call log's own name for a record, made before the call
-- is answered and written to the crash spool with it. Unique, so a batch
-- replayed from the spool after a crash stores each record once. Rows
-- from before have none: NULLs never clash. (ALTER TABLE cannot add a
-- UNIQUE column in SQLite; the index is the same constraint.)
ALTER TABLE kb_agent_run_tool_calls ADD COLUMN record_id TEXT CHECK (record_id <> '');
CREATE UNIQUE INDEX kb_agent_run_tool_calls_record_id ON kb_agent_run_tool_calls (record_id);
