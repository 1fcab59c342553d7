/** The small shared pieces: time parsing, configuration, the instance secret, webhook URL signing, HTML, createdAt. */
import Ajv from 'ajv'
import { Database } from 'bun:sqlite'
import addFormats from 'ajv-formats'
import { describe, expect, test } from 'bun:test'
import { createHmac } from 'node:crypto'
import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { ConfigError, loadConfig } from '../src/config.ts'
import { parseAllowList } from '../src/lib/outbound/policy.ts'
import { nextCreatedAt } from '../src/db/monotonic.ts'
import { databasePath } from '../src/db/sqlite/open.ts'
import { runOp } from '../src/db/sqlite/op-runner.ts'
import type { TimeOrderedList } from '../src/db/pages.ts'
import { users } from '../src/db/schema.ts'
import { runNowThenDaily } from '../src/lib/daily-job.ts'
import { sanitizeNoteHtml } from '../src/lib/html.ts'
import { canonicalJson } from '../src/lib/json.ts'
import { canonicalDefinition, type WorkflowDefinition } from '../src/modules/workflows/definition.ts'
import { loadInstanceSecret, SECRET_FILE } from '../src/lib/secret.ts'
import { type Micros, microsFromMillis, parseIsoDateTime, parseIsoMicros, toIso, toIsoMicros, toIsoOrNull } from '../src/lib/time.ts'
import { verifyWebhookToken, webhookToken, webhookUrl } from '../src/lib/webhook-url.ts'
import { sqliteTestEnv, tempDir } from './helpers.ts'

describe('parseIsoDateTime', () => {
  const valid: [string, number][] = [
    // No zone: UTC (the compatibility document's example format is YYYY-MM-DDTHH:MM).
    ['2026-11-21T23:40:33', Date.UTC(2026, 10, 21, 23, 40, 33)],
    ['2026-11-21T23:40', Date.UTC(2026, 10, 21, 23, 40)],
    ['2026-11-21T23:40:33.123Z', Date.UTC(2026, 10, 21, 23, 40, 33, 123)],
    ['2026-11-21T23:40:33Z', Date.UTC(2026, 10, 21, 23, 40, 33)],
    ['2026-11-21T23:40Z', Date.UTC(2026, 10, 21, 23, 40)],
    ['2026-11-21T23:40:33+02:00', Date.UTC(2026, 10, 21, 21, 40, 33)],
    ['2026-11-21T23:40:33-0530', Date.UTC(2026, 10, 22, 5, 10, 33)],
    ['2026-11-21T23:40:33.5+00:00', Date.UTC(2026, 10, 21, 23, 40, 33, 500)],
    ['2026-11-21t23:40:33.123z', Date.UTC(2026, 10, 21, 23, 40, 33, 123)],
    ['2026-11-21 23:40:33Z', Date.UTC(2026, 10, 21, 23, 40, 33)],
    ['2026-11-21', Date.UTC(2026, 10, 21)],
    ['2026-11-21T23:40:33.123456789Z', Date.UTC(2026, 10, 21, 23, 40, 33, 123)],
    ['2026-11-21T23:40:33.999999999Z', Date.UTC(2026, 10, 21, 23, 40, 33, 999)],
    ['2024-02-29T00:00:00Z', Date.UTC(2024, 1, 29)],
    ['1970-01-01T00:00:00.000Z', 0],
    ['0050-06-01T00:00:00Z', Date.parse('0050-06-01T00:00:00.000Z')], // not 1950
  ]
  test.each(valid)('%p → %p', (text, expected) => {
    expect(parseIsoDateTime(text)).toBe(expected)
  })

  test('every millisecond fraction survives exactly (no float rounding)', () => {
    for (let ms = 0; ms < 1000; ms++) {
      const text = `2026-11-21T23:40:33.${String(ms).padStart(3, '0')}Z`
      expect(parseIsoDateTime(text)).toBe(Date.UTC(2026, 10, 21, 23, 40, 33, ms))
    }
  })

  const invalid = [
    '2026-02-30T00:00:00Z',
    '2025-02-29T00:00:00Z',
    '2026-04-31',
    '2026-13-01T00:00Z',
    '2026-00-10T00:00Z',
    'abc',
    '2026-11-21T25:00Z',
    '2026-11-21T23:60Z',
    '2026-11-21T23:40:60Z',
    '2026-11-21T23:40:33+24:00',
    '2026-11-21T23:40:33+02:60',
    '2026-11-21T23:40:33.Z',
    '2026-11-21T23:40:33.1234567890Z',
    '26-11-21',
    '2026-11-21Z',
    '2026/11/21',
    '1795304433123',
    '',
    '   ',
  ]
  test.each(invalid)('%p → null', (text) => {
    expect(parseIsoDateTime(text)).toBeNull()
  })
})

describe('toIso', () => {
  test('renders UTC with milliseconds, even when they are zero', () => {
    expect(toIso(Date.UTC(2026, 10, 21, 23, 40, 33, 123))).toBe('2026-11-21T23:40:33.123Z')
    expect(toIso(Date.UTC(2026, 10, 21, 23, 40, 33))).toBe('2026-11-21T23:40:33.000Z')
    expect(toIso(0)).toBe('1970-01-01T00:00:00.000Z')
  })

  test('round-trips through parseIsoDateTime', () => {
    for (const ms of [0, 1, 1_795_304_433_123, Date.UTC(2000, 1, 29, 12)]) expect(parseIsoDateTime(toIso(ms))).toBe(ms)
  })

  test('toIsoOrNull passes null and undefined through', () => {
    expect(toIsoOrNull(null)).toBeNull()
    expect(toIsoOrNull(undefined)).toBeNull()
    expect(toIsoOrNull(5)).toBe('1970-01-01T00:00:00.005Z')
  })
})

describe('microsecond times (notes, messages, log entries)', () => {
  const second = Date.UTC(2026, 10, 21, 23, 40, 33)
  test.each([
    ['2026-11-21T23:40:33.123456Z', second * 1000 + 123_456],
    ['2026-11-21T23:40:33.123Z', second * 1000 + 123_000],
    ['2026-11-21T23:40:33Z', second * 1000],
    ['2026-11-21T23:40:33.000001Z', second * 1000 + 1],
    ['2026-11-21T23:40:33.1234569Z', second * 1000 + 123_456], // digits past the sixth are dropped
    ['2026-11-22T01:40:33.5+02:00', second * 1000 + 500_000],
    ['1970-01-01T00:00:00.000001Z', 1],
  ])('parseIsoMicros(%p) → %p', (text, expected) => {
    expect(parseIsoMicros(text)).toBe(expected as Micros)
  })

  test('invalid text, and instants beyond exact µs (safe integers), are null; parseIsoDateTime still reads the latter', () => {
    for (const text of ['abc', '2026-02-30T00:00:00Z', '2026-11-21T23:40:33.Z']) expect(parseIsoMicros(text)).toBeNull()
    expect(parseIsoMicros('3000-01-01T00:00:00Z')).toBeNull()
    expect(parseIsoDateTime('3000-01-01T00:00:00Z')).toBe(Date.UTC(3000, 0, 1))
    expect(parseIsoMicros('2255-01-01T00:00:00Z')).toBe((Date.UTC(2255, 0, 1) * 1000) as Micros)
  })

  test('toIsoMicros renders UTC with six fraction digits, always', () => {
    expect(toIsoMicros((second * 1000 + 123_456) as Micros)).toBe('2026-11-21T23:40:33.123456Z')
    expect(toIsoMicros((second * 1000 + 1) as Micros)).toBe('2026-11-21T23:40:33.000001Z')
    expect(toIsoMicros(microsFromMillis(second + 7))).toBe('2026-11-21T23:40:33.007000Z')
    expect(toIsoMicros(0 as Micros)).toBe('1970-01-01T00:00:00.000000Z')
    expect(toIsoMicros(-1 as Micros)).toBe('1969-12-31T23:59:59.999999Z')
  })

  test('every microsecond of a millisecond round-trips exactly, and text order is time order', () => {
    const base = microsFromMillis(second)
    let previous = ''
    for (let us = base - 1000; us < base + 2000; us++) {
      const text = toIsoMicros(us as Micros)
      expect(parseIsoMicros(text)).toBe(us as Micros)
      expect(text > previous).toBe(true)
      previous = text
    }
  })

  test('the rendering is an RFC 3339 date-time (the published document\'s `format: date-time`)', () => {
    const validate = addFormats(new Ajv()).compile({ type: 'string', format: 'date-time' })
    for (const us of [0, 1, 1_795_304_433_123_456, 1_795_304_433_999_999]) expect(validate(toIsoMicros(us as Micros))).toBe(true)
  })
})

describe('loadConfig', () => {
  test('defaults', () => {
    const config = loadConfig({}, {})
    expect(config).toEqual({
      dataDir: resolve('./data'),
      databaseUrl: null,
      databasePoolSize: 10,
      databaseListenUrl: null,
      host: '127.0.0.1',
      port: 8080,
      baseUrl: 'http://127.0.0.1:8080',
      secretFromEnv: undefined,
      webhookRatePerMinute: 60,
      auditCheckpointEvery: 1000,
      auditCheckpointSeconds: 300,
      auditWitnessDir: null,
      auditWitnessUrl: null,
      auditWitnessLeaseMs: 30_000,
      tokenRotationDays: { productionDays: 90, developmentDays: 180 },
      liveTokensPerUser: 100,
      apiRatePerMinute: 60,
      apiRatePerHour: 1000,
      apiRatePerDay: 10000,
      executorConcurrency: 4,
      executorSharePercent: 50,
      executorLeaseMs: 30_000,
      logRetentionDays: null,
      idempotencyKeyWindowMs: 24 * 3_600_000,
      runRetentionMs: 30 * 86_400_000,
      recordRetentionDays: 30,
      dbBusyWaitMs: 3000,
      walCheckpointMs: 250,
      databaseLongTransactionSeconds: 60,
      listingDelaySeconds: 10,
      litestreamConfig: null,
      litestreamBin: undefined,
      readyMinFreeBytes: 64 * 1024 * 1024,
      eventStreamsMax: 5000,
      eventStreamsPerUser: 50,
      eventHeartbeatMs: 15_000,
      logLevel: 'info',
      maxBodyBytes: 1_048_576,
      httpAllow: { hosts: new Set(), ranges: [] },
      httpAllowEntries: null,
      callbackRetryMs: 5000,
      oidc: null,
      mail: null,
      trustProxy: [],
    })
  })

  test('environment variables', () => {
    const config = loadConfig(
      {},
      {
        TRELLIS_DATA_DIR: '/srv/trellis',
        TRELLIS_HOST: '0.0.0.0',
        TRELLIS_PORT: '9000',
        TRELLIS_SECRET: 'from-the-environment-0123456789abcdef',
        TRELLIS_WEBHOOK_RATE_PER_MIN: '5',
        TRELLIS_API_RATE_PER_MIN: '7',
        TRELLIS_API_RATE_PER_HOUR: '70',
        TRELLIS_API_RATE_PER_DAY: '700',
        TRELLIS_EXECUTOR_CONCURRENCY: '2',
        TRELLIS_EXECUTOR_SHARE: '25',
        TRELLIS_LOG_LEVEL: 'warn',
        TRELLIS_MAX_BODY_BYTES: '2048',
        TRELLIS_HTTP_ALLOW: 'Hooks.Internal., 10.1.0.0/16 ::1',
        TRELLIS_TRUST_PROXY: '10.0.0.2',
        TRELLIS_DB_BUSY_WAIT_MS: '500',
        TRELLIS_WAL_CHECKPOINT_MS: '1000',
        TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS: '120',
        TRELLIS_LISTING_DELAY_SECONDS: '3',
        TRELLIS_READY_MIN_FREE_MB: '128',
        TRELLIS_DATABASE_URL: 'postgres://trellis:pw@db.internal:5432/trellis',
        TRELLIS_DATABASE_POOL: '8',
        TRELLIS_DATABASE_LISTEN_URL: 'postgres://trellis:pw@db.internal:5432/trellis',
        TRELLIS_IDEMPOTENCY_KEY_HOURS: '48',
        TRELLIS_RUN_RETENTION: '12h',
        TRELLIS_CALLBACK_RETRY_MS: '250',
        TRELLIS_EVENT_STREAMS_MAX: '300',
        TRELLIS_EVENT_STREAMS_PER_USER: '3',
        TRELLIS_LIVE_TOKENS_PER_USER: '7',
        TRELLIS_EVENT_HEARTBEAT_SECONDS: '5',
        TRELLIS_TOKEN_ROTATION_DAYS_PRODUCTION: '30',
        TRELLIS_TOKEN_ROTATION_DAYS_DEVELOPMENT: '60',
        TRELLIS_SMTP_URL: 'smtps://mailer:p%40ss@smtp.internal',
        TRELLIS_MAIL_FROM: 'Trellis <trellis@Example.COM>',
        TRELLIS_MAIL_RETRY_MS: '1000',
        TRELLIS_SMTP_TIMEOUT_SECONDS: '5',
        TRELLIS_AUDIT_CHECKPOINT_EVERY: '50',
        TRELLIS_AUDIT_CHECKPOINT_SECONDS: '10',
        TRELLIS_AUDIT_WITNESS_DIR: '/mnt/witness',
        TRELLIS_AUDIT_WITNESS_URL: 'https://witness.example/audit',
        TRELLIS_AUDIT_WITNESS_LEASE_SECONDS: '45',
      },
    )
    expect(config).toEqual({
      dataDir: '/srv/trellis',
      databaseUrl: 'postgres://trellis:pw@db.internal:5432/trellis',
      databasePoolSize: 8,
      databaseListenUrl: 'postgres://trellis:pw@db.internal:5432/trellis',
      host: '0.0.0.0',
      port: 9000,
      // 0.0.0.0 is where the server listens, not an address to give out.
      baseUrl: 'http://127.0.0.1:9000',
      secretFromEnv: 'from-the-environment-0123456789abcdef',
      webhookRatePerMinute: 5,
      auditCheckpointEvery: 50,
      auditCheckpointSeconds: 10,
      auditWitnessDir: '/mnt/witness',
      auditWitnessUrl: 'https://witness.example/audit',
      auditWitnessLeaseMs: 45_000,
      tokenRotationDays: { productionDays: 30, developmentDays: 60 },
      liveTokensPerUser: 7,
      apiRatePerMinute: 7,
      apiRatePerHour: 70,
      apiRatePerDay: 700,
      executorConcurrency: 2,
      executorSharePercent: 25,
      executorLeaseMs: 30_000,
      logRetentionDays: null,
      idempotencyKeyWindowMs: 48 * 3_600_000,
      runRetentionMs: 12 * 3_600_000,
      recordRetentionDays: 30,
      dbBusyWaitMs: 500,
      walCheckpointMs: 1000,
      databaseLongTransactionSeconds: 120,
      listingDelaySeconds: 3,
      litestreamConfig: null,
      litestreamBin: undefined,
      readyMinFreeBytes: 128 * 1024 * 1024,
      eventStreamsMax: 300,
      eventStreamsPerUser: 3,
      eventHeartbeatMs: 5_000,
      logLevel: 'warn',
      maxBodyBytes: 2048,
      httpAllow: parseAllowList('hooks.internal 10.1.0.0/16 ::1'),
      httpAllowEntries: ['Hooks.Internal.', '10.1.0.0/16', '::1'],
      callbackRetryMs: 250,
      oidc: null,
      mail: { smtpUrl: 'smtps://mailer:p%40ss@smtp.internal', from: 'Trellis <trellis@Example.COM>', domain: 'example.com', retryMs: 1000, timeoutMs: 5000 },
      trustProxy: ['10.0.0.2'],
    })
    expect(config.httpAllow.hosts).toEqual(new Set(['hooks.internal']))
    expect(config.httpAllow.ranges.map(([network, bits]) => `${network.toString()}/${bits}`)).toEqual(['10.1.0.0/16', '::1/128'])
  })

  test('the database URL: postgres:// or postgresql:// only; the flag wins; a bad one names the setting', () => {
    expect(loadConfig({ 'database-url': 'postgresql://h/db' }, { TRELLIS_DATABASE_URL: 'postgres://env/db' }).databaseUrl).toBe('postgresql://h/db')
    expect(() => loadConfig({}, { TRELLIS_DATABASE_URL: 'mysql://h/db' })).toThrow('--database-url / TRELLIS_DATABASE_URL must be a postgres:// or postgresql:// URL')
    expect(() => loadConfig({}, { TRELLIS_DATABASE_POOL: '0' })).toThrow('TRELLIS_DATABASE_POOL')
  })

  test('the LISTEN URL behind a pooler: a postgres:// URL, and only with a database URL', () => {
    const listen = 'TRELLIS_DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL, and goes with --database-url / TRELLIS_DATABASE_URL'
    expect(loadConfig({}, { TRELLIS_DATABASE_URL: 'postgres://pooler:6432/db', TRELLIS_DATABASE_LISTEN_URL: 'postgres://db:5432/db' }).databaseListenUrl).toBe('postgres://db:5432/db')
    expect(loadConfig({}, { TRELLIS_DATABASE_URL: 'postgres://pooler:6432/db' }).databaseListenUrl).toBeNull()
    // The executor's workers by default: 4 on SQLite, 8 on PostgreSQL (round trips); a value given wins on either.
    expect(loadConfig({}, {}).executorConcurrency).toBe(4)
    expect(loadConfig({}, { TRELLIS_DATABASE_URL: 'postgres://db/db' }).executorConcurrency).toBe(8)
    expect(loadConfig({}, { TRELLIS_DATABASE_URL: 'postgres://db/db', TRELLIS_EXECUTOR_CONCURRENCY: '3' }).executorConcurrency).toBe(3)
    expect(() => loadConfig({}, { TRELLIS_DATABASE_URL: 'postgres://pooler:6432/db', TRELLIS_DATABASE_LISTEN_URL: 'http://db/db' })).toThrow(listen)
    expect(() => loadConfig({}, { TRELLIS_DATABASE_LISTEN_URL: 'postgres://db:5432/db' })).toThrow(listen)
  })

  test('flags win over environment variables', () => {
    const env = { TRELLIS_DATA_DIR: '/env/data', TRELLIS_HOST: 'env-host', TRELLIS_PORT: '9000', TRELLIS_BASE_URL: 'https://env.example' }
    const config = loadConfig({ data: '/flag/data', host: 'flag-host', port: '9100', 'base-url': 'https://flag.example/' }, env)
    expect(config.dataDir).toBe('/flag/data')
    expect(config.host).toBe('flag-host')
    expect(config.port).toBe(9100)
    expect(config.baseUrl).toBe('https://flag.example')
  })

  test('the base URL follows host and port unless given; IPv6 hosts are bracketed', () => {
    expect(loadConfig({ host: 'example.internal', port: '81' }, {}).baseUrl).toBe('http://example.internal:81')
    expect(loadConfig({ host: '::1', port: '81' }, {}).baseUrl).toBe('http://[::1]:81')
    expect(loadConfig({}, { TRELLIS_BASE_URL: 'https://trellis.example.com///' }).baseUrl).toBe('https://trellis.example.com')
  })

  test('empty environment variables count as unset', () => {
    expect(loadConfig({}, { TRELLIS_PORT: '', TRELLIS_HOST: '  ', TRELLIS_SECRET: '' })).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      secretFromEnv: undefined,
    })
  })

  test.each(['abc', '-1', '65536', '80.5', '0x50', '1e3'])('port %p → ConfigError', (port) => {
    expect(() => loadConfig({ port }, {})).toThrow(ConfigError)
    expect(() => loadConfig({}, { TRELLIS_PORT: port })).toThrow(/TRELLIS_PORT/)
  })

  test.each([
    ['TRELLIS_WEBHOOK_RATE_PER_MIN', 'ten'],
    ['TRELLIS_API_RATE_PER_MIN', '0'],
    ['TRELLIS_API_RATE_PER_HOUR', '1.5'],
    ['TRELLIS_API_RATE_PER_DAY', '-3'],
    ['TRELLIS_EXECUTOR_CONCURRENCY', '1000'],
    ['TRELLIS_EXECUTOR_SHARE', '0'],
    ['TRELLIS_EXECUTOR_SHARE', '95'],
    ['TRELLIS_MAX_BODY_BYTES', '64k'],
    ['TRELLIS_MAX_BODY_BYTES', '10'],
    ['TRELLIS_READY_MIN_FREE_MB', '0'],
    ['TRELLIS_READY_MIN_FREE_MB', '64M'],
    ['TRELLIS_IDEMPOTENCY_KEY_HOURS', '0'],
    ['TRELLIS_IDEMPOTENCY_KEY_HOURS', '8761'],
    ['TRELLIS_IDEMPOTENCY_KEY_HOURS', '1.5'],
    ['TRELLIS_RUN_RETENTION', '30'],
    ['TRELLIS_RUN_RETENTION', '0'],
    ['TRELLIS_RUN_RETENTION', '0s'],
    ['TRELLIS_RUN_RETENTION', '1.5d'],
    ['TRELLIS_RUN_RETENTION', '-3d'],
    ['TRELLIS_RUN_RETENTION', '2w'],
    ['TRELLIS_RUN_RETENTION', '36501d'],
    ['TRELLIS_RUN_RETENTION', 'never'],
    ['TRELLIS_HTTP_ALLOW', 'http://hooks.internal'],
    ['TRELLIS_HTTP_ALLOW', '10.0.0.0/33'],
    ['TRELLIS_HTTP_ALLOW', 'hooks.internal, *.internal'],
  ])('%s=%p → ConfigError naming the variable', (name, value) => {
    let thrown: unknown
    try {
      loadConfig({}, { [name]: value })
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(ConfigError)
    expect((thrown as Error).message).toContain(name)
  })

  test('the run retention: a whole number of s, m, h or d (any case, a space allowed), or off; 1s to 36500d', () => {
    const retention = (value: string) => loadConfig({}, { TRELLIS_RUN_RETENTION: value }).runRetentionMs
    expect(retention('90s')).toBe(90_000)
    expect(retention('15m')).toBe(15 * 60_000)
    expect(retention(' 12 H ')).toBe(12 * 3_600_000)
    expect(retention('30d')).toBe(30 * 86_400_000)
    expect(retention('1s')).toBe(1000)
    expect(retention('36500d')).toBe(36_500 * 86_400_000)
    expect(retention('off')).toBeNull()
    expect(retention('OFF')).toBeNull()
    expect(retention('')).toBe(30 * 86_400_000)
    expect(() => retention('30')).toThrow('TRELLIS_RUN_RETENTION must be a whole number with a unit (s, m, h or d: 90s, 12h, 30d) or off, got "30"')
    expect(() => retention('0d')).toThrow('TRELLIS_RUN_RETENTION must be between 1s and 36500d, or off, got "0d"')
  })

  test('an unknown log level or a non-http base URL → ConfigError naming it', () => {
    expect(() => loadConfig({}, { TRELLIS_LOG_LEVEL: 'loud' })).toThrow(/TRELLIS_LOG_LEVEL/)
    expect(() => loadConfig({}, { TRELLIS_BASE_URL: 'ftp://example.com' })).toThrow(/TRELLIS_BASE_URL/)
    expect(() => loadConfig({ 'base-url': 'example.com' }, {})).toThrow(ConfigError)
  })
})

describe('loadInstanceSecret', () => {
  test('generates <data>/secret with mode 0600 and returns the same value next time', () => {
    const dir = tempDir()
    try {
      const dataDir = join(dir.path, 'nested', 'data')
      const first = loadInstanceSecret(dataDir)
      const path = join(dataDir, SECRET_FILE)
      expect(statSync(path).mode & 0o777).toBe(0o600)
      expect(first.length).toBeGreaterThanOrEqual(32)
      expect(first.toString('utf8')).toBe(readFileSync(path, 'utf8').trim())
      expect(loadInstanceSecret(dataDir).equals(first)).toBe(true)
      // Another data directory gets its own secret.
      expect(loadInstanceSecret(join(dir.path, 'other')).equals(first)).toBe(false)
    } finally {
      dir.cleanup()
    }
  })

  test('TRELLIS_SECRET wins and no file is written', () => {
    const dir = tempDir()
    try {
      const secret = loadInstanceSecret(dir.path, 'the-secret-from-the-environment-0123')
      expect(secret.toString('utf8')).toBe('the-secret-from-the-environment-0123')
      expect(existsSync(join(dir.path, SECRET_FILE))).toBe(false)
    } finally {
      dir.cleanup()
    }
  })

  test('an existing secret file readable by others is tightened to 0600 and kept', () => {
    const dir = tempDir()
    try {
      const path = join(dir.path, SECRET_FILE)
      const value = 'k'.repeat(43)
      writeFileSync(path, `${value}\n`)
      chmodSync(path, 0o644)
      expect(loadInstanceSecret(dir.path).toString('utf8')).toBe(value)
      expect(statSync(path).mode & 0o777).toBe(0o600)
    } finally {
      dir.cleanup()
    }
  })

  test('a truncated secret file is an error, not a weak key', () => {
    const dir = tempDir()
    try {
      writeFileSync(join(dir.path, SECRET_FILE), 'short\n', { mode: 0o600 })
      expect(() => loadInstanceSecret(dir.path)).toThrow(/too short/)
    } finally {
      dir.cleanup()
    }
  })
})

describe('webhook URL signing', () => {
  const secret = Buffer.from('webhook-test-secret-0123456789abcdef')
  const payload = { workflowId: 7, renderingId: 3, generation: 2 }
  const signed = (body: string, key = secret) => {
    const encoded = Buffer.from(body).toString('base64url')
    return `${encoded}.${createHmac('sha256', key).update(encoded).digest('base64url')}`
  }
  /** Changes one base64url character without leaving the alphabet. */
  const flip = (text: string, at: number) => text.slice(0, at) + (text[at] === 'A' ? 'B' : 'A') + text.slice(at + 1)

  test('sign → verify round trip; the URL is base + /v1/hooks/ + token', () => {
    const token = webhookToken(secret, payload)
    expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/)
    expect(verifyWebhookToken(secret, token)).toEqual(payload)
    expect(webhookUrl(secret, 'https://trellis.example', payload)).toBe(`https://trellis.example/v1/hooks/${token}`)
    const [encoded] = token.split('.')
    expect(JSON.parse(Buffer.from(encoded!, 'base64url').toString('utf8'))).toEqual({ v: 1, w: 7, r: 3, g: 2 })
  })

  test('a new generation makes a different URL', () => {
    expect(webhookToken(secret, { ...payload, generation: 3 })).not.toBe(webhookToken(secret, payload))
  })

  test('tampered payload → null', () => {
    const [encoded, signature] = webhookToken(secret, payload).split('.') as [string, string]
    const forged = Buffer.from(JSON.stringify({ v: 1, w: 8, r: 3, g: 2 })).toString('base64url')
    expect(verifyWebhookToken(secret, `${forged}.${signature}`)).toBeNull()
    expect(verifyWebhookToken(secret, `${flip(encoded, 2)}.${signature}`)).toBeNull()
  })

  test('tampered signature → null', () => {
    const [encoded, signature] = webhookToken(secret, payload).split('.') as [string, string]
    expect(verifyWebhookToken(secret, `${encoded}.${flip(signature, 0)}`)).toBeNull()
    expect(verifyWebhookToken(secret, `${encoded}.${flip(signature, 20)}`)).toBeNull()
    expect(verifyWebhookToken(secret, `${encoded}.${signature.slice(0, -1)}`)).toBeNull()
    expect(verifyWebhookToken(secret, `${encoded}.${signature}A`)).toBeNull()
  })

  test('wrong secret → null', () => {
    const token = webhookToken(secret, payload)
    expect(verifyWebhookToken(Buffer.from('another-secret-0123456789abcdefghij'), token)).toBeNull()
  })

  test.each([
    '',
    '.',
    'garbage',
    'a.b',
    'a.b.c',
    `${'x'.repeat(600)}.${'y'.repeat(43)}`,
    `eyJ2IjoxfQ.${'!'.repeat(43)}`,
    '../../etc/passwd',
    "'; DROP TABLE runs; --",
  ])('garbage %p → null', (token) => {
    expect(verifyWebhookToken(secret, token)).toBeNull()
  })

  test.each([
    ['not JSON', 'hello'],
    ['wrong version', JSON.stringify({ v: 2, w: 7, r: 3, g: 2 })],
    ['missing id', JSON.stringify({ v: 1, w: 7, g: 2 })],
    ['zero id', JSON.stringify({ v: 1, w: 0, r: 3, g: 2 })],
    ['negative generation', JSON.stringify({ v: 1, w: 7, r: 3, g: -1 })],
    ['fractional id', JSON.stringify({ v: 1, w: 7.5, r: 3, g: 2 })],
    ['string id', JSON.stringify({ v: 1, w: '7', r: 3, g: 2 })],
    ['array', JSON.stringify([1, 7, 3, 2])],
    ['null', 'null'],
  ])('genuinely signed but malformed payload (%s) → null', (_, body) => {
    expect(verifyWebhookToken(secret, signed(body))).toBeNull()
  })

  test('the hand-signed form matches what webhookToken produces', () => {
    expect(signed(JSON.stringify({ v: 1, w: 7, r: 3, g: 2 }))).toBe(webhookToken(secret, payload))
  })
})

describe('canonical JSON (what a workflow version pins)', () => {
  test('keys sorted at every depth, arrays in order, undefined left out', () => {
    expect(canonicalJson({ b: 1, a: { d: [2, { z: 1, y: undefined, x: 0 }], c: null } })).toBe('{"a":{"c":null,"d":[2,{"x":0,"z":1}]},"b":1}')
  })

  test("a definition's key order is not a new version; a form's field order is (the task page shows the fields in it)", () => {
    const form = (fields: string[]) => ({ type: 'object', properties: Object.fromEntries(fields.map((name) => [name, { type: 'string' }])) })
    const task = (fields: string[]) => ({ type: 'task', name: 'approve', title: 'OK?', assignees: { teams: ['Billing'] }, form: form(fields) })
    const definition = (steps: unknown[]) => ({ name: 'Approve', collection: 'orders', steps }) as unknown as WorkflowDefinition
    const written = canonicalDefinition(definition([task(['reason', 'amount'])]))
    expect(written).toContain('"properties":{"reason":{"type":"string"},"amount":{"type":"string"}}')
    expect(canonicalDefinition(JSON.parse(JSON.stringify({ steps: [task(['reason', 'amount'])], collection: 'orders', name: 'Approve' })))).toBe(written)
    expect(canonicalDefinition(definition([task(['amount', 'reason'])]))).not.toBe(written)
  })
})

describe('sanitizeNoteHtml', () => {
  test.each([
    ['<p>Hi</p><script>alert(1)</script>', '<p>Hi</p>'],
    ['<img src="x" onerror="alert(1)">', ''],
    ['<p onclick="steal()">c</p>', '<p>c</p>'],
    ['<svg onload="alert(1)"><p>s</p></svg>', '<p>s</p>'],
    ['<iframe src="https://evil.example"></iframe>', ''],
    ['<style>p { color: red }</style><p>t</p>', '<p>t</p>'],
  ])('%p → %p', (input, output) => {
    expect(sanitizeNoteHtml(input)).toBe(output)
  })

  test.each([
    'javascript:alert(1)',
    'JaVaScRiPt:alert(1)',
    '  javascript:alert(1)',
    'jav&#x09;ascript:alert(1)',
    'data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==',
    'vbscript:msgbox(1)',
    '//evil.example/path',
  ])('link href %p is dropped', (href) => {
    const clean = sanitizeNoteHtml(`<a href="${href}">x</a>`)
    expect(clean).not.toContain('href')
    expect(clean.toLowerCase()).not.toContain('script')
    expect(clean).not.toContain('data:')
    expect(clean).toContain('>x</a>')
  })

  test('keeps the formatting allow-list and https links (with a safe rel)', () => {
    const html = '<p>Order <b>42</b></p><ul><li>one</li><li>two</li></ul><a href="https://example.com/a?b=1">link</a>'
    expect(sanitizeNoteHtml(html)).toBe(
      '<p>Order <b>42</b></p><ul><li>one</li><li>two</li></ul><a href="https://example.com/a?b=1" rel="noopener noreferrer nofollow">link</a>',
    )
  })

  test('text stays escaped', () => {
    expect(sanitizeNoteHtml('a < b & "c"')).toBe('a &lt; b &amp; "c"')
    expect(sanitizeNoteHtml('<p>&lt;script&gt;</p>')).toBe('<p>&lt;script&gt;</p>')
  })
})

describe('nextCreatedAt', () => {
  // Any table with an integer created_at serves as a list here; the values are µs as in notes and logs.
  const USERS: TimeOrderedList = { name: 'test-users', table: 'users', scope: null }
  test('the clock in µs, strictly increasing by 1 µs while the clock stands still, never backwards when it jumps back', () => {
    const env = sqliteTestEnv()
    try {
      const insertAt = (createdAt: number, n: number) =>
        env.store.db.insert(users).values({ email: `u${n}@example.com`, username: `u${n}`, createdAt, updatedAt: createdAt }).run()
      const now = env.clock.now()
      const us = now * 1000
      const times: number[] = []
      for (let n = 0; n < 5; n++) {
        const t = runOp(env.store.db, nextCreatedAt(USERS, null, now))
        insertAt(t, n)
        times.push(t)
      }
      expect(times).toEqual([us, us + 1, us + 2, us + 3, us + 4])
      // The clock moved back (NTP): still after the last row.
      expect(runOp(env.store.db, nextCreatedAt(USERS, null, now - 60_000))).toBe((us + 5) as Micros)
      // The next millisecond: the clock's own time again, not the counter.
      expect(runOp(env.store.db, nextCreatedAt(USERS, null, now + 1))).toBe((us + 1000) as Micros)
      // The clock moved well ahead: its time is used as is.
      expect(runOp(env.store.db, nextCreatedAt(USERS, null, now + 10_000))).toBe((us + 10_000_000) as Micros)
    } finally {
      env.cleanup()
    }
  })

  test('SQLite: a write transaction reads the newest once and counts on; once it ends, rows another connection wrote count again', () => {
    const env = sqliteTestEnv()
    const other = new Database(databasePath(env.config.dataDir))
    try {
      let n = 0
      const insertAt = (db: typeof env.store.db, createdAt: number) =>
        db.insert(users).values({ email: `u${n}@example.com`, username: `u${n++}`, createdAt, updatedAt: createdAt }).run()
      const now = env.clock.now()
      const us = now * 1000
      const dated = (tx: typeof env.store.db) => {
        const t = runOp(tx, nextCreatedAt(USERS, null, now))
        insertAt(tx, t)
        return t
      }
      const first = env.store.writeTransaction((tx) => {
        const a = dated(tx)
        // A row dated behind the counter's back (no product code does this: every dated row takes nextCreatedAt) is
        // not seen by the next entry of the same transaction — which shows the newest was not read again.
        insertAt(tx, us + 500)
        return [a, dated(tx), dated(tx)]
      })
      expect(first).toEqual([us, us + 1, us + 2] as Micros[])
      // The transaction ended: another process's row (the CLI's) counts, read again by the next transaction.
      other.run('INSERT INTO users (email, username, created_at, updated_at) VALUES (?, ?, ?, ?)', ['cli@example.com', 'cli', us + 1000, us + 1000])
      expect(env.store.writeTransaction((tx) => [dated(tx), dated(tx)])).toEqual([us + 1001, us + 1002] as Micros[])
      // A transaction that failed forgets what it counted too.
      expect(() => env.store.writeTransaction((tx) => {
        dated(tx)
        throw new Error('rolled back')
      })).toThrow('rolled back')
      other.run('INSERT INTO users (email, username, created_at, updated_at) VALUES (?, ?, ?, ?)', ['cli2@example.com', 'cli2', us + 2000, us + 2000])
      expect(env.store.writeTransaction((tx) => dated(tx))).toBe((us + 2001) as Micros)
      // Outside a write transaction nothing is counted: each entry reads.
      other.run('INSERT INTO users (email, username, created_at, updated_at) VALUES (?, ?, ?, ?)', ['cli3@example.com', 'cli3', us + 3000, us + 3000])
      expect(runOp(env.store.db, nextCreatedAt(USERS, null, now))).toBe((us + 3001) as Micros)
    } finally {
      other.close()
      env.cleanup()
    }
  })
})

describe('runNowThenDaily (log retention, planner statistics)', () => {
  test('runs at once, then on its schedule once that is set up; stopped before, it never runs again', async () => {
    // A pattern due every second stands in for the daily time.
    let scheduled = 0
    const job = runNowThenDaily('* * * * * *', () => void scheduled++, 50)
    let stopped = 0
    const early = runNowThenDaily('* * * * * *', () => void stopped++, 50)
    expect(scheduled).toBe(1)
    expect(stopped).toBe(1)
    early.stop()
    await Bun.sleep(2_300)
    job.stop()
    expect(scheduled).toBeGreaterThanOrEqual(3)
    expect(stopped).toBe(1)
    const after = scheduled
    await Bun.sleep(1_200)
    expect(scheduled).toBe(after)
  })
})
