// Package secrets keeps project secrets safe at rest and out of logs.
//
// A Box seals each secret value with AES-256-GCM under the gateway's key,
// binding the ciphertext to its project and name so that it cannot be
// replayed into another slot. The key comes from MCP_SERVER_SECRET_KEY or,
// when that is unset, from a key file that LoadKey creates in the data
// directory. API tokens are random strings of which only a SHA-256 hash is
// stored. A Redactor removes the current secret values from text and, as a
// slog.Handler wrapper, from every log record.
package secrets
