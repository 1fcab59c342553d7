/**
 * `npm run test:under-load`: the files whose tests wait on timers, leases, heartbeats or deadlines, run while a busy
 * loop per core takes the whole machine (docs/development.md "Tests on a busy machine"). Their point is the order of
 * events, not the milliseconds, so they must pass here as on an idle machine. Both stores, one after the other;
 * arguments replace the list of files.
 */
import { POSTGRES_PASS, TIMING_SENSITIVE } from './test-files.ts'

const files = process.argv.length > 2 ? process.argv.slice(2) : TIMING_SENSITIVE
const cores = navigator.hardwareConcurrency
const busy = Array.from({ length: cores }, () => Bun.spawn([process.execPath, '-e', 'for (;;) {}'], { stdout: 'ignore', stderr: 'ignore' }))
let failed = false
try {
  console.log(`==> ${cores} busy loops (one per core) running beside the tests`)
  for (const [label, env, list] of [
    ['SQLite', {}, files],
    ['PostgreSQL', { TRELLIS_TEST_STORE: 'postgres' }, files.filter((file) => POSTGRES_PASS.includes(file))],
  ] as const) {
    if (list.length === 0) continue
    console.log(`\n==> ${label}: bun test ${list.join(' ')}`)
    const child = Bun.spawn([process.execPath, 'test', '--timeout=30000', ...list], { env: { ...process.env, ...env }, stdout: 'inherit', stderr: 'inherit' })
    if ((await child.exited) !== 0) failed = true
  }
} finally {
  for (const loop of busy) loop.kill()
}
process.exit(failed ? 1 : 0)
