/**
 * Several real `trellis serve` processes on one PostgreSQL database, as a scaled-out deployment runs them
 * (test/scale-out.test.ts, test/faults-postgres.test.ts): the same secret and settings, an Acme document applied
 * through the real CLI, each instance's executor owner known (to find the one holding a run).
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { runCli, type ServeProcess, startServe, tempDir } from '../helpers.ts'
import { type AcmeDocument, hookPath } from './acme.ts'
import { productDatabaseEnv } from './postgres-cluster.ts'

const SECRET = 'scale-out-secret-scale-out-secret-0123456789'

export interface Instances {
  /** The instances still running, in start order (`kill` takes one out). */
  instances: ServeProcess[]
  /** Each instance by its executor's owner (runs.lease_owner). */
  owners: Map<string, ServeProcess>
  /** Every instance's environment. */
  env: Record<string, string>
  /** Each enabled webhook's path, by workflow name. */
  hooks: Record<string, string>
  /** The real CLI on the same database; its stdout, or a thrown error with its stderr. */
  cli(args: string[]): Promise<string>
  /** A token's value, made with the CLI. */
  token(user: string, name: string, scopes: string): Promise<string>
  /** SIGKILL of `instance` (taken out of `instances`); its exit code. */
  kill(instance: ServeProcess): Promise<number>
  /** SIGTERM to every instance still running, temp dirs removed. */
  close(): Promise<void>
}

/**
 * `count` instances on the database at `url`, `document` applied first. Each has a data directory of its own (its
 * request log, nothing else); settings: loopback outbound calls allowed, a 1 s executor lease (an instance that dies
 * leaves its runs for a second), API budgets out of the way; `env` adds or overrides.
 */
export async function startInstances(options: { url: string; document: AcmeDocument; count?: number; env?: Record<string, string> }): Promise<Instances> {
  const dirs = Array.from({ length: options.count ?? 3 }, () => tempDir('trellis-scale-'))
  const env: Record<string, string> = {
    ...productDatabaseEnv(options.url),
    TRELLIS_SECRET: SECRET,
    TRELLIS_BASE_URL: 'http://trellis.test',
    TRELLIS_LOG_LEVEL: 'info',
    TRELLIS_HTTP_ALLOW: '127.0.0.1',
    TRELLIS_EXECUTOR_LEASE_SECONDS: '1',
    TRELLIS_API_RATE_PER_MIN: '100000',
    TRELLIS_API_RATE_PER_HOUR: '1000000',
    TRELLIS_API_RATE_PER_DAY: '10000000',
    ...options.env,
  }
  const cli = async (args: string[]) => {
    const result = await runCli([...args, '--data', dirs[0]!.path], { env })
    if (result.code !== 0) throw new Error(`trellis ${args.join(' ')}: ${result.stderr}`)
    return result.stdout
  }
  const file = join(dirs[0]!.path, 'acme.json')
  writeFileSync(file, JSON.stringify(options.document))
  const report = JSON.parse(await cli(['apply', '-f', file, '--json'])) as { workflows: { name: string; webhook: { url: string | null } }[] }
  const hooks = Object.fromEntries(report.workflows.filter((w) => w.webhook.url).map((w) => [w.name, hookPath(w.webhook.url)]))
  const instances: ServeProcess[] = []
  const owners = new Map<string, ServeProcess>()
  const set: Instances = {
    instances,
    owners,
    env,
    hooks,
    cli,
    token: async (user, name, scopes) => (await cli(['token', 'create', '--user', user, '--project', 'Acme', '--name', name, '--scopes', scopes])).trim(),
    kill: async (instance) => {
      instances.splice(instances.indexOf(instance), 1)
      return instance.stop('SIGKILL')
    },
    close: async () => {
      await Promise.all(instances.map((instance) => instance.stop('SIGTERM')))
      for (const dir of dirs) dir.cleanup()
    },
  }
  try {
    for (const dir of dirs) {
      const instance = await startServe({ dataDir: dir.path, cwd: dir.path, env, timeoutMs: 20_000 })
      instances.push(instance)
      const started = await instance.waitForOutput('executor started', 10_000)
      const owner = /"owner":"([^"]+)"/.exec(started)?.[1]
      if (!owner) throw new Error(`instance ${instance.url} logged no executor owner:\n${instance.stdout()}\n${instance.stderr()}`)
      owners.set(owner, instance)
    }
  } catch (error) {
    await Promise.all(instances.map((instance) => instance.stop('SIGKILL')))
    for (const dir of dirs) dir.cleanup()
    throw error
  }
  return set
}
