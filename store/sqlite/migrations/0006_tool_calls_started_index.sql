-- The tool-call log's (started_at, id) index served only a listing of
-- every project's calls at once, which nothing outside the tests asks
-- for (the API and the console list one project's calls, through the
-- project index). Every call paid for it: one more b-tree insert per
-- record, about a fifth of the log's insert cost.
DROP INDEX IF EXISTS kb_agent_run_tool_calls_started;
