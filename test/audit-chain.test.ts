/**
 * The logs' hash chain (docs/audit.md) on either store: entries written by the app chain gaplessly — one by one, many
 * in one group commit (with a write of the batch rolled back between them), a CSV import's batch, the instance's admin
 * log —, entries written before the chain are linked by the upgrade, and `trellis audit verify --json` (its run, in
 * this process, on the env's database) catches tampering made through direct SQL with the right kind and position: a
 * field altered, an entry deleted, two entries swapped, an entry inserted (with a correct hash, the tail renumbered;
 * and with no link at all). Concurrency on PostgreSQL (three `serve` instances): test/audit-chain-scale.test.ts.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { migratePostgres } from '../src/db/postgres/migrate.ts'
import { migrations as postgresMigrations } from '../src/db/postgres/migrations.generated.ts'
import { migrate } from '../src/db/sqlite/migrate.ts'
import { migrations as sqliteMigrations } from '../src/db/sqlite/migrations.generated.ts'
import { openStore } from '../src/db/sqlite/store.ts'
import type { Store } from '../src/db/store.ts'
import { manualClock } from '../src/lib/clock.ts'
import { write, writeNow } from '../src/db/write.ts'
import { auditCommand } from '../src/cli/audit.ts'
import type { Io } from '../src/cli/command.ts'
import { canonicalActivityEntry, linkHash } from '../src/lib/audit-chain.ts'
import { type ChainBreak, walkChain } from '../src/lib/audit-verify.ts'
import type { VerifyReport } from '../src/modules/audit/chain-verify.ts'
import { type ActivityEntry, appendActivityLog, appendActivityLogNow, appendActivityLogs, withEntriesLast } from '../src/modules/activity-logs/service.ts'
import { pageActivityLogIds } from '../src/db/activity-logs.ts'
import { savepoint } from '../src/db/op.ts'
import { appendAdminLog } from '../src/modules/admin-logs/service.ts'
import { pruneLogs } from '../src/modules/admin-logs/retention.ts'
import { SECRET_FILE } from '../src/lib/secret.ts'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { auditSigningOf, execute, listReadable, queryAll, queryOne, TEST_STORE, type TestEnv, tempDir, testEnv } from './helpers.ts'
import { databaseUrl, dropDatabase, openProductPostgres, psqlSync, sharedCluster } from './support/postgres-cluster.ts'
import { acmeDocument, applyAcme, userId } from './support/acme.ts'

const envs: TestEnv[] = []
afterEach(() => {
  for (const env of envs.splice(0)) env.cleanup()
})

interface Fixture {
  env: TestEnv
  environmentId: number
  user: number
}

async function fixture(): Promise<Fixture> {
  const env = testEnv()
  envs.push(env)
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: 'http://trellis.test' }, acmeDocument())
  const environmentId = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production'")!.id
  return { env, environmentId, user: userId(env.store, 'alice') }
}

const entry = (fx: Fixture, i: number): ActivityEntry => ({
  environmentId: fx.environmentId,
  type: 'write',
  action: 'createNote',
  label: `change ${i}`,
  userId: fx.user,
  teamId: null,
  collectionId: null,
  recordIds: [`rec_${i}`, `rec_${i}_b`],
})

/** Appends `n` entries to the production environment's activity log, each in its own transaction; answers their ids, once they are chained. */
async function appendEntries(fx: Fixture, n: number): Promise<number[]> {
  for (let i = 0; i < n; i++) await writeNow(fx.env.store, () => appendActivityLogNow(fx.env.clock, entry(fx, i)))
  await listReadable(fx.env.store, 'activity_logs') // PostgreSQL: chained by the lists' pass
  const ids = queryAll<{ id: number }>(fx.env.store, 'SELECT id FROM activity_logs WHERE environment_id = ? ORDER BY id DESC LIMIT ?', fx.environmentId, n)
  return ids.map(({ id }) => Number(id)).reverse()
}

/** `trellis audit verify` run in this process on the env's database: its exit code and JSON verdict. */
async function verify(env: TestEnv, ...args: string[]): Promise<{ code: number; report: VerifyReport }> {
  const out: string[] = []
  const io: Io = { out: (text) => out.push(text), err: () => {}, readStdin: async () => '', progress: { isTTY: false, write: () => {} } }
  const where = env.databaseUrl === null ? ['--data', env.dataDir] : ['--data', env.dataDir, '--database-url', env.databaseUrl]
  const code = await auditCommand.run(['verify', '--json', '--quiet', ...where, ...args], io)
  return { code, report: JSON.parse(out.join('\n')) as VerifyReport }
}

/** The verdict of the production environment's activity chain. */
async function productionChain(fx: Fixture) {
  const { code, report } = await verify(fx.env, '--log', 'activity', '--project', 'Acme')
  const chain = report.logs.find((log) => log.chain === `activity:${fx.environmentId}`)!
  expect(chain.environment).toBe('production')
  return { code, chain, report }
}

/** An entry's position in its chain. */
const positionOf = (env: TestEnv, table: string, id: number) => Number(queryOne<{ p: number }>(env.store, `SELECT chain_position AS p FROM ${table} WHERE id = ?`, id)!.p)

/** Runs `statements` with the log's append-only trigger lifted, as someone with the database's password can. */
function tamper(env: TestEnv, table: 'activity_logs' | 'activity_log_records' | 'admin_logs', ...statements: [string, ...(string | number | null)[]][]): void {
  const trigger = `${table}_append_only`
  if (TEST_STORE === 'postgres') execute(env.store, `ALTER TABLE ${table} DISABLE TRIGGER ${trigger}`)
  else execute(env.store, `DROP TRIGGER ${trigger}`)
  for (const [statement, ...params] of statements) execute(env.store, statement, ...params)
}

/** The positions of a scope's chain, in position order, once what was committed is chained (PostgreSQL: by the lists' pass). */
const positions = async (env: TestEnv, environmentId: number) => {
  await listReadable(env.store, 'activity_logs')
  return queryAll<{ p: number }>(env.store, 'SELECT chain_position AS p FROM activity_logs WHERE environment_id = ? ORDER BY chain_position', environmentId).map((r) => Number(r.p))
}

const gapless = (list: number[]) => list.every((p, i) => p === i + 1)

describe('the chain as the app writes it', () => {
  test('every entry has its position and hash; the chains verify (exit 0), the head is the newest entry', async () => {
    const fx = await fixture()
    const ids = await appendEntries(fx, 12)
    expect(gapless((await positions(fx.env, fx.environmentId)))).toBe(true)
    const nulls = queryOne<{ n: number }>(fx.env.store, 'SELECT count(*) AS n FROM activity_logs WHERE chain_position IS NULL OR chain_hash IS NULL')!
    expect(Number(nulls.n)).toBe(0)
    const { code, chain, report } = await productionChain(fx)
    expect(code).toBe(0)
    expect(report.ok).toBe(true)
    const last = ids[ids.length - 1]!
    const head = queryOne<{ p: number; h: string }>(fx.env.store, 'SELECT chain_position AS p, chain_hash AS h FROM activity_logs WHERE id = ?', last)!
    expect(chain.head).toEqual({ position: Number(head.p), hash: head.h })
    expect(chain.entries).toBe(Number(head.p))
    expect(chain.breaks).toEqual([])
    // The apply wrote the project's admin log: every chain of the instance verifies.
    const all = await verify(fx.env)
    expect(all.code).toBe(0)
    expect(all.report.logs.map((log) => log.chain)).toContain('admin:instance')
    expect(all.report.logs.every((log) => log.breaks.length === 0)).toBe(true)
  })

  test('the hash is SHA-256 of the previous hash and the canonical encoding v1, the first from 32 zero bytes', async () => {
    const fx = await fixture()
    const [id] = await appendEntries(fx, 1)
    const row = queryOne<Record<string, unknown>>(fx.env.store, 'SELECT * FROM activity_logs WHERE id = ?', id!)!
    const position = Number(row.chain_position)
    const prev = position === 1 ? null : queryOne<{ h: string }>(fx.env.store, 'SELECT chain_hash AS h FROM activity_logs WHERE environment_id = ? AND chain_position = ?', fx.environmentId, position - 1)!.h
    const canonical = canonicalActivityEntry({
      environmentId: fx.environmentId, position, id: id!, createdAt: Number(row.created_at), type: 'write', action: 'createNote', label: 'change 0',
      userId: fx.user, teamId: null, collectionId: null, tokenId: null, workflowName: null, runId: null, stepName: null, extension: false, recordIds: ['rec_0_b', 'rec_0'],
    })
    expect(canonical).toStartWith(`[1,"activity",${fx.environmentId},${position},${id},`)
    expect(canonical).toEndWith(',false,["rec_0","rec_0_b"]]')
    expect(row.chain_hash).toBe(linkHash(prev, canonical))
  })

  test('a group commit: many entries of one environment in one transaction, one write of the batch rolled back between them, chain gaplessly', async () => {
    const fx = await fixture()
    const failing = write(fx.env.store, function* () {
      yield* appendActivityLog(fx.env.clock, entry(fx, 1000))
      throw new Error('this write fails after its entry')
    })
    const writes = Array.from({ length: 40 }, (_, i) => write(fx.env.store, () => appendActivityLogNow(fx.env.clock, entry(fx, i))))
    writes.splice(20, 0, failing.then(() => {}, () => {}))
    await Promise.all(writes)
    expect(queryOne<{ n: number }>(fx.env.store, "SELECT count(*) AS n FROM activity_logs WHERE label = 'change 1000'")!.n).toBe(0)
    expect(gapless((await positions(fx.env, fx.environmentId)))).toBe(true)
    const { code, chain } = await productionChain(fx)
    expect({ code, breaks: chain.breaks }).toEqual({ code: 0, breaks: [] })
  })

  test('a CSV import batch (appendActivityLogs): the entries chain in the order given', async () => {
    const fx = await fixture()
    await appendEntries(fx, 2)
    await writeNow(fx.env.store, () => appendActivityLogs(fx.env.clock, fx.environmentId, Array.from({ length: 150 }, (_, i) => entry(fx, 100 + i))))
    await appendEntries(fx, 2)
    const list = (await positions(fx.env, fx.environmentId))
    expect(gapless(list)).toBe(true)
    const batch = queryAll<{ id: number; p: number }>(fx.env.store, "SELECT id, chain_position AS p FROM activity_logs WHERE label LIKE 'change ___' ORDER BY id")
    expect(batch.length).toBe(150)
    expect(batch.every((row, i) => i === 0 || Number(row.p) === Number(batch[i - 1]!.p) + 1)).toBe(true)
    const { code, chain } = await productionChain(fx)
    expect({ code, breaks: chain.breaks }).toEqual({ code: 0, breaks: [] })
  })

  test('the instance admin log (no project) is one chain: it verifies, and an altered entry of it is caught', async () => {
    const fx = await fixture()
    for (let i = 0; i < 5; i++) {
      await writeNow(fx.env.store, () => appendAdminLog(fx.env.clock, { projectId: null, type: 'update', resource: 'user', actorId: fx.user, subjectUserId: fx.user, newValue: { name: `n${i}` } }))
    }
    const rows = queryAll<{ id: number; p: number }>(fx.env.store, 'SELECT id, chain_position AS p FROM admin_logs WHERE project_id IS NULL ORDER BY chain_position')
    expect(gapless(rows.map((r) => Number(r.p)))).toBe(true)
    const ok = await verify(fx.env, '--log', 'admin')
    expect(ok.code).toBe(0)
    const victim = rows[rows.length - 2]!
    tamper(fx.env, 'admin_logs', ['UPDATE admin_logs SET new_value = ? WHERE id = ?', '{"name":"forged"}', Number(victim.id)])
    const { code, report } = await verify(fx.env, '--log', 'admin')
    expect(code).toBe(1)
    expect(report.ok).toBe(false)
    const instance = report.logs.find((log) => log.chain === 'admin:instance')!
    expect(instance.project).toBeNull()
    expect(instance.breaks).toEqual([{ kind: 'altered', position: Number(victim.p), id: Number(victim.id) }])
  })
})

describe('entries written last (withEntriesLast: a workflow step group\'s)', () => {
  const labels = async (fx: Fixture) => {
    await listReadable(fx.env.store, 'activity_logs')
    return queryAll<{ label: string }>(fx.env.store, 'SELECT label FROM activity_logs WHERE environment_id = ? ORDER BY id', fx.environmentId).map((row) => row.label)
  }
  const seen = (fx: Fixture) => pageActivityLogIds(fx.environmentId, { withExtensions: true }, [], 1000)

  test('held back while the body runs, then written in the order appended, chained gaplessly', async () => {
    const fx = await fixture()
    const before = (await labels(fx)).length
    const during = await writeNow(fx.env.store, () =>
      withEntriesLast(fx.env.clock, (function* () {
        yield* appendActivityLog(fx.env.clock, entry(fx, 1))
        const counted = (yield* seen(fx)).length
        yield* appendActivityLog(fx.env.clock, entry(fx, 2))
        return counted
      })()),
    )
    expect(during).toBe(before)
    expect((await labels(fx)).slice(before)).toEqual(['change 1', 'change 2'])
    expect(gapless((await positions(fx.env, fx.environmentId)))).toBe(true)
    const { code, chain } = await productionChain(fx)
    expect({ code, breaks: chain.breaks }).toEqual({ code: 0, breaks: [] })
  })

  test('a body that throws writes none; a savepoint inside writes its entry at once, and rolls it back with it', async () => {
    const fx = await fixture()
    const before = (await labels(fx)).length
    const failing = writeNow(fx.env.store, () =>
      withEntriesLast(fx.env.clock, (function* () {
        yield* appendActivityLog(fx.env.clock, entry(fx, 1))
        throw new Error('the body fails')
      })()),
    )
    await expect(failing).rejects.toThrow('the body fails')
    expect((await labels(fx)).length).toBe(before)
    await writeNow(fx.env.store, () =>
      withEntriesLast(fx.env.clock, (function* () {
        yield* appendActivityLog(fx.env.clock, entry(fx, 2))
        yield* savepoint(function* () {
          yield* appendActivityLog(fx.env.clock, entry(fx, 3))
        })
        try {
          yield* savepoint(function* () {
            yield* appendActivityLog(fx.env.clock, entry(fx, 4))
            throw new Error('the savepoint fails')
          })
        } catch {}
        yield* appendActivityLog(fx.env.clock, entry(fx, 5))
      })()),
    )
    expect((await labels(fx)).slice(before)).toEqual(['change 3', 'change 2', 'change 5'])
    expect(gapless((await positions(fx.env, fx.environmentId)))).toBe(true)
  })

  test('another write running meanwhile appends at once: only the body\'s own entries are held back', async () => {
    const fx = await fixture()
    const before = (await labels(fx)).length
    // The body yields to its runner between its appends (a read each): on PostgreSQL the other writes' ops run then.
    const held = writeNow(fx.env.store, () =>
      withEntriesLast(fx.env.clock, (function* () {
        for (let i = 0; i < 20; i++) {
          yield* appendActivityLog(fx.env.clock, entry(fx, 1000 + i))
          yield* seen(fx)
        }
        throw new Error('the held entries roll back')
      })()),
    )
    const others = Array.from({ length: 20 }, (_, i) => writeNow(fx.env.store, () => appendActivityLog(fx.env.clock, entry(fx, i))))
    await Promise.all([held.catch(() => {}), ...others])
    expect((await labels(fx)).slice(before).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `change ${i}`).sort())
    expect(gapless((await positions(fx.env, fx.environmentId)))).toBe(true)
  })
})

describe('log retention', () => {
  test('a chain retention pruned whole goes on from its anchor: the next entry is at the anchor position + 1, and every chain verifies', async () => {
    const fx = await fixture()
    // The CLI derives the key the anchors are checked with from the data directory's secret: the one they were signed with.
    writeFileSync(join(fx.env.dataDir, SECRET_FILE), fx.env.secret, { mode: 0o600 })
    await appendEntries(fx, 5)
    const last = (await positions(fx.env, fx.environmentId)).at(-1)!
    fx.env.clock.set(fx.env.clock.now() + 40 * 86_400_000)
    await pruneLogs(fx.env.store, fx.env.clock, 30, auditSigningOf(fx.env))
    expect((await positions(fx.env, fx.environmentId))).toEqual([])
    await appendEntries(fx, 2)
    expect((await positions(fx.env, fx.environmentId))).toEqual([last + 1, last + 2])
    const { code, report } = await verify(fx.env)
    expect(report.logs.filter((log) => log.breaks.length > 0)).toEqual([])
    expect(code).toBe(0)
    expect(report.logs.find((log) => log.chain === `activity:${fx.environmentId}`)).toMatchObject({ entries: 2, head: { position: last + 2 } })
  })
})

describe('tampering through direct SQL, caught by `trellis audit verify --json`', () => {
  /** Twelve entries; answers their ids and positions. */
  async function chainOf12() {
    const fx = await fixture()
    const ids = await appendEntries(fx, 12)
    return { fx, ids, at: (i: number) => positionOf(fx.env, 'activity_logs', ids[i]!) }
  }
  const only = (breaks: ChainBreak[]) => breaks.map(({ kind, position }) => ({ kind, position }))

  test('untampered: ok, exit 0', async () => {
    const { fx } = await chainOf12()
    const { code, chain } = await productionChain(fx)
    expect({ code, breaks: chain.breaks }).toEqual({ code: 0, breaks: [] })
  })

  test('a field altered → altered at its position', async () => {
    const { fx, ids, at } = await chainOf12()
    tamper(fx.env, 'activity_logs', ["UPDATE activity_logs SET action = 'deleteRecord' WHERE id = ?", ids[5]!])
    const { code, chain } = await productionChain(fx)
    expect(code).toBe(1)
    expect(only(chain.breaks)).toEqual([{ kind: 'altered', position: at(5) }])
  })

  test('a record id altered (another table: the canonical encoding holds the record ids) → altered', async () => {
    const { fx, ids, at } = await chainOf12()
    tamper(fx.env, 'activity_log_records', ["UPDATE activity_log_records SET record_id = 'rec_other' WHERE log_id = ? AND record_id = 'rec_7'", ids[7]!])
    const { chain } = await productionChain(fx)
    expect(only(chain.breaks)).toEqual([{ kind: 'altered', position: at(7) }])
  })

  test('an entry deleted in the middle → removed at its position', async () => {
    const { fx, ids, at } = await chainOf12()
    const gone = at(6)
    execute(fx.env.store, 'DELETE FROM activity_logs WHERE id = ?', ids[6]!)
    const { code, chain } = await productionChain(fx)
    expect(code).toBe(1)
    expect(only(chain.breaks)).toEqual([{ kind: 'removed', position: gone }])
  })

  test('an entry deleted and the tail renumbered to close the gap → removed at its position', async () => {
    const { fx, ids, at } = await chainOf12()
    const gone = at(6)
    execute(fx.env.store, 'DELETE FROM activity_logs WHERE id = ?', ids[6]!)
    tamper(
      fx.env,
      'activity_logs',
      ['UPDATE activity_logs SET chain_position = -chain_position WHERE environment_id = ? AND chain_position > ?', fx.environmentId, gone],
      ['UPDATE activity_logs SET chain_position = -chain_position - 1 WHERE environment_id = ? AND chain_position < 0', fx.environmentId],
    )
    const { chain } = await productionChain(fx)
    expect(only(chain.breaks)).toEqual([{ kind: 'removed', position: gone }])
  })

  test('two entries swapped (their positions exchanged) → reordered at the first', async () => {
    const { fx, ids, at } = await chainOf12()
    const [a, b] = [at(3), at(4)]
    tamper(
      fx.env,
      'activity_logs',
      ['UPDATE activity_logs SET chain_position = -1 WHERE id = ?', ids[3]!],
      ['UPDATE activity_logs SET chain_position = ? WHERE id = ?', a, ids[4]!],
      ['UPDATE activity_logs SET chain_position = ? WHERE id = ?', b, ids[3]!],
    )
    const { code, chain } = await productionChain(fx)
    expect(code).toBe(1)
    expect(only(chain.breaks)).toEqual([{ kind: 'reordered', position: a }])
  })

  test('an entry inserted with a correct hash and the tail renumbered → inserted at its position', async () => {
    const { fx, ids, at } = await chainOf12()
    const p = at(6)
    const prev = queryOne<{ h: string }>(fx.env.store, 'SELECT chain_hash AS h FROM activity_logs WHERE id = ?', ids[5]!)!.h
    const createdAt = Number(queryOne<{ t: number }>(fx.env.store, 'SELECT created_at AS t FROM activity_logs WHERE id = ?', ids[5]!)!.t) + 1
    const id = 2_000_000_000
    const forged = { environmentId: fx.environmentId, position: p, id, createdAt, type: 'write', action: 'deleteRecord', label: 'forged', userId: fx.user, teamId: null, collectionId: null, tokenId: null, workflowName: null, runId: null, stepName: null, extension: false, recordIds: [] }
    tamper(
      fx.env,
      'activity_logs',
      ['UPDATE activity_logs SET chain_position = -chain_position WHERE environment_id = ? AND chain_position >= ?', fx.environmentId, p],
      ['UPDATE activity_logs SET chain_position = -chain_position + 1 WHERE environment_id = ? AND chain_position < 0', fx.environmentId],
      [
        `INSERT INTO activity_logs (id, environment_id, type, action, label, user_id, extension, created_at, chain_position, chain_hash) VALUES (?, ?, 'write', 'deleteRecord', 'forged', ?, ${TEST_STORE === 'postgres' ? 'false' : '0'}, ?, ?, ?)`,
        id, fx.environmentId, fx.user, createdAt, p, linkHash(prev, canonicalActivityEntry(forged)),
      ],
    )
    const { code, chain } = await productionChain(fx)
    expect(code).toBe(1)
    expect(only(chain.breaks)).toEqual([{ kind: 'inserted', position: p }])
  })

  test('an entry inserted with no link at all → inserted (no position)', async () => {
    const { fx } = await chainOf12()
    execute(
      fx.env.store,
      `INSERT INTO activity_logs (environment_id, type, action, label, user_id, extension, created_at) VALUES (?, 'write', 'deleteRecord', 'forged', ?, ${TEST_STORE === 'postgres' ? 'false' : '0'}, 1)`,
      fx.environmentId,
      fx.user,
    )
    const { code, chain } = await productionChain(fx)
    expect(code).toBe(1)
    expect(only(chain.breaks)).toEqual([{ kind: 'inserted', position: null }])
  })
})

describe('the walk (src/lib/audit-verify.ts) on its own', () => {
  test('a checkpoint past the head → truncated; a checkpoint whose hash differs → altered; one whose signature fails → altered', async () => {
    const fx = await fixture()
    await appendEntries(fx, 3)
    const { chain } = await productionChain(fx)
    const head = chain.head!
    const rows = queryAll<Record<string, unknown>>(fx.env.store, 'SELECT * FROM activity_logs WHERE environment_id = ? ORDER BY chain_position', fx.environmentId)
    const entries = rows.map((row) => ({
      position: Number(row.chain_position),
      id: Number(row.id),
      hash: row.chain_hash as string,
      encode: () => 'irrelevant',
    }))
    // The entries are not re-linked here (`encode` is wrong): only the claims' breaks are looked at.
    const claims = [
      { position: head.position + 2, hash: 'f'.repeat(64), signatureValid: true, source: 'witness' as const },
      { position: 1, hash: 'e'.repeat(64), signatureValid: true, source: 'database' as const },
      { position: 2, hash: entries[1]!.hash, signatureValid: false, source: 'database' as const },
    ]
    const verdict = await walkChain({ entries, claims })
    expect(verdict.breaks.filter((b) => b.kind !== 'altered' || b.position === 1 || b.position === 2).map(({ kind, position }) => ({ kind, position }))).toContainEqual({ kind: 'truncated', position: head.position + 1 })
    expect(verdict.breaks).toContainEqual(expect.objectContaining({ kind: 'altered', position: 2 }))
  })
})

describe('the upgrade links the entries written before the chain', () => {
  /** Rows an instance older than the chain wrote (`?` placeholders, as both stores' test drivers take them). */
  const OLD_ROWS: [string, ...(string | number | null)[]][] = [
    ["INSERT INTO users (id, email, username, created_at, updated_at) VALUES (1, 'old@example.com', 'old', 0, 0)"],
    ["INSERT INTO projects (id, name, created_at) VALUES (1, 'Old', 0)"],
    ["INSERT INTO environments (id, project_id, name, created_at) VALUES (1, 1, 'production', 0)"],
    ["INSERT INTO environments (id, project_id, name, created_at) VALUES (2, 1, 'staging', 0)"],
  ]
  for (let i = 0; i < 30; i++) {
    const environment = (i % 3) + 1 === 3 ? 2 : 1
    OLD_ROWS.push([`INSERT INTO activity_logs (environment_id, type, action, label, user_id, extension, created_at) VALUES (?, 'write', 'createNote', ?, 1, ${TEST_STORE === 'postgres' ? 'false' : '0'}, ?)`, environment, `old ${i}`, 1000 + i])
    OLD_ROWS.push(['INSERT INTO activity_log_records (log_id, environment_id, record_id) SELECT max(id), ?, ? FROM activity_logs', environment, `rec_${i}`])
    OLD_ROWS.push([`INSERT INTO admin_logs (project_id, type, resource, initiator, user_id, new_value, extension, created_at) VALUES (?, 'add', 'team', 'administrator', 1, ?, ${TEST_STORE === 'postgres' ? 'false' : '0'}, ?)`, i % 2 === 0 ? 1 : null, `{"name":"t${i}"}`, 1000 + i])
  }

  /** The old rows' chains verify, each gapless from 1, and an entry the app writes next chains on from the linked head. */
  async function expectLinked(store: Store, where: string[], count: (statement: string) => number) {
    expect(count('SELECT count(*) AS n FROM activity_logs WHERE chain_position IS NULL OR chain_hash IS NULL')).toBe(0)
    expect(count('SELECT count(*) AS n FROM admin_logs WHERE chain_position IS NULL OR chain_hash IS NULL')).toBe(0)
    expect(count('SELECT max(chain_position) AS n FROM activity_logs WHERE environment_id = 1')).toBe(20)
    expect(count('SELECT max(chain_position) AS n FROM admin_logs WHERE project_id IS NULL')).toBe(15)
    const clock = manualClock(Date.UTC(2026, 10, 21, 12))
    await writeNow(store, () => appendActivityLog(clock, { environmentId: 1, type: 'write', action: 'createNote', userId: 1, teamId: null, collectionId: null, recordIds: ['new'] }))
    await listReadable(store, 'activity_logs') // PostgreSQL: chained by the lists' pass
    expect(count('SELECT max(chain_position) AS n FROM activity_logs WHERE environment_id = 1')).toBe(21)
    const out: string[] = []
    const io: Io = { out: (text) => out.push(text), err: () => {}, readStdin: async () => '', progress: { isTTY: false, write: () => {} } }
    const code = await auditCommand.run(['verify', '--json', '--quiet', ...where], io)
    const report = JSON.parse(out.join('')) as VerifyReport
    expect(report.logs.map(({ chain, entries, breaks }) => ({ chain, entries, breaks }))).toEqual([
      { chain: 'activity:1', entries: 21, breaks: [] },
      { chain: 'activity:2', entries: 10, breaks: [] },
      { chain: 'admin:1', entries: 15, breaks: [] },
      { chain: 'admin:instance', entries: 15, breaks: [] },
    ])
    expect(code).toBe(0)
  }

  const beforeChain = <M extends { name: string }>(all: M[]) => all.slice(0, all.findIndex((m) => /_audit_chain$/.test(m.name)))

  if (TEST_STORE === 'sqlite') {
    test('on SQLite: in the migration that adds the chain, in id order per scope', async () => {
      const dir = tempDir()
      const store = openStore(dir.path)
      try {
        migrate(store.sqlite, beforeChain(sqliteMigrations))
        for (const [statement, ...params] of OLD_ROWS) store.sqlite.prepare(statement).run(...params)
        expect(migrate(store.sqlite)).toEqual(['0026_audit_chain', '0027_audit_chain_sealed', ...sqliteMigrations.slice(28).map((m) => m.name)])
        const count = (statement: string) => Number((store.sqlite.prepare(statement).get() as { n: number }).n)
        await expectLinked(store, ['--data', dir.path], count)
      } finally {
        store.close()
        dir.cleanup()
      }
    })
  } else {
    test('on PostgreSQL: in the migration that adds the chain, in id order per scope', async () => {
      const name = `chain_upgrade_${process.pid}`
      psqlSync(sharedCluster().url, `CREATE DATABASE ${name}`)
      const url = databaseUrl(name)
      const sql = new SQL(url)
      const dir = tempDir()
      let store: Store | null = null
      try {
        await migratePostgres(sql, beforeChain(postgresMigrations))
        for (const [statement, ...params] of OLD_ROWS) {
          let n = 0
          await sql.unsafe(statement.replace(/\?/g, () => `$${++n}`), params as never[])
        }
        await migratePostgres(sql)
        store = openProductPostgres(url)
        const count = (statement: string) => Number(JSON.parse(psqlSync(url, `SELECT coalesce(json_agg(q), '[]'::json) FROM (${statement}) q`))[0].n)
        await expectLinked(store, ['--data', dir.path, '--database-url', url], count)
      } finally {
        await sql.close()
        await store?.close()
        dir.cleanup()
        dropDatabase(name)
      }
    })
  }
})
