/**
 * Debian's PgBouncer in transaction pooling mode in front of a test cluster, as a deployment behind a pooler runs it:
 * every database of the cluster reachable through it (`* =`), trust authentication on 127.0.0.1, each transaction on
 * whichever server connection is free. As root it runs as the unprivileged `postgres` user (it refuses root).
 */
import { chownSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { freePort, tempDir } from '../helpers.ts'

export const pgbouncerBinary = Bun.which('pgbouncer') ?? (Bun.file('/usr/sbin/pgbouncer').size > 0 ? '/usr/sbin/pgbouncer' : null)

export interface Pooler {
  /** The port it listens on (127.0.0.1). */
  port: number
  stop(): void
}

const asRoot = process.getuid?.() === 0
const idOfPostgres = (flag: '-u' | '-g') => Number(Bun.spawnSync(['id', flag, 'postgres']).stdout.toString())

/**
 * Starts PgBouncer in front of the cluster at `clusterUrl` (postgres://postgres@127.0.0.1:PORT/…), synchronously (the
 * test helpers that hand out database URLs are): returns once it accepts connections.
 */
export function startPgbouncer(clusterUrl: string): Pooler {
  if (pgbouncerBinary === null) throw new Error('pgbouncer not found (apt-get install pgbouncer)')
  const cluster = new URL(clusterUrl)
  const dir = tempDir('trellis-pgbouncer-')
  const port = freePort()
  writeFileSync(join(dir.path, 'users.txt'), `"${cluster.username || 'postgres'}" ""\n`)
  writeFileSync(
    join(dir.path, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${cluster.hostname} port=${cluster.port}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir.path, 'users.txt')}`,
      'pool_mode = transaction',
      'max_client_conn = 5000',
      // Per database: each test database has its own pool; the server's max_connections bounds the sum.
      'default_pool_size = 20',
      'max_db_connections = 40',
      'server_idle_timeout = 5',
      `logfile = ${join(dir.path, 'pgbouncer.log')}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
  )
  if (asRoot) chownSync(dir.path, idOfPostgres('-u'), idOfPostgres('-g'))
  const args = [pgbouncerBinary, join(dir.path, 'pgbouncer.ini')]
  const child = Bun.spawn(asRoot ? ['runuser', '-u', 'postgres', '--', ...args] : args, { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' })
  // A pooler never outlives the process that started it (bun test runs no exit handlers).
  Bun.spawn(['sh', '-c', `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill ${child.pid} 2>/dev/null; rm -rf '${dir.path}'`], { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' }).unref()
  child.unref()
  const waited = Bun.spawnSync(['bash', '-c', `for i in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null && exit 0; sleep 0.05; done; exit 1`])
  if (waited.exitCode !== 0) {
    child.kill()
    throw new Error(`pgbouncer did not start on port ${port}: ${readLog(join(dir.path, 'pgbouncer.log'))}`)
  }
  return {
    port,
    stop: () => {
      child.kill()
      dir.cleanup()
    },
  }
}

function readLog(path: string): string {
  try {
    return readFileSync(path, 'utf8').slice(-2000)
  } catch {
    return '(no log)'
  }
}
