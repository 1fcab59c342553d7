/**
 * The deployments the crash soak kills: the compiled binary serving a temp data directory (SQLite), or three instances
 * of it on one database of a throw-away PostgreSQL cluster (test/support/postgres-cluster.ts). Seeded with the
 * binary's own CLI (`migrate`, `apply`, `token create`), as a self-hoster would.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { openStore } from '../../src/db/sqlite/store.ts'
import { freePort, queryAll, runCli, type ServeProcess, startServe, tempDir, type TestStore } from '../helpers.ts'
import { hookPath } from '../support/acme.ts'
import { databaseUrl, openProductPostgres, productDatabaseEnv, psqlSync, sharedCluster } from '../support/postgres-cluster.ts'
import { MEMBERS, soakDocument, type SoakWorkflow, WORKFLOWS } from './fixture.ts'

export type StoreKind = 'sqlite' | 'postgres'

/** One `trellis serve` process slot: its data directory and port stay; the process changes with each restart. */
export interface Instance {
  index: number
  dataDir: string
  port: number
  process: ServeProcess | null
}

export interface Deployment {
  kind: StoreKind
  instances: Instance[]
  /** The store's database, opened beside the instances for the checks (SQL written once for both stores). */
  store: TestStore
  /** alice (project and instance admin) with `all`, and bob (editor in Support) with `workflows:trigger`. */
  tokens: { admin: string; trigger: string }
  hooks: Record<SoakWorkflow, string>
  /** The ids of the users whose membership the load changes. */
  memberIds: number[]
  /** Base URLs of the instances running now. */
  live(): string[]
  /** SIGKILL to one instance (its process dies at once, mid-whatever), then starts it again on the same port. */
  killAndRestart(instance: Instance): Promise<void>
  stop(signal: NodeJS.Signals): Promise<void>
  cleanup(): Promise<void>
}

const SECRET = 'crash-soak-secret-crash-soak-secret-0123456789'

/** What every instance runs with: budgets the load never reaches (the soak is about crashes, not limits), few log lines. */
function instanceEnv(kind: StoreKind, databaseUrl: string | null): Record<string, string> {
  return {
    TRELLIS_SECRET: SECRET,
    TRELLIS_LOG_LEVEL: 'warn',
    TRELLIS_API_RATE_PER_MIN: '100000000',
    TRELLIS_API_RATE_PER_HOUR: '100000000',
    TRELLIS_API_RATE_PER_DAY: '100000000',
    TRELLIS_WEBHOOK_RATE_PER_MIN: '100000000',
    // SQLite keeps the default lease (30 s): a restarted server must take up its predecessor's runs at once anyway.
    // On PostgreSQL a dead instance's runs wait for their lease: short, so the soak does not wait 30 s a kill.
    ...(kind === 'postgres' ? { ...productDatabaseEnv(databaseUrl!), TRELLIS_EXECUTOR_LEASE_SECONDS: '3' } : {}),
  }
}

/** Every instance slot of every deployment: a soak stopped by a signal kills them all (`killEveryInstance`). */
const everyInstance: Instance[] = []

/** SIGKILL to every instance still running, at once (the soak was interrupted). */
export function killEveryInstance(): void {
  for (const instance of everyInstance) instance.process?.proc.kill('SIGKILL')
}

export async function deploy(kind: StoreKind, binary: string): Promise<Deployment> {
  const dirs: { path: string; cleanup(): void }[] = []
  const instances: Instance[] = []
  try {
    return await deployInto(kind, binary, dirs, instances)
  } catch (error) {
    await Promise.all(instances.map((instance) => instance.process?.stop('SIGKILL')))
    for (const made of dirs) made.cleanup()
    throw error
  }
}

async function deployInto(kind: StoreKind, binary: string, dirs: { path: string; cleanup(): void }[], instances: Instance[]): Promise<Deployment> {
  const dir = () => {
    const made = tempDir(`trellis-soak-${kind}-`)
    dirs.push(made)
    return made.path
  }
  let url: string | null = null
  if (kind === 'postgres') {
    const name = `soak_${process.pid}`
    psqlSync(sharedCluster().url, `CREATE DATABASE ${name}`)
    url = databaseUrl(name)
  }
  const env = instanceEnv(kind, url)
  instances.push(...Array.from({ length: kind === 'sqlite' ? 1 : 3 }, (_, index) => ({ index, dataDir: dir(), port: freePort(), process: null })))
  everyInstance.push(...instances)
  const seedDir = instances[0]!.dataDir
  const cli = async (args: string[]) => {
    const result = await runCli([...args, '--data', seedDir], { binary, env, cwd: seedDir })
    if (result.code !== 0) throw new Error(`trellis ${args.join(' ')}: exit ${result.code}\n${result.stderr}`)
    return result.stdout
  }
  await cli(['migrate'])
  writeFileSync(join(seedDir, 'soak.json'), JSON.stringify(soakDocument()))
  const report = JSON.parse(await cli(['apply', '-f', join(seedDir, 'soak.json'), '--json'])) as { workflows: { name: string; webhook: { url: string | null } }[] }
  const hooks = Object.fromEntries(WORKFLOWS.map((name) => [name, hookPath(report.workflows.find((w) => w.name === name)?.webhook.url)])) as Record<SoakWorkflow, string>
  const token = async (user: string, scopes: string) =>
    (await cli(['token', 'create', '--user', user, '--project', 'Acme', '--name', `soak-${scopes}`, '--scopes', scopes])).trim()
  const tokens = { admin: await token('alice@example.com', 'all'), trigger: await token('bob@example.com', 'workflows:trigger') }
  const store: TestStore = kind === 'sqlite' ? openStore(seedDir) : openProductPostgres(url!, { max: 2 })
  const memberIds = MEMBERS.map((m) => queryAll<{ id: number }>(store, 'SELECT id FROM users WHERE email = ?', m.email)[0]!.id)

  const start = async (instance: Instance) => {
    try {
      instance.process = await startServe({ dataDir: instance.dataDir, cwd: instance.dataDir, env, port: instance.port, binary, timeoutMs: 30_000 })
    } catch (error) {
      // The port was taken meanwhile (another test on this machine): another one.
      instance.port = freePort()
      instance.process = await startServe({ dataDir: instance.dataDir, cwd: instance.dataDir, env, port: instance.port, binary, timeoutMs: 30_000 }).catch(() => {
        throw error
      })
    }
  }
  for (const instance of instances) await start(instance)

  const stop = async (signal: NodeJS.Signals) => {
    await Promise.all(
      instances.map(async (instance) => {
        const stopping = instance.process
        instance.process = null
        await stopping?.stop(signal)
      }),
    )
  }
  return {
    kind,
    instances,
    store,
    tokens,
    hooks,
    memberIds,
    live: () => instances.filter((i) => i.process !== null).map((i) => `http://127.0.0.1:${i.port}`),
    async killAndRestart(instance) {
      const dying = instance.process
      instance.process = null
      await dying?.stop('SIGKILL')
      await start(instance)
    },
    stop,
    async cleanup() {
      await stop('SIGKILL')
      if (store.kind === 'sqlite') store.close()
      else await store.close()
      for (const made of dirs) made.cleanup()
    },
  }
}
