/**
 * A long transaction elsewhere in the PostgreSQL cluster (src/db/postgres/transaction-watch.ts): a real `serve` on
 * PostgreSQL with TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS=1 sees another session hold a transaction id past it — the
 * log names the session once, `/readyz` answers 200 `degraded` (`long_transaction`) and `/metrics` shows the age —
 * and once it commits, ready again and the gauge back to 0. SQLite has no other writers: its `/readyz` never says so.
 */
import { afterAll, beforeAll, expect } from 'bun:test'
import { SQL } from 'bun'
import { POSTGRES_ONLY, postgresOnlyTest, processEnv, type ServeProcess, startServe, tempDir, testEnv, type TestEnv, until } from './helpers.ts'

let env: TestEnv
let server: ServeProcess
const cwd = tempDir()

beforeAll(async () => {
  env = testEnv()
  if (env.databaseUrl === null) return
  server = await startServe({
    dataDir: env.dataDir,
    cwd: cwd.path,
    env: { ...processEnv(env), TRELLIS_LOG_LEVEL: 'info', TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS: '1', TRELLIS_SECRET: 'long-transactions-secret-0123456789abcdef' },
    timeoutMs: 20_000,
  })
}, 60_000)

afterAll(async () => {
  await server?.stop('SIGTERM')
  env?.cleanup()
  cwd.cleanup()
})

/** The server's log lines (warnings and errors go to stderr). */
const logLines = () => `${server.stdout()}\n${server.stderr()}`.split('\n')
/**
 * The warnings about the session `pid`: the watch sees the whole cluster, which `npm test` shares between test
 * processes, so a long transaction of another file may be named too.
 */
const warningsAbout = (pid: number) => logLines().filter((line) => line.includes('past TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS') && line.includes(`"pid":${pid},`))
const readyz = async () => (await (await fetch(`${server.url}/readyz`)).json()) as { status: string; code?: string; message?: string }
const oldestSeconds = async () => Number(/^trellis_database_oldest_transaction_seconds (\S+)$/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1])

postgresOnlyTest(
  POSTGRES_ONLY.concurrentWriters,
  'a transaction held open past the limit by another session: logged once with its session, /readyz degraded, the age in /metrics; ready again once it ends',
  async () => {
    expect(await readyz()).toEqual({ status: 'ready' })
    const other = new SQL({ url: env.databaseUrl!, max: 1 })
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let held!: (pid: number) => void
    const holding = new Promise<number>((resolve) => (held = resolve))
    // A report left open: it asked for a transaction id (as any write does) and then waits.
    const transaction = other.begin(async (tx) => {
      const [row] = (await tx`SELECT pg_backend_pid() AS pid, pg_current_xact_id()::text AS xid`) as { pid: number }[]
      held(row!.pid)
      await released
    })
    const pid = await holding
    // Work goes on behind it (transactions of later ids finish): what a long transaction then holds back.
    let working = true
    const work = (async () => {
      const writer = new SQL({ url: env.databaseUrl!, max: 1 })
      while (working) {
        await writer`SELECT pg_current_xact_id()`
        await Bun.sleep(100)
      }
      await writer.close()
    })()
    try {
      const degraded = await until('/readyz to say degraded', async () => {
        const answer = await readyz()
        return answer.status === 'degraded' ? answer : null
      }, 20_000, 100)
      expect(degraded.code).toBe('long_transaction')
      expect(degraded.message).toContain('TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS (1 s)')
      expect(await oldestSeconds()).toBeGreaterThanOrEqual(1)
      const warning = await until('the warning', () => warningsAbout(pid)[0])
      expect(JSON.parse(warning)).toMatchObject({ level: 'warn', pid, limitSeconds: 1 })
    } finally {
      working = false
      await work
      release()
      await transaction
      await other.close()
    }
    await until('/readyz to say ready', async () => (await readyz()).status === 'ready' || null, 20_000, 100)
    await until('the gauge to read 0', async () => (await oldestSeconds()) === 0 || null, 20_000, 100)
    await until('the end said', () => logLines().some((line) => line.includes('the long PostgreSQL transaction ended')) || null)
    // Said once while it lasted.
    expect(warningsAbout(pid)).toHaveLength(1)
  },
  60_000,
)
