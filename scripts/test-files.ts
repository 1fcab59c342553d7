/** The test files `npm test` (./test.ts) and `npm run test:under-load` (./test-under-load.ts) treat apart. */

/**
 * The PostgreSQL pass: every test file that touches storage through a test env (`testEnv()`: the app, the services,
 * the queue, the apply, a real CLI or `serve` process given `processEnv(env)`, the browser over such a `serve`), so
 * both stores are tested alike. Its tests of SQLite itself are `sqliteOnlyTest`s, skipped here with their reason in
 * their name (docs/development.md "Development" lists them). Not here: files that need no store (pure functions, source scans,
 * the outbound client, the README, the OpenAPI document, the binary, the installer, the bench's load generator), and
 * those that test PostgreSQL or both stores side by side already in the first pass (postgres-*, shared-limits,
 * audit-chain-scale, executor-postgres, faults-postgres, twins-*, schema-parity, db-copy; scale-out is the exception: its three instances
 * run again here, through PgBouncer like the rest of the pass's parallel part, ./test.ts), and the browser files that check
 * the console's markup alone (console-pages-browser: every page's layout and axe-core; console-authoring-browser: the
 * editor's behaviour; console-live-run-browser: a live run page's callbacks and retry marker), whose server calls run
 * on PostgreSQL in console, workflow-versions, callbacks and console-browser.
 */
export const POSTGRES_PASS = [
  'activity-logs',
  'admin-logs',
  'audit-witness',
  'administration',
  'answers',
  'apply',
  'audit-chain',
  'auth',
  'backup',
  'callbacks',
  'cli',
  'collection-schemas',
  'console',
  'console-admin-browser',
  'console-browser',
  'console-health-browser',
  'console-live-browser',
  'console-records',
  'console-records-browser',
  'console-search',
  'console-tasks',
  'console-tasks-browser',
  'console-triggers-browser',
  'db',
  'deep-json',
  'executor',
  'executor-fair-share',
  'executor-fairness',
  'faults',
  'fuzz',
  'group-commit',
  'hot-paths',
  'http',
  'idempotency',
  'invariants',
  'list-paging',
  'login-throttle',
  'long-transactions',
  'lookup-cache',
  'mail',
  'management-rate-limit',
  'mcp',
  'member-remove',
  'notes',
  'nul-text',
  'oidc',
  'oidc-browser',
  'openapi-conformance',
  'ops',
  'outbound-allow',
  'overload',
  'pgbouncer',
  'project-access',
  'queue',
  'record-updates',
  'records-api',
  'records-csv',
  'records-csv-browser',
  'records-csv-export',
  'request-path',
  'retry',
  'route-fuzz',
  'routes',
  'run-history',
  'run-events',
  'run-events-catch-up',
  'runs-list',
  'scale-out',
  'scale-out-lists',
  'schedules',
  'storage-faults',
  'stream-limits',
  'tasks',
  'task-deadlines',
  'tokens',
  'tracing',
  'wal-checkpoints',
  'webhook',
  'webhook-cli',
  'wire-compat',
  'workflow-events',
  'workflow-health',
  'workflow-types',
  'workflow-versions',
].map((name) => `test/${name}.test.ts`)

/**
 * Files that time something under a load they make themselves (answers while the server is saturated, the WAL under
 * sustained writes, /healthz during a flood of password checks, during the route and operation fuzzers' requests,
 * while the executor works off a backlog or while streams catch up on a long history, the file's growth under a steady
 * trigger loop, a group commit's time budget, Litestream beside a writing server): run after the parallel part, two at
 * a time, each file of each store its own process, longest first by the slower of its two passes (the order here), so
 * that the two end close together (one load beside each, not the parallel part's dozens: there, on a machine at load
 * 27, the fuzzers' 100 ms bounds failed); those of `SATURATING` with nothing beside them. What a file
 * measures of its own process alone (records-csv-export: its memory while a large export streams), what it asserts
 * with margins a loaded machine keeps (deep-json: 1 s against the 7–14 s of the freeze it guards against), and what
 * times nothing (bench-load, shared-limits) runs in the parallel part.
 */
export const ALONE = [
  'litestream',
  'wal-checkpoints',
  'fuzz',
  'run-history',
  'run-events-catch-up',
  'login-throttle',
  'route-fuzz',
  'group-commit',
  'executor-fairness',
  'overload',
].map((name) => `test/${name}.test.ts`)

/**
 * The timing files that saturate the machine on purpose and bound latencies under it (/healthz's p99 while a mixed
 * load takes every core): beside the other store's pass the bound measured that pass too (55 ms against 50 once), so
 * they run last, one store after the other, with nothing beside them.
 */
export const SATURATING = ['overload'].map((name) => `test/${name}.test.ts`)

/**
 * Files that take longest (fifteen seconds or more of a 2-core machine in the parallel part: browsers, many servers,
 * both stores' long tests), longest first by the slower of their two passes: each runs as its own process, started
 * first, so that the pool's processes end close together instead of one long file running on at the end. The other
 * files share a process a few at a time (./test.ts `BATCH`).
 */
export const LONGEST_FIRST = [
  'console-pages-browser',
  'records-csv',
  'schedules',
  'list-paging',
  'console-browser',
  'console-records-browser',
  'console-live-browser',
  'console-tasks-browser',
  'records-csv-export',
  'task-deadlines',
  'readme-commands',
  'console-admin-browser',
  'executor',
  'cli',
  'run-events',
  'oidc',
  'console-builder-browser',
  'faults-postgres',
  'console-triggers-browser',
  'audit-witness',
  'audit-chain',
  'console-authoring-browser',
  'executor-postgres',
  'stream-limits',
  'mail',
  'console-health-browser',
  'callbacks',
  'binary',
  'http',
  'console-live-run-browser',
  'twins-notes',
  'scale-out',
  'auth',
  'activity-logs',
  'openapi-conformance',
  'apply',
  'lookup-cache',
  'oidc-browser',
  'idempotency',
  'mcp',
].map((name) => `test/${name}.test.ts`)

/**
 * Files whose tests wait on timers, leases, heartbeats, retries or deadlines (`npm run test:under-load` runs them beside
 * a busy loop per core): their assertions are about the order of events, with margins that hold on a loaded machine.
 */
export const TIMING_SENSITIVE = [
  'executor',
  'executor-postgres',
  'faults',
  'callbacks',
  'stream-limits',
  'storage-faults',
  'turn-slices',
  'layers-cli',
  'twins-queue',
  'retry',
  'queue',
  'run-events',
  'mail',
  'task-deadlines',
  'workflow-events',
  'schedules',
].map((name) => `test/${name}.test.ts`)

