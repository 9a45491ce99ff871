// Package bench holds Switchboard's performance benchmarks. It has no
// library code: everything is in its _test.go files, and nothing runs in a
// plain `go test ./...` beyond a fast smoke test of the harness.
//
// Run the benchmarks (without -race, on an otherwise idle machine) with
//
//	go test -run '^$' -bench . -benchtime 5s ./bench
//
// They measure, in the same run:
//
//   - BenchmarkEcho: N concurrent go-sdk client sessions (BENCH_SESSIONS,
//     default 8) calling the fixture's echo tool in a loop, directly against
//     the fixture served over streamable HTTP (in this process, "direct",
//     and in a child process, "direct-process") and through an in-process
//     gateway whose upstream is the fixture as a stdio child
//     ("gateway-stdio"). Reports calls/s, p50 and p99 latency, CPU per call
//     (this process plus the fixture's) and, on the gateway line, the ratio
//     of its calls/s to each direct one (target >= 0.75).
//   - BenchmarkToolsList: tools/list over raw HTTP JSON-RPC (one keep-alive
//     connection) against a gateway with BENCH_UPSTREAMS (default 50) stdio
//     fixtures of BENCH_UPSTREAM_TOOLS (default 20) extra tools each
//     (target p50 < 1 ms).
//   - BenchmarkHostedEcho: the mcpfixture binary's echo through the gateway
//     as a hosted server (a FROM-scratch container, MCP over the attach
//     stream, calls serialized) and, in the same run, as a plain stdio
//     upstream; BENCH_HOSTED_SESSIONS (default 1) concurrent sessions.
//     Prints both lines and the hosted/stdio ratio (target >= 0.8). Needs
//     the Docker engine (skipped without one). Its CPU/call counts this
//     process only: the fixture runs in a child or a container.
//   - BenchmarkAttachRelay (run with -benchtime 1x): the hosted path taken
//     apart, no gateway: the fixture's echo over raw JSON-RPC lines as a
//     child process (pipes), in a container through Docker's attach, and
//     in a container whose stdio is a unix socket (sockrelay); round-trip
//     p50/p99 and CPU per call of this process, dockerd and the shims.
//   - BenchmarkCatalogBurst (run with -benchtime 1x): rounds of 16
//     back-to-back calls of a per-call catalog server; p50/p99 of the 15
//     after the first, per round (target p99 < 100 ms).
//   - BenchmarkIdleMemory: VmRSS of a separately built (go build) and
//     started gateway process, idle and with BENCH_MEMORY_SESSIONS (default
//     1000) idle sessions open (targets < 40 MB idle, < +50 MB for 1000
//     sessions).
//   - BenchmarkLight (run with -benchtime 1x): a raw-HTTP client against
//     the fixture's own process and two gateway processes (call log on and
//     off) at BENCH_LIGHT_SESSIONS (default 1,8,64) for
//     BENCH_LIGHT_SECONDS (default 3) each: calls/s, p50/p99 and the
//     serving process's CPU µs per call from /proc (light_test.go).
//   - BenchmarkHotPath: tools/call through an in-process gateway's
//     handler, no network: allocations and bytes per call.
//
// The machine's other load shows in every number: on a small shared
// machine, compare runs with -count and benchstat rather than one run.
//
// A summary with every number and the targets is printed after the run.
// Targets are printed, never asserted.
//
// BENCH_MEMORY=1 also runs the memory measurement as a test (TestIdleMemory)
// for a quick look without -bench.
package bench
