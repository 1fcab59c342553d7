/**
 * The audit trail's signatures and witnesses (docs/audit.md), on both stores: checkpoints signed by count and by age
 * (the manual clock), delivered to a witness file once even when a delivery's record is lost, and to a witness
 * endpoint as signed `audit.checkpoint` callbacks; tampering a chain caught by the signatures and the witness
 * (`truncated`, a chain recomputed without the key); retention's anchors; the signed export verified with the public
 * key alone; the public key's route and CLI; a real `trellis serve` killed with SIGKILL before its checkpoint is
 * witnessed, which witnesses it once after the restart.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Webhook } from 'standardwebhooks'
import { claimWitnessDeliveries, listCheckpoints } from '../src/db/audit.ts'
import { WitnessDelivery } from '../src/executor/witness-delivery.ts'
import { canonicalAdminEntry, linkHash } from '../src/lib/audit-chain.ts'
import { checkpointSignatureOk, signCheckpoint, type SignedCheckpoint } from '../src/lib/audit-checkpoint.ts'
import { auditSigningKey, auditWitnessSecret } from '../src/lib/audit-key.ts'
import { appendWitnessLine, readWitnessFile, WITNESS_FILE } from '../src/lib/audit-witness-file.ts'
import { systemClock } from '../src/lib/clock.ts'
import { silentLogger } from '../src/lib/logger.ts'
import { OutboundClient } from '../src/lib/outbound/client.ts'
import { appendAdminLog } from '../src/modules/admin-logs/service.ts'
import { pruneLogs } from '../src/modules/admin-logs/retention.ts'
import { writeDueCheckpoints } from '../src/modules/audit/checkpoints.ts'
import { acmeDocument, applyAcme, projectId, tokenFor } from './support/acme.ts'
import { auditSigningOf, bearer, execute, processEnv, queryAll, queryOne, request, runCli, runNow, startServe, tempDir, testApp, type TestEnv, testEnv, until } from './helpers.ts'

const cleanups: (() => void | Promise<void>)[] = []
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** A test env with Acme applied, and its Acme project's admin log as a chain to write to. */
async function acmeEnv(vars: Record<string, string> = {}): Promise<{ env: TestEnv; acme: number }> {
  const env = testEnv(vars)
  cleanups.push(() => env.cleanup())
  await applyAcme({ store: env.store, clock: env.clock, secret: env.secret, baseUrl: env.config.baseUrl }, acmeDocument())
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

    // The next worker takes it over once the lease ran out and delivers everything, that one not twice.
    const outbound = new OutboundClient({ allow: env.config.httpAllow })
    const delivery = new WitnessDelivery({ store: env.store, clock: systemClock, logger: silentLogger, secret: env.secret, outbound, dir: witness.path, url: null, retryBaseMs: 10, pollMs: 20 })
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
        const body = new Webhook(auditWitnessSecret(env.secret)).verify(raw, Object.fromEntries(req.headers)) as { type: string; data: SignedCheckpoint }
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
      store: env.store, clock: systemClock, logger: silentLogger, secret: env.secret, outbound, dir: null, url: `http://127.0.0.1:${receiver.port}/witness`, retryBaseMs: 10, pollMs: 20,
    })
    delivery.start()
    try {
      await until('every checkpoint posted', () => received.length >= written.length)
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

export { canonicalAdminEntry, execute, existsSync, linkHash, mkdirSync, signCheckpoint, startServe, tokenFor, bearer, beforeAll }
