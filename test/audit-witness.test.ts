/**
 * The audit trail's signatures and witnesses (docs/audit.md), on both stores: checkpoints signed by count and by age
 * (the manual clock), delivered to a witness file once even when a delivery's record is lost, and to a witness
 * endpoint as signed `audit.checkpoint` callbacks; tampering a chain caught by the signatures and the witness
 * (`truncated`, a chain recomputed without the key); retention's anchors; the signed export verified with the public
 * key alone; the public key's route and CLI; a real `trellis serve` killed with SIGKILL before its checkpoint is
 * witnessed, which witnesses it once after the restart.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Webhook } from 'standardwebhooks'
import { claimWitnessDeliveries, listCheckpoints } from '../src/db/audit.ts'
import { tryExclusiveFileLock } from '../src/db/file-lock.ts'
import { appendWitnessLineOnce, WitnessDelivery } from '../src/executor/witness-delivery.ts'
import { canonicalAdminEntry, linkHash } from '../src/lib/audit-chain.ts'
import { checkpointSignatureOk, signCheckpoint, type SignedCheckpoint } from '../src/lib/audit-checkpoint.ts'
import { auditSigningKey, auditWitnessSecret } from '../src/lib/audit-key.ts'
import { appendWitnessLine, readWitnessFile, WITNESS_FILE, WITNESS_LOCK_FILE } from '../src/lib/audit-witness-file.ts'
import { SECRET_FILE } from '../src/lib/secret.ts'
import { loadConfig } from '../src/config.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { appendAdminLog } from '../src/modules/admin-logs/service.ts'
import { pruneLogs } from '../src/modules/admin-logs/retention.ts'
import { writeDueCheckpoints } from '../src/modules/audit/checkpoints.ts'
import { acmeDocument, applyAcme, projectId, tokenFor } from './support/acme.ts'
import { auditSigningOf, bearer, execute, processEnv, queryAll, queryOne, request, runCli, runNow, startServe, TEST_STORE, tempDir, testApp, type TestEnv, testEnv, until } from './helpers.ts'
import { auditCommand } from '../src/cli/audit.ts'
import type { Io } from '../src/cli/command.ts'
import type { VerifyReport } from '../src/modules/audit/chain-verify.ts'

const cleanups: (() => void | Promise<void>)[] = []
// On PostgreSQL the first env starts the throw-away cluster (seconds on a busy machine): not in the first test's time.
beforeAll(() => testEnv().cleanup(), 60_000)
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A test env with Acme applied, and its Acme project's admin log as a chain to write to. */
async function acmeEnv(vars: Record<string, string> = {}): Promise<{ env: TestEnv; acme: number }> {
  const env = testEnv(vars)
  cleanups.push(() => env.cleanup())
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
  // The data directory's secret is the env's: the CLI, run here or as a process, derives the key the tests sign with.
  writeFileSync(join(env.dataDir, SECRET_FILE), env.secret, { mode: 0o600 })
  return { env, acme: projectId(env.store, 'Acme') }
}

/** `n` admin log entries of the project, at the env's clock. */
async function writeAdminEntries(env: TestEnv, project: number, n: number): Promise<void> {
  await runNow(env.store, (function* () {
    for (let i = 0; i < n; i++) yield* appendAdminLog(env.clock, { projectId: project, type: 'update', resource: 'collection', actorId: null, initiator: 'system', newValue: { name: `entry ${i}` } })
  })())
}

/** The position of the newest entry of the project's admin log. */
const adminHead = (env: TestEnv, project: number) => Number(queryOne<{ p: number }>(env.store, 'SELECT max(chain_position) AS p FROM admin_logs WHERE project_id = ?', project)!.p)

/** Runs `trellis` against the env's database, the env's secret as TRELLIS_SECRET. */
const trellis = (env: TestEnv, args: string[], extra: Record<string, string> = {}) =>
  runCli([...args, '--data', env.dataDir], { env: { ...processEnv(env), TRELLIS_SECRET: env.secret.toString('utf8'), ...extra } })

describe('checkpoints', () => {
  test('a chain is signed once EVERY entries are unsigned, or once its oldest unsigned entry is SECONDS old; once per head', async () => {
    const { env, acme } = await acmeEnv()
    const key = auditSigningKey(env.secret)
    const settings = { every: 5, seconds: 60, witnesses: [] as const }
    const scope = { log: 'admin' as const, scopeId: acme }
    // The apply's entries: signed by age once their oldest is 60 s old (the clock is the env's, not the system's).
    env.clock.advance(60_000)
    await writeDueCheckpoints(env.store, env.clock, key, settings)
    const signedAt = adminHead(env, acme)
    expect((await runNow(env.store, listCheckpoints(scope))).map((c) => c.position)).toEqual([signedAt])

    // Nothing new: nothing signed, however long.
    env.clock.advance(3_600_000)
    expect((await writeDueCheckpoints(env.store, env.clock, key, settings)).filter((c) => c.scopeId === acme && c.log === 'admin')).toEqual([])

    // Four unsigned entries: not yet by count; 59 s later not yet by age; at 60 s, yes.
    await writeAdminEntries(env, acme, 4)
    expect(await writeDueCheckpoints(env.store, env.clock, key, settings)).toEqual([])
    env.clock.advance(59_000)
    expect(await writeDueCheckpoints(env.store, env.clock, key, settings)).toEqual([])
    env.clock.advance(1_000)
    const byAge = await writeDueCheckpoints(env.store, env.clock, key, settings)
    expect(byAge.map((c) => [c.log, c.scopeId, c.position])).toEqual([['admin', acme, signedAt + 4]])

    // Five at once: signed at once, by count.
    await writeAdminEntries(env, acme, 5)
    const byCount = await writeDueCheckpoints(env.store, env.clock, key, settings)
    expect(byCount.map((c) => c.position)).toEqual([signedAt + 9])
    expect(checkpointSignatureOk(key.publicJwk, byCount[0]!)).toBe(true)
    expect(byCount[0]!.time).toBe(new Date(env.clock.now()).toISOString())

    // The stored rows are the signed checkpoints, signatures and all.
    const stored = await runNow(env.store, listCheckpoints(scope))
    expect(stored.map((c) => c.position)).toEqual([signedAt, signedAt + 4, signedAt + 9])
    expect(stored.at(-1)).toEqual(byCount[0]!)
    for (const checkpoint of stored) expect(checkpointSignatureOk(key.publicJwk, checkpoint)).toBe(true)
  })

  test('two instances signing the same head at once: one checkpoint, decided by the unique key', async () => {
    const { env, acme } = await acmeEnv()
    const key = auditSigningKey(env.secret)
    await writeAdminEntries(env, acme, 10)
    const settings = { every: 1, seconds: 3600, witnesses: ['dir'] as const }
    const results = await Promise.all([0, 1, 2].map(() => writeDueCheckpoints(env.store, env.clock, key, settings)))
    const acmeSigned = results.flat().filter((c) => c.log === 'admin' && c.scopeId === acme)
    expect(acmeSigned).toHaveLength(1)
    expect(queryAll(env.store, "SELECT id FROM audit_checkpoints WHERE scope_key = ?", `admin:${acme}`)).toHaveLength(1)
    // Its witness delivery was queued once, with it.
    expect(queryAll(env.store, 'SELECT id FROM audit_witness_deliveries WHERE checkpoint_id = ?', acmeSigned[0]!.id)).toHaveLength(1)
  })
})

/**
 * The body of a Standard Webhooks request whose signature holds and whose `webhook-timestamp` is within the library's
 * tolerance (5 minutes) of `now` — the receiver's clock, here the env's: `Webhook.verify` compares it with the real time.
 */
function verifiedAt(now: number, secret: string, raw: string, headers: Headers): unknown {
  const timestamp = Number(headers.get('webhook-timestamp'))
  if (Math.abs(now / 1000 - timestamp) > 300) throw new Error(`webhook-timestamp ${timestamp} is not the receiver's time`)
  const signature = new Webhook(secret).sign(headers.get('webhook-id')!, new Date(timestamp * 1000), raw)
  if (!headers.get('webhook-signature')!.split(' ').includes(signature)) throw new Error('no matching signature')
  return JSON.parse(raw)
}

describe('witnesses', () => {
  test('the witness file: each checkpoint appended once, even when the delivery\'s record was lost after the append', async () => {
    const { env, acme } = await acmeEnv()
    const witness = tempDir('trellis-witness-')
    cleanups.push(witness.cleanup)
    const key = auditSigningKey(env.secret)
    await writeAdminEntries(env, acme, 3)
    const written = await writeDueCheckpoints(env.store, env.clock, key, { every: 1, seconds: 3600, witnesses: ['dir'] })
    expect(written.length).toBeGreaterThan(1)

    // A worker claims the first delivery and appends its line, then "dies" before recording it.
    const [claimed] = await runNow(env.store, claimWitnessDeliveries('dead-worker', env.clock.now(), 1, 1))
    expect(appendWitnessLine(witness.path, claimed!.checkpoint)).toBe('appended')

    // The next worker takes it over once the lease ran out (the env's clock moved past it) and delivers everything,
    // that one not twice.
    env.clock.advance(1_000)
    const outbound = new OutboundClient({ allow: env.config.httpAllow })
    const delivery = new WitnessDelivery({ store: env.store, clock: env.clock, logger: silentLogger, secret: env.secret, outbound, dir: witness.path, url: null, retryBaseMs: 10, pollMs: 20 })
    delivery.start()
    try {
      await until('every checkpoint witnessed', () => queryAll(env.store, "SELECT id FROM audit_witness_deliveries WHERE status <> 'delivered'").length === 0)
    } finally {
      await delivery.stop(2_000)
    }
    const { checkpoints, unreadable } = readWitnessFile(witness.path)
    expect(unreadable).toBe(0)
    expect(checkpoints.map((c) => c.id).sort()).toEqual(written.map((c) => c.id).sort())
    expect(checkpoints.find((c) => c.id === claimed!.checkpoint.id)).toEqual(claimed!.checkpoint)
    for (const checkpoint of checkpoints) expect(checkpointSignatureOk(key.publicJwk, checkpoint)).toBe(true)
  })

  test('the witness endpoint: each checkpoint POSTed as a signed audit.checkpoint callback, retried until a 2xx', async () => {
    const { env, acme } = await acmeEnv({ TRELLIS_HTTP_ALLOW: '127.0.0.1' })
    const received: { id: string; body: { type: string; data: SignedCheckpoint } }[] = []
    let refuseFirst = true
    const receiver = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(req) {
        const raw = await req.text()
        const body = verifiedAt(env.clock.now(), auditWitnessSecret(env.secret), raw, req.headers) as { type: string; data: SignedCheckpoint }
        if (refuseFirst) {
          refuseFirst = false
          return new Response(null, { status: 503 })
        }
        received.push({ id: req.headers.get('webhook-id')!, body })
        return new Response(null, { status: 204 })
      },
    })
    cleanups.push(() => receiver.stop(true))
    const key = auditSigningKey(env.secret)
    await writeAdminEntries(env, acme, 2)
    const written = await writeDueCheckpoints(env.store, env.clock, key, { every: 1, seconds: 3600, witnesses: ['url'] })
    const outbound = new OutboundClient({ allow: env.config.httpAllow })
    const delivery = new WitnessDelivery({
      store: env.store, clock: env.clock, logger: silentLogger, secret: env.secret, outbound, dir: null, url: `http://127.0.0.1:${receiver.port}/witness`, retryBaseMs: 10, pollMs: 20,
    })
    delivery.start()
    try {
      // The refused delivery comes due again as the env's clock moves on (a second per look).
      await until('every checkpoint posted', () => {
        env.clock.advance(1_000)
        return received.length >= written.length
      })
    } finally {
      await delivery.stop(2_000)
    }
    expect(received.map((r) => r.id).sort()).toEqual(written.map((c) => c.id).sort())
    for (const { id, body } of received) {
      expect(body.type).toBe('audit.checkpoint')
      expect(body.data.id).toBe(id)
      expect(checkpointSignatureOk(key.publicJwk, body.data)).toBe(true)
      expect(body.data).toEqual(written.find((c) => c.id === id)!)
    }
    expect(queryAll(env.store, "SELECT id FROM audit_witness_deliveries WHERE status <> 'delivered'")).toEqual([])
  })

  test('serve refuses a witness directory inside the data directory, or one it cannot write (exit 2)', async () => {
    const data = tempDir('trellis-witness-data-')
    cleanups.push(data.cleanup)
    const inside = await runCli(['serve', '--data', data.path, '--port', '0', '--audit-witness-dir', join(data.path, 'witness')])
    expect(inside.code).toBe(2)
    expect(inside.stderr).toContain('TRELLIS_AUDIT_WITNESS_DIR must lie outside the data directory')
    if (process.getuid?.() !== 0) {
      const locked = tempDir('trellis-witness-locked-')
      cleanups.push(locked.cleanup)
      chmodSync(locked.path, 0o500)
      const refused = await runCli(['serve', '--data', data.path, '--port', '0', '--audit-witness-dir', locked.path])
      expect(refused.code).toBe(2)
      expect(refused.stderr).toContain(`cannot write ${join(locked.path, WITNESS_FILE)}`)
      chmodSync(locked.path, 0o700)
    } else {
      // Root writes anywhere: a file where the directory should be cannot be written to all the same.
      const file = join(data.path, '..', `not-a-dir-${process.pid}`)
      writeFileSync(file, '')
      cleanups.push(() => void Bun.spawnSync(['rm', '-f', file]))
      const refused = await runCli(['serve', '--data', data.path, '--port', '0', '--audit-witness-dir', file])
      expect(refused.code).toBe(2)
      expect(refused.stderr).toContain('TRELLIS_AUDIT_WITNESS_DIR: cannot write')
    }
  })
})

describe('the witness file and its settings', () => {
  test('a line cut short by a crash stays alone on its line; an id already at the end is not appended again', () => {
    const dir = tempDir('trellis-witness-file-')
    cleanups.push(dir.cleanup)
    const key = auditSigningKey(Buffer.from('a witness file test secret 0123456789'))
    const first = signCheckpoint(key, 'checkpoint', { log: 'activity', scopeId: 3 }, 10, 'a'.repeat(64), Date.UTC(2026, 0, 1))
    const second = signCheckpoint(key, 'anchor', { log: 'admin', scopeId: null }, 4, 'b'.repeat(64), Date.UTC(2026, 0, 2))
    expect(appendWitnessLine(dir.path, first)).toBe('appended')
    writeFileSync(join(dir.path, WITNESS_FILE), '{"v":1,"kind":"checkp', { flag: 'a' })
    expect(appendWitnessLine(dir.path, second)).toBe('appended')
    expect(appendWitnessLine(dir.path, second)).toBe('already')
    expect(appendWitnessLine(dir.path, first)).toBe('already')
    const { checkpoints, unreadable } = readWitnessFile(join(dir.path, WITNESS_FILE))
    expect(checkpoints).toEqual([first, second])
    expect(unreadable).toBe(1)
  })

  test('the witness lock: an append waits while another holds it and then finds the line; a holder killed with SIGKILL leaves no lock behind', async () => {
    const dir = tempDir('trellis-witness-lock-')
    cleanups.push(dir.cleanup)
    const key = auditSigningKey(Buffer.from('a witness lock test secret 0123456789'))
    const checkpoint = signCheckpoint(key, 'checkpoint', { log: 'admin', scopeId: 1 }, 3, 'c'.repeat(64), Date.UTC(2026, 0, 1))
    // Another delivery of the same checkpoint holds the lock, between its search and its append.
    const held = tryExclusiveFileLock(join(dir.path, WITNESS_LOCK_FILE))!
    expect(held).not.toBeNull()
    const waiting = appendWitnessLineOnce(dir.path, checkpoint)
    await Bun.sleep(100)
    expect(existsSync(join(dir.path, WITNESS_FILE))).toBe(false)
    expect(appendWitnessLine(dir.path, checkpoint)).toBe('appended')
    held.release()
    expect(await waiting).toBe('already')
    expect(readWitnessFile(dir.path).checkpoints).toEqual([checkpoint])

    // A process holding it, killed: the kernel drops its lock, and the next append takes it at once.
    const holder = Bun.spawn([process.execPath, join(import.meta.dir, 'support/witness-appender.ts'), dir.path, '--hold'], { stdout: 'pipe', stderr: 'inherit' })
    cleanups.push(() => holder.kill('SIGKILL'))
    const reader = holder.stdout.getReader()
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('held')
    const other = signCheckpoint(key, 'checkpoint', { log: 'admin', scopeId: 1 }, 4, 'd'.repeat(64), Date.UTC(2026, 0, 2))
    expect(await appendWitnessLineOnce(dir.path, other, 200)).toBe('locked')
    holder.kill('SIGKILL')
    await holder.exited
    expect(await appendWitnessLineOnce(dir.path, other, 200)).toBe('appended')
    expect(readWitnessFile(dir.path).checkpoints).toEqual([checkpoint, other])
  })

  test('processes appending the same checkpoints at once: each checkpoint is in the file once', async () => {
    const dir = tempDir('trellis-witness-race-')
    cleanups.push(dir.cleanup)
    const key = auditSigningKey(Buffer.from('a witness race test secret 0123456789'))
    const checkpoints = Array.from({ length: 30 }, (_, i) => signCheckpoint(key, 'checkpoint', { log: 'activity', scopeId: 2 }, i + 1, i.toString(16).padStart(64, '0'), Date.UTC(2026, 0, 1) + i))
    const list = join(dir.path, '..', `witness-race-${crypto.randomUUID()}.json`)
    writeFileSync(list, JSON.stringify(checkpoints))
    cleanups.push(() => void Bun.spawnSync(['rm', '-f', list]))
    const appenders = [0, 1, 2, 3].map(() => Bun.spawn([process.execPath, join(import.meta.dir, 'support/witness-appender.ts'), dir.path, list], { stdout: 'pipe', stderr: 'inherit' }))
    const outcomes = await Promise.all(appenders.map(async (p) => {
      expect(await p.exited).toBe(0)
      return JSON.parse(await new Response(p.stdout).text()) as string[]
    }))
    // Each checkpoint appended by one process, found by the three others.
    for (let i = 0; i < checkpoints.length; i++) expect(outcomes.map((o) => o[i]).sort()).toEqual(['already', 'already', 'already', 'appended'])
    const { checkpoints: lines, unreadable } = readWitnessFile(dir.path)
    expect(unreadable).toBe(0)
    expect(lines.map((c) => c.id).sort()).toEqual(checkpoints.map((c) => c.id).sort())
  }, 30_000)

  test('TRELLIS_AUDIT_WITNESS_DIR inside the data directory (or it), and a witness URL that is not http(s) or holds a password, are refused', () => {
    const data = tempDir('trellis-witness-config-')
    cleanups.push(data.cleanup)
    const config = (vars: Record<string, string>) => () => loadConfig({ data: data.path }, vars)
    expect(config({ TRELLIS_AUDIT_WITNESS_DIR: join(data.path, 'w') })).toThrow(/must lie outside the data directory/)
    expect(config({ TRELLIS_AUDIT_WITNESS_DIR: data.path })).toThrow(/must lie outside the data directory/)
    expect(config({ TRELLIS_AUDIT_WITNESS_DIR: join(data.path, '..', 'elsewhere') })().auditWitnessDir).toBe(join(data.path, '..', 'elsewhere'))
    expect(config({ TRELLIS_AUDIT_WITNESS_URL: 'ftp://witness.example/' })).toThrow(/http or https/)
    expect(config({ TRELLIS_AUDIT_WITNESS_URL: 'https://user:pw@witness.example/' })).toThrow(/user name or password/)
    expect(config({ TRELLIS_AUDIT_CHECKPOINT_EVERY: '0' })).toThrow(/TRELLIS_AUDIT_CHECKPOINT_EVERY must be between 1/)
    expect(config({})().auditWitnessLeaseMs).toBe(30_000)
    expect(config({ TRELLIS_AUDIT_WITNESS_LEASE_SECONDS: '2' })().auditWitnessLeaseMs).toBe(2_000)
    expect(config({ TRELLIS_AUDIT_WITNESS_LEASE_SECONDS: '0' })).toThrow(/TRELLIS_AUDIT_WITNESS_LEASE_SECONDS must be between 1/)
    expect(loadConfig({ data: data.path, 'audit-checkpoint-seconds': '30' }, {}).auditCheckpointSeconds).toBe(30)
  })
})

describe('the public key', () => {
  test('GET /v1/audit/public-key (no authentication) and `trellis audit key` give the same JWK; --out writes it; --witness-secret', async () => {
    const { env } = await acmeEnv()
    const app = testApp(env)
    const response = await app.handle(request('/v1/audit/public-key'))
    expect(response.status).toBe(200)
    const jwk = await response.json()
    expect(jwk).toEqual(auditSigningKey(env.secret).publicJwk)
    const printed = await trellis(env, ['audit', 'key'])
    expect(printed.code).toBe(0)
    expect(JSON.parse(printed.stdout)).toEqual(jwk)
    const out = join(env.dataDir, '..', `audit-key-${process.pid}.jwk`)
    cleanups.push(() => void Bun.spawnSync(['rm', '-f', out]))
    const written = await trellis(env, ['audit', 'key', '--out', out])
    expect(written.code).toBe(0)
    expect(JSON.parse(readFileSync(out, 'utf8'))).toEqual(jwk)
    const secret = await trellis(env, ['audit', 'key', '--witness-secret'])
    expect(secret.stdout.trim()).toBe(auditWitnessSecret(env.secret))
    const usage = await trellis(env, ['audit'])
    expect(usage.code).toBe(2)
  }, 30_000)
})

describe('retention', () => {
  test('pruning signs an anchor per chain cut at its last deleted entry, witnessed like a checkpoint', async () => {
    const { env, acme } = await acmeEnv()
    const signing = { ...auditSigningOf(env), witnesses: ['dir'] as const }
    await writeAdminEntries(env, acme, 3)
    const old = adminHead(env, acme)
    const lastOld = queryOne<{ hash: string }>(env.store, 'SELECT chain_hash AS hash FROM admin_logs WHERE project_id = ? AND chain_position = ?', acme, old)!
    env.clock.advance(10 * 86_400_000)
    await writeAdminEntries(env, acme, 2)
    const result = await pruneLogs(env.store, env.clock, 7, signing)
    expect(result.adminLogs).toBeGreaterThan(0)
    const anchors = (await runNow(env.store, listCheckpoints({ log: 'admin', scopeId: acme }))).filter((c) => c.kind === 'anchor')
    expect(anchors.map((a) => [a.position, a.hash])).toEqual([[old, lastOld.hash]])
    expect(checkpointSignatureOk(signing.key.publicJwk, anchors[0]!)).toBe(true)
    expect(queryAll(env.store, 'SELECT witness FROM audit_witness_deliveries WHERE checkpoint_id = ?', anchors[0]!.id)).toEqual([{ witness: 'dir' }])
  })
})

// ── Verifying with the signatures and the witness ───────────────────────────

/** The public key of the env's secret in a file: what an auditor is handed (`trellis audit key --out`). */
function keyFile(env: TestEnv): string {
  const path = join(env.dataDir, '..', `audit-${crypto.randomUUID()}.jwk`)
  writeFileSync(path, JSON.stringify(auditSigningKey(env.secret).publicJwk))
  cleanups.push(() => void Bun.spawnSync(['rm', '-f', path]))
  return path
}

/** `trellis audit …` run in this process on the env's database (stdout, exit code). */
async function audit(env: TestEnv, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const io: Io = { out: (text) => out.push(text), err: (text) => err.push(text), readStdin: async () => '', progress: { isTTY: false, columns: 80, write: () => {} } }
  const where = env.databaseUrl === null ? ['--data', env.dataDir] : ['--data', env.dataDir, '--database-url', env.databaseUrl]
  const code = await auditCommand.run([...args, ...where], io)
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** `trellis audit verify --json` of the Acme admin chain: its exit code and the chain's verdict. */
async function verifyAcmeAdmin(env: TestEnv, acme: number, ...args: string[]) {
  const { code, out } = await audit(env, 'verify', '--json', '--quiet', '--project', 'Acme', '--log', 'admin', '--key', keyFile(env), ...args)
  const report = JSON.parse(out) as VerifyReport
  return { code, chain: report.logs.find((log) => log.chain === `admin:${acme}`)! }
}

/** Runs `statements` with the admin log's append-only trigger lifted, as someone with the database's password can. */
function tamper(env: TestEnv, ...statements: [string, ...(string | number | null)[]][]): void {
  if (TEST_STORE === 'postgres') execute(env.store, 'ALTER TABLE admin_logs DISABLE TRIGGER admin_logs_append_only')
  else execute(env.store, 'DROP TRIGGER IF EXISTS admin_logs_append_only')
  for (const [statement, ...params] of statements) execute(env.store, statement, ...params)
  if (TEST_STORE === 'postgres') execute(env.store, 'ALTER TABLE admin_logs ENABLE TRIGGER admin_logs_append_only')
}

/** Acme's admin chain with `n` more entries, signed (a checkpoint at its head) and witnessed in a witness file. */
async function witnessedChain(n: number) {
  const { env, acme } = await acmeEnv()
  const witness = tempDir('trellis-witness-')
  cleanups.push(witness.cleanup)
  await writeAdminEntries(env, acme, n)
  const written = await writeDueCheckpoints(env.store, env.clock, auditSigningKey(env.secret), { every: 1, seconds: 3600, witnesses: ['dir'] })
  for (const checkpoint of written) appendWitnessLine(witness.path, checkpoint)
  return { env, acme, witness: witness.path, head: adminHead(env, acme) }
}

describe('verify: the signatures and the witness', () => {
  test('the tail deleted after a witnessed checkpoint, its checkpoints with it: invisible in the database alone, `truncated` against the witness', async () => {
    const { env, acme, witness, head } = await witnessedChain(6)
    expect((await verifyAcmeAdmin(env, acme, '--witness', witness)).code).toBe(0)
    tamper(env, ['DELETE FROM admin_logs WHERE project_id = ? AND chain_position > ?', acme, head - 3], ['DELETE FROM audit_checkpoints WHERE scope_key = ?', `admin:${acme}`])
    const alone = await verifyAcmeAdmin(env, acme)
    expect(alone.chain.breaks).toEqual([])
    const witnessed = await verifyAcmeAdmin(env, acme, '--witness', witness)
    expect(witnessed.code).toBe(1)
    expect(witnessed.chain.breaks).toEqual([{ kind: 'truncated', position: head - 2 }])
    // The checkpoints left in the database catch it too, when the tail alone is cut.
    const again = await witnessedChain(4)
    tamper(again.env, ['DELETE FROM admin_logs WHERE project_id = ? AND chain_position = ?', again.acme, again.head])
    expect((await verifyAcmeAdmin(again.env, again.acme)).chain.breaks).toEqual([{ kind: 'truncated', position: again.head }])
  })

  test('the whole chain recomputed through SQL without the key (an entry altered, every hash after it redone, checkpoints forged): caught by the signatures and by the witness', async () => {
    const { env, acme, witness, head } = await witnessedChain(5)
    const altered = head - 3
    // The attacker rewrites one entry and recomputes every link from it, as the documented encoding says.
    tamper(env, ['UPDATE admin_logs SET new_value = ? WHERE project_id = ? AND chain_position = ?', '{"name":"rewritten"}', acme, altered])
    const rows = queryAll<Record<string, unknown>>(env.store, 'SELECT * FROM admin_logs WHERE project_id = ? ORDER BY chain_position', acme)
    let prev: string | null = null
    const updates: [string, ...(string | number | null)[]][] = []
    for (const row of rows) {
      const position = Number(row.chain_position)
      const hash = linkHash(prev, canonicalAdminEntry({
        projectId: acme, position, id: Number(row.id), createdAt: Number(row.created_at), type: String(row.type), resource: String(row.resource), initiator: String(row.initiator),
        userId: row.user_id === null ? null : Number(row.user_id), subjectUserId: row.subject_user_id === null ? null : Number(row.subject_user_id),
        previousValue: row.previous_value as string | null, newValue: row.new_value as string | null, extension: row.extension === true || Number(row.extension) === 1,
      }))
      if (position >= altered) updates.push(['UPDATE admin_logs SET chain_hash = ? WHERE id = ?', hash, Number(row.id)])
      prev = hash
    }
    tamper(env, ...updates)
    // …and forges the database's checkpoints with a key of its own (it has not the instance's).
    const forger = auditSigningKey(Buffer.from('the attacker has no instance secret 0123456789'))
    for (const row of queryAll<{ id: string; position: number; created_at: number }>(env.store, 'SELECT id, position, created_at FROM audit_checkpoints WHERE scope_key = ?', `admin:${acme}`)) {
      const stored = queryOne<{ hash: string }>(env.store, 'SELECT chain_hash AS hash FROM admin_logs WHERE project_id = ? AND chain_position = ?', acme, Number(row.position))!
      const forged = signCheckpoint(forger, 'checkpoint', { log: 'admin', scopeId: acme }, Number(row.position), stored.hash, Number(row.created_at))
      execute(env.store, 'UPDATE audit_checkpoints SET hash = ?, signature = ? WHERE id = ?', forged.hash, forged.signature, row.id)
    }
    // The chain links again: only the signatures tell.
    const bySignatures = await verifyAcmeAdmin(env, acme)
    expect(bySignatures.code).toBe(1)
    expect(bySignatures.chain.breaks).toEqual([{ kind: 'altered', position: head }])
    // With the forged checkpoints gone too, the witness's newest tells.
    execute(env.store, 'DELETE FROM audit_checkpoints WHERE scope_key = ?', `admin:${acme}`)
    expect((await verifyAcmeAdmin(env, acme)).chain.breaks).toEqual([])
    const byWitness = await verifyAcmeAdmin(env, acme, '--witness', witness)
    expect(byWitness.code).toBe(1)
    expect(byWitness.chain.breaks).toEqual([{ kind: 'altered', position: head }])
  })

  test('retention with an anchor verifies from the anchor; a forged anchor does not', async () => {
    const { env, acme } = await acmeEnv()
    await writeAdminEntries(env, acme, 4)
    env.clock.advance(10 * 86_400_000)
    await writeAdminEntries(env, acme, 3)
    await writeDueCheckpoints(env.store, env.clock, auditSigningKey(env.secret), { every: 1, seconds: 3600, witnesses: [] })
    const pruned = await pruneLogs(env.store, env.clock, 7, auditSigningOf(env))
    expect(pruned.adminLogs).toBeGreaterThan(0)
    const verdict = await verifyAcmeAdmin(env, acme)
    expect(verdict.code).toBe(0)
    expect(verdict.chain.breaks).toEqual([])
    // Retention's own `log-retention` entry is one more, after the three kept.
    expect(verdict.chain.entries).toBe(4)
    // Its export starts from the anchor, the anchor's line with it, and verifies with the key alone.
    const file = join(env.dataDir, '..', `pruned-${crypto.randomUUID()}.jsonl`)
    cleanups.push(() => void Bun.spawnSync(['rm', '-f', file]))
    expect((await audit(env, 'export', '--project', 'Acme', '--log', 'admin', '--out', file)).code).toBe(0)
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    const anchorLine = lines.find((line) => line.kind === 'anchor')!
    expect(lines[0]!.prev).toEqual({ position: anchorLine.position, hash: anchorLine.hash })
    const key = keyFile(env)
    expect((await audit(env, 'verify', '--export', file, '--key', key, '--json')).code).toBe(0)
    // Its anchor line and header moved to another link together: the anchor's signature no longer holds.
    const moved = { position: anchorLine.position, hash: 'f'.repeat(64) }
    writeFileSync(file, [{ ...lines[0], prev: moved }, { ...anchorLine, hash: moved.hash }, ...lines.slice(2)].map((line) => JSON.stringify(line)).join('\n'))
    const forgedExport = await audit(env, 'verify', '--export', file, '--key', key, '--json')
    expect(forgedExport.code).toBe(1)
    expect((JSON.parse(forgedExport.out) as VerifyReport).logs[0]!.breaks).toContainEqual({ kind: 'altered', position: anchorLine.position as number })
    const anchor = queryOne<{ id: string; position: number }>(env.store, "SELECT id, position FROM audit_checkpoints WHERE scope_key = ? AND kind = 'anchor'", `admin:${acme}`)!
    execute(env.store, 'UPDATE audit_checkpoints SET hash = ? WHERE id = ?', '0'.repeat(64), anchor.id)
    const forged = await verifyAcmeAdmin(env, acme)
    expect(forged.code).toBe(1)
    expect(forged.chain.breaks.map((b) => b.kind)).toContain('altered')
    expect(forged.chain.breaks).toContainEqual({ kind: 'altered', position: Number(anchor.position) })
  })
})

describe('the signed export', () => {
  test('`trellis audit export` verifies with the public key alone; an edited line is caught at its position', async () => {
    const { env, acme } = await acmeEnv()
    await writeAdminEntries(env, acme, 6)
    await writeDueCheckpoints(env.store, env.clock, auditSigningKey(env.secret), { every: 1, seconds: 3600, witnesses: [] })
    await writeAdminEntries(env, acme, 2) // past the last checkpoint: the export signs its own
    const file = join(env.dataDir, '..', `export-${crypto.randomUUID()}.jsonl`)
    cleanups.push(() => void Bun.spawnSync(['rm', '-f', file]))
    const written = await audit(env, 'export', '--project', 'Acme', '--log', 'admin', '--out', file)
    expect(written.code).toBe(0)
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines[0]).toMatchObject({ type: 'header', v: 1, log: 'admin', project: 'Acme', scopeId: acme, publicKey: auditSigningKey(env.secret).publicJwk, prev: null })
    const entries = lines.filter((line) => line.type === 'entry')
    expect(entries).toHaveLength(adminHead(env, acme))
    expect(lines.at(-1)).toMatchObject({ type: 'checkpoint', kind: 'checkpoint', position: adminHead(env, acme) })

    const key = keyFile(env)
    const verified = await audit(env, 'verify', '--export', file, '--key', key, '--json')
    expect(verified.code).toBe(0)
    expect(JSON.parse(verified.out)).toMatchObject({ ok: true, logs: [{ log: 'admin', chain: `admin:${acme}`, project: 'Acme', entries: entries.length, breaks: [] }] })

    // One entry's value edited in the file.
    const target = entries[3]!
    const edited = readFileSync(file, 'utf8').replace(JSON.stringify(target), JSON.stringify({ ...target, entry: { ...(target.entry as object), newValue: '{"name":"edited"}' } }))
    writeFileSync(file, edited)
    const caught = await audit(env, 'verify', '--export', file, '--key', key, '--json')
    expect(caught.code).toBe(1)
    expect((JSON.parse(caught.out) as VerifyReport).logs[0]!.breaks).toEqual([{ kind: 'altered', position: target.position as number, id: (target.entry as { id: number }).id }])
    // Another instance's key (a file signed by someone else) does not verify it either.
    const other = join(env.dataDir, '..', `other-${crypto.randomUUID()}.jwk`)
    writeFileSync(other, JSON.stringify(auditSigningKey(Buffer.from('some other instance secret 0123456789')).publicJwk))
    cleanups.push(() => void Bun.spawnSync(['rm', '-f', other]))
    writeFileSync(file, lines.map((line) => JSON.stringify(line)).join('\n'))
    expect((await audit(env, 'verify', '--export', file, '--key', other, '--json')).code).toBe(1)
  })

  test('GET /v1/project/{p}/audit/export: project admins get the same export, from a time on; every error names its cause', async () => {
    const { env, acme } = await acmeEnv()
    await writeAdminEntries(env, acme, 3)
    env.clock.advance(60_000)
    const from = new Date(env.clock.now()).toISOString()
    await writeAdminEntries(env, acme, 2)
    const app = testApp(env)
    const alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const dave = (await tokenFor(env.store, env.clock, 'dave', ['all'])).value
    const get = (query: string, token = alice) => app.handle(request(`/v1/project/Acme/audit/export${query}`, { headers: bearer(token) }))

    const whole = await get('?log=admin')
    expect(whole.status).toBe(200)
    expect(whole.headers.get('content-type')).toContain('application/x-ndjson')
    const lines = (await whole.text()).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    expect(lines.filter((l) => l.type === 'entry')).toHaveLength(adminHead(env, acme))

    const late = (await (await get(`?log=admin&from=${encodeURIComponent(from)}`)).text()).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
    const lateEntries = late.filter((l) => l.type === 'entry')
    const since = lines.filter((l) => l.type === 'entry' && (l.entry as { createdAt: number }).createdAt >= Date.parse(from) * 1000)
    expect(since.length).toBeGreaterThanOrEqual(2)
    expect(lateEntries).toEqual(since)
    const before = since[0]!.position as number - 1
    expect(late[0]!.prev).toEqual({ position: before, hash: lines.find((l) => l.position === before)!.hash })
    const file = join(env.dataDir, '..', `late-${crypto.randomUUID()}.jsonl`)
    cleanups.push(() => void Bun.spawnSync(['rm', '-f', file]))
    writeFileSync(file, late.map((line) => JSON.stringify(line)).join('\n'))
    expect((await audit(env, 'verify', '--export', file, '--key', keyFile(env), '--json')).code).toBe(0)

    const production = await get('?environment=production')
    expect(production.status).toBe(200)
    expect(JSON.parse((await production.text()).split('\n')[0]!)).toMatchObject({ type: 'header', log: 'activity', environment: 'production' })

    const errors: [string, number, string, string | null][] = [
      ['?log=notes', 400, 'invalid_parameter', 'log'],
      ['?log=activity', 400, 'invalid_parameter', 'environment'],
      ['?log=admin&environment=production', 400, 'invalid_parameter', 'environment'],
      ['?log=admin&from=yesterday', 400, 'invalid_parameter', 'from'],
      ['?log=admin&to=2026-13-01', 400, 'invalid_parameter', 'to'],
      ['?environment=nowhere', 404, 'not_found', null],
    ]
    for (const [query, status, code, field] of errors) {
      const response = await get(query)
      const body = (await response.json()) as { error: string; code: string; message: string; details?: { field: string }[] }
      expect([query, response.status, body.code]).toEqual([query, status, code])
      expect(body.error).toBeString()
      expect(body.message).toBeString()
      if (field) expect(body.details?.[0]?.field).toBe(field)
    }
    expect((await get('?log=admin', dave)).status).toBe(403)
    expect((await app.handle(request('/v1/project/Acme/audit/export?log=admin'))).status).toBe(401)
    expect((await app.handle(request('/v1/project/Nowhere/audit/export?log=admin', { headers: bearer(alice) }))).status).toBe(403)
  })
})

// ── A real server killed ─────────────────────────────────────────────────────

describe('kill -9', () => {
  test('serve killed between an entry\'s commit and its checkpoint\'s delivery: after the restart the checkpoint is in the witness file once', async () => {
    const { env } = await acmeEnv({ TRELLIS_API_RATE_PER_MIN: '100000' })
    const cwd = tempDir('trellis-witness-cwd-')
    const witness = tempDir('trellis-witness-kill-')
    cleanups.push(cwd.cleanup, witness.cleanup)
    const alice = (await tokenFor(env.store, env.clock, 'alice', ['all'])).value
    const vars = {
      ...processEnv(env),
      TRELLIS_SECRET: env.secret.toString('utf8'),
      TRELLIS_AUDIT_WITNESS_DIR: witness.path,
      TRELLIS_AUDIT_CHECKPOINT_SECONDS: '1',
      TRELLIS_CALLBACK_RETRY_MS: '50',
      TRELLIS_API_RATE_PER_MIN: '100000',
      // A delivery the killed server held is taken again when its lease runs out (on PostgreSQL: no start takes
      // back another instance's leases): two seconds, not the default thirty.
      TRELLIS_AUDIT_WITNESS_LEASE_SECONDS: '2',
    }
    const first = await startServe({ dataDir: env.dataDir, cwd: cwd.path, env: vars })
    // The witness file turns into a directory under the running server: every append fails (even as root) and waits
    // for its next attempt, the checkpoints committed and not delivered.
    rmSync(join(witness.path, WITNESS_FILE))
    mkdirSync(join(witness.path, WITNESS_FILE))
    // An entry committed by the server itself: a note, with its activity entry.
    const note = await fetch(`${first.url}/v1/project/Acme/environment/production/notes`, {
      method: 'POST',
      headers: { ...bearer(alice), 'content-type': 'application/json' },
      body: JSON.stringify({ recordId: 'ord_1001', collectionName: 'orders', teamName: 'Support', title: 'Refund', content: '<p>kill me</p>' }),
    })
    expect(note.status).toBe(201)
    const environmentId = queryOne<{ id: number }>(env.store, "SELECT id FROM environments WHERE name = 'production'")!.id
    const checkpoint = await until('the note\'s entry signed, its delivery failed once', () =>
      queryOne<{ id: string }>(env.store, "SELECT c.id FROM audit_checkpoints c JOIN audit_witness_deliveries d ON d.checkpoint_id = c.id WHERE c.scope_key = ? AND d.status = 'pending' AND d.attempts > 0", `activity:${environmentId}`),
    )
    first.proc.kill('SIGKILL')
    await first.proc.exited

    // The witness comes back; the next start delivers what was left, each checkpoint once.
    rmSync(join(witness.path, WITNESS_FILE), { recursive: true })
    const second = await startServe({ dataDir: env.dataDir, cwd: cwd.path, env: vars })
    try {
      await until('every checkpoint witnessed', () => queryAll(env.store, "SELECT id FROM audit_witness_deliveries WHERE status <> 'delivered'").length === 0, 30_000)
    } finally {
      await second.stop()
    }
    const lines = readWitnessFile(witness.path).checkpoints.map((c) => c.id)
    expect(lines.filter((id) => id === checkpoint.id)).toHaveLength(1)
    expect(lines.sort()).toEqual(queryAll<{ id: string }>(env.store, 'SELECT id FROM audit_checkpoints').map((r) => r.id).sort())
    expect(new Set(lines).size).toBe(lines.length)
  }, 90_000)
})
