// Package catalog serves the gateway's catalog: MCP servers listed in a
// catalog file (Docker MCP Gateway's `registry:` format, parse.go) that
// a client switches on for itself with the mcp-find, mcp-add and
// mcp-remove tools (tools.go), which every project serves when a catalog
// is set, or by calling one of their tools by name (direct.go). A client
// is a session, or without one a caller: its token and client identity. Unlike hosted servers, which a project registers and which run
// until removed, a catalog server runs only for the sessions that added
// it: a long-lived one in one container for the session's lifetime, a
// per-call one in a fresh container for every tool call, taken from a
// small warm pool (pools.go). Every container is bound to a session or to
// a pool in use and removed when its owner goes (ondemand.go,
// containers.go, sessions.go). Containers are hardened and limited like
// hosted servers' (package hosted's defaults, environment and
// validation rules); the engine is reached only through engine/.
package catalog
