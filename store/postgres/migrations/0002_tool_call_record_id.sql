-- record_id is the call log's own name for a record, made before the call
-- is answered and written to the crash spool with it. Unique, so a batch
-- replayed from the spool after a crash stores each record once. Rows
-- from before have none: NULLs never clash.
ALTER TABLE kb.agent_run_tool_calls ADD COLUMN record_id text UNIQUE CHECK (record_id <> '');
