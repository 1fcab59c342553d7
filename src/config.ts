/** Configuration: command-line flags win over environment variables, which win over defaults (DESIGN §10). */
import { readFileSync, realpathSync } from 'node:fs'
import { isAbsolute, relative, resolve } from 'node:path'
import proxyaddr from 'proxy-addr'
import { CALLBACK_LEASE_MS, DEFAULT_CALLBACK_RETRY_MS } from './lib/callbacks.ts'
import { LOG_LEVELS, type LogLevel } from './lib/logger.ts'
import { DEFAULT_MAIL_RETRY_MS, DEFAULT_SMTP_TIMEOUT_SECONDS, parseMailFrom, smtpUrlProblem } from './lib/mail.ts'
import { type AllowList, AllowListError, allowListEntries, isLoopbackHost, parseAllowList } from './lib/outbound/policy.ts'

export interface Config {
  dataDir: string
  /**
   * PostgreSQL instead of the embedded SQLite file (docs/scaling-out.md "Scaling out"): `postgres://…`. Never logged or
   * printed (it may hold a password).
   */
  databaseUrl: string | null
  /** Connections each instance keeps to PostgreSQL at most. */
  databasePoolSize: number
  /**
   * A direct connection to the same database for LISTEN (TRELLIS_DATABASE_LISTEN_URL), set when `databaseUrl` goes
   * through a transaction pooler (PgBouncer): the pooled connections then get no named prepared statements, and the
   * notifications are heard here. Never logged (it may hold a password).
   */
  databaseListenUrl: string | null
  host: string
  port: number
  baseUrl: string
  /** TRELLIS_SECRET when given; otherwise the instance secret lives in `<dataDir>/secret`. */
  secretFromEnv: string | undefined
  webhookRatePerMinute: number
  /**
   * The audit trail's checkpoints (docs/audit.md "Checkpoints"): a log is signed once this many of its entries are
   * unsigned (TRELLIS_AUDIT_CHECKPOINT_EVERY) or its oldest unsigned entry is this old (TRELLIS_AUDIT_CHECKPOINT_SECONDS).
   */
  auditCheckpointEvery: number
  auditCheckpointSeconds: number
  /** A directory outside the data directory where each checkpoint is appended to `checkpoints.jsonl`; null: none. */
  auditWitnessDir: string | null
  /** An endpoint each checkpoint is POSTed to (Standard Webhooks, `audit.checkpoint`); null: none. */
  auditWitnessUrl: string | null
  /**
   * How long an instance holds a witness delivery it attempts (TRELLIS_AUDIT_WITNESS_LEASE_SECONDS, in ms): one whose
   * instance died is attempted again by another (on PostgreSQL) when it runs out.
   */
  auditWitnessLeaseMs: number
  /** The spec's token rotation advice in days, shown (never enforced) in the console's token lists. */
  tokenRotationDays: { productionDays: number; developmentDays: number }
  /** Live (neither revoked nor expired) tokens one user may hold at most (TRELLIS_LIVE_TOKENS_PER_USER); creating one more is 409. */
  liveTokensPerUser: number
  apiRatePerMinute: number
  apiRatePerHour: number
  apiRatePerDay: number
  executorConcurrency: number
  /** The executor's share (%) of a busy turn of the event loop beside HTTP's request slice (docs/workflows.md "Executor"). */
  executorSharePercent: number
  /** How long a claimed run stays owned without a heartbeat before another start may recover it. */
  executorLeaseMs: number
  logLevel: LogLevel
  maxBodyBytes: number
  /** Days of activity/admin logs to keep; null keeps them forever. */
  logRetentionDays: number | null
  /** How long a run start's Idempotency-Key is replayed (TRELLIS_IDEMPOTENCY_KEY_HOURS, in ms); pruned after it. */
  idempotencyKeyWindowMs: number
  /**
   * How long a finished run (with its steps and idempotency keys) is kept after it finished (TRELLIS_RUN_RETENTION, in
   * ms); null keeps runs forever (`off`).
   */
  runRetentionMs: number | null
  /** Days a deleted record can be restored before the run history's job purges it (TRELLIS_RECORD_RETENTION_DAYS). */
  recordRetentionDays: number
  /** Local and private destinations that `http` steps and callbacks may call anyway (TRELLIS_HTTP_ALLOW); empty by default. */
  httpAllow: AllowList
  /**
   * TRELLIS_HTTP_ALLOW's entries as written, or null when it is unset or blank: then the list instance administrators
   * keep in the console is the one in effect (src/modules/instance/outbound-allow.ts).
   */
  httpAllowEntries: string[] | null
  /** The first wait between a callback's attempts (TRELLIS_CALLBACK_RETRY_MS); later ones double, up to 720 times it. */
  callbackRetryMs: number
  /** Console sign-in through an OpenID Connect provider; null when no issuer is configured. */
  oidc: OidcConfig | null
  /** E-mail through an SMTP server (docs/mail.md); null when TRELLIS_SMTP_URL is not set: nothing is sent. */
  mail: MailConfig | null
  /** Proxies whose X-Forwarded-For is believed (addresses, CIDR ranges, or proxy-addr's named ranges); empty: none. */
  trustProxy: string[]
  /** How long a server write waits for another process's write lock before answering 503 database_busy. */
  dbBusyWaitMs: number
  /** How often `serve` checkpoints the WAL (SQLite's own checkpoints, inside a commit, are off on its connection). */
  walCheckpointMs: number
  /** PostgreSQL: a transaction open this long anywhere in the cluster is logged and makes /readyz `degraded`. */
  databaseLongTransactionSeconds: number
  /** PostgreSQL: a list whose newest rows stay unlisted this long (a transaction holds its watermark) is logged and makes /readyz `degraded`. */
  listingDelaySeconds: number
  /**
   * A Litestream configuration file (TRELLIS_LITESTREAM_CONFIG, docs/backup.md): `serve` runs `litestream replicate`
   * on it beside itself and leaves restarting the WAL to Litestream. Null: no continuous replication.
   */
  litestreamConfig: string | null
  /** Where the `litestream` executable is (TRELLIS_LITESTREAM_BIN); undefined: looked for (src/lib/litestream.ts). */
  litestreamBin: string | undefined
  /** Free space (bytes) below which /readyz answers `storage_full` (SQLite: the data directory's filesystem). */
  readyMinFreeBytes: number
  /**
   * Run event streams (SSE) this instance keeps open at most, and per user — every token and console session of the
   * user together (docs/workflows.md "Run events (SSE)"); a project holds at most half of `eventStreamsMax`.
   */
  eventStreamsMax: number
  eventStreamsPerUser: number
  /** A quiet event stream writes a heartbeat comment this often (ms). */
  eventHeartbeatMs: number
}

export interface MailConfig {
  /** TRELLIS_SMTP_URL: `smtp://user:password@host:587`, `smtps://…`. Never logged, printed or stored (it may hold a password). */
  smtpUrl: string
  /** TRELLIS_MAIL_FROM: the From header, `trellis@example.com` or `Trellis <trellis@example.com>`. */
  from: string
  /** The from-address's domain: the right side of every `Message-ID`. */
  domain: string
  /** The first wait between a message's attempts (TRELLIS_MAIL_RETRY_MS); later ones double, up to 120 times it. */
  retryMs: number
  /** How long one attempt may take (TRELLIS_SMTP_TIMEOUT_SECONDS, in ms). */
  timeoutMs: number
}

export interface OidcConfig {
  issuer: string
  clientId: string
  /** Absent for a public client (PKCE only). Never logged. */
  clientSecret: string | undefined
  /** Create unknown users on their first SSO sign-in. */
  autoCreate: boolean
}

/**
 * The settings a command-line flag can set, each with its environment variable and default: the one table that
 * loadConfig reads and every command's `--help` prints.
 */
export const FLAG_SETTINGS = {
  data: { env: 'TRELLIS_DATA_DIR', default: './data' },
  'database-url': { env: 'TRELLIS_DATABASE_URL', default: 'the embedded SQLite database DIR/trellis.db' },
  host: { env: 'TRELLIS_HOST', default: '127.0.0.1' },
  port: { env: 'TRELLIS_PORT', default: '8080' },
  'base-url': { env: 'TRELLIS_BASE_URL', default: 'http://HOST:PORT' },
  'oidc-issuer': { env: 'TRELLIS_OIDC_ISSUER', default: 'the apply file\'s sso.issuer, else no SSO' },
  'oidc-client-id': { env: 'TRELLIS_OIDC_CLIENT_ID', default: 'the apply file\'s sso.clientId' },
  'oidc-client-secret-file': { env: 'TRELLIS_OIDC_CLIENT_SECRET_FILE', default: 'TRELLIS_OIDC_CLIENT_SECRET, else a public client (PKCE only)' },
  'oidc-auto-create': { env: 'TRELLIS_OIDC_AUTO_CREATE', default: 'false' },
  'audit-checkpoint-every': { env: 'TRELLIS_AUDIT_CHECKPOINT_EVERY', default: '1000' },
  'audit-checkpoint-seconds': { env: 'TRELLIS_AUDIT_CHECKPOINT_SECONDS', default: '300' },
  'audit-witness-dir': { env: 'TRELLIS_AUDIT_WITNESS_DIR', default: 'none' },
  'audit-witness-url': { env: 'TRELLIS_AUDIT_WITNESS_URL', default: 'none' },
} as const

/**
 * 1 MiB: room for every documented maximum of one request, e.g. a note whose content holds its 65,536 characters
 * even if each one is escaped to six bytes (`\u0001`), plus every other field at its maximum (about 400 KB).
 */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

/**
 * 64 MiB: /readyz's floor of free space. Room for a WAL that grows between checkpoints under load (it is
 * checkpointed at 16 MB) several times over, so an instance is taken out of rotation before writes start failing.
 */
export const DEFAULT_READY_MIN_FREE_MB = 64

/**
 * The executor's share of a busy turn (TRELLIS_EXECUTOR_SHARE, %): at 50 its claims and step groups commit for 2 ms per
 * turn beside HTTP's 2 ms request slice (src/http/turn-slices.ts); docs/workflows.md "Executor" states the trade.
 */
export const DEFAULT_EXECUTOR_SHARE_PERCENT = 50

/**
 * Executor workers by default (TRELLIS_EXECUTOR_CONCURRENCY): runs executed at once. On PostgreSQL each statement of
 * a run is a round trip and a claim a transaction of its own, so a run spends much of its time waiting on the
 * network: twice the workers keep the database busy meanwhile (docs/workflows.md "Executor").
 */
export const DEFAULT_EXECUTOR_CONCURRENCY = { sqlite: 4, postgres: 8 } as const

/**
 * Live tokens one user may hold by default (TRELLIS_LIVE_TOKENS_PER_USER): room for a token per integration and a
 * rotation under way for each, while a member cannot mint tokens without end.
 */
export const DEFAULT_LIVE_TOKENS_PER_USER = 100

/** Finished runs are kept 30 days by default (TRELLIS_RUN_RETENTION). */
export const DEFAULT_RUN_RETENTION = '30d'

/** Milliseconds in each unit a duration setting may use. */
const DURATION_UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** A retention is between a second and 100 years (36,500 days). */
const LONGEST_RETENTION_MS = 36_500 * DURATION_UNITS.d!

/** Flags a command may pass; each maps to one env variable. */
export type ConfigFlags = { -readonly [K in keyof typeof FLAG_SETTINGS]?: string }

export interface ConfigOptions {
  /**
   * The base URL a running `serve` recorded for this data directory: used when neither `--base-url` nor
   * TRELLIS_BASE_URL is given, before the host/port default (the commands that print URLs pass it; serve does not).
   */
  servedBaseUrl?: (dataDir: string) => string | undefined
  /** The apply file's SSO settings (`sso:`), read from the database by `serve`: the lowest layer. */
  storedSso?: StoredSso | null
}

/** The identity provider an apply file stored (`sso:`), below flags and environment variables. No secret. */
export interface StoredSso {
  issuer: string
  clientId: string
  autoCreate?: boolean
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>

/**
 * PostgreSQL connections each instance keeps open at most (TRELLIS_DATABASE_POOL overrides): node-postgres's and
 * pg-boss's default too. Past about twice the database's cores, connections busy at once only cost the database CPU
 * (docs/scaling-out.md, "A reference deployment").
 */
export const DEFAULT_DATABASE_POOL = 10

/**
 * The cost new password hashes are made at in this process (src/modules/users/service.ts `usePasswordHashing`): the
 * production cost, unless TRELLIS_TEST_WEAK_PASSWORD_HASHES is `1`, which only the test suite sets on the processes
 * it starts (docs/development.md "Password hashes in tests"); never set it on a deployment.
 */
export function passwordHashingOf(env: Env = process.env): 'production' | 'weak-for-tests' {
  return env.TRELLIS_TEST_WEAK_PASSWORD_HASHES === '1' ? 'weak-for-tests' : 'production'
}

export function loadConfig(flags: ConfigFlags = {}, env: Env = process.env, options: ConfigOptions = {}): Config {
  const pick = (name: keyof typeof FLAG_SETTINGS) => flagSetting(flags, env, name)
  const host = pick('host') ?? FLAG_SETTINGS.host.default
  const port = integerSetting('--port / TRELLIS_PORT', pick('port'), Number(FLAG_SETTINGS.port.default), 0, 65535)
  const logLevel = (nonEmpty(env.TRELLIS_LOG_LEVEL) ?? 'info') as LogLevel
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`TRELLIS_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`)
  }
  const dataDir = resolve(pick('data') ?? FLAG_SETTINGS.data.default)
  const baseUrl = pick('base-url') ?? options.servedBaseUrl?.(dataDir) ?? `http://${urlHost(host)}:${port}`
  if (!/^https?:\/\/[^/]+/i.test(baseUrl)) throw new ConfigError('--base-url / TRELLIS_BASE_URL must be an http(s) URL')
  const databaseUrl = pick('database-url') ?? null
  if (databaseUrl !== null && !/^postgres(ql)?:\/\/./i.test(databaseUrl)) {
    throw new ConfigError('--database-url / TRELLIS_DATABASE_URL must be a postgres:// or postgresql:// URL')
  }
  const databaseListenUrl = nonEmpty(env.TRELLIS_DATABASE_LISTEN_URL) ?? null
  if (databaseListenUrl !== null && (databaseUrl === null || !/^postgres(ql)?:\/\/./i.test(databaseListenUrl))) {
    throw new ConfigError('TRELLIS_DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL, and goes with --database-url / TRELLIS_DATABASE_URL')
  }
  const litestreamConfig = nonEmpty(env.TRELLIS_LITESTREAM_CONFIG)
  if (litestreamConfig !== undefined && databaseUrl !== null) {
    throw new ConfigError('TRELLIS_LITESTREAM_CONFIG replicates the SQLite file; with --database-url / TRELLIS_DATABASE_URL archive PostgreSQL\'s WAL instead (docs/backup.md)')
  }
  return {
    dataDir,
    databaseUrl,
    databasePoolSize: integerSetting('TRELLIS_DATABASE_POOL', env.TRELLIS_DATABASE_POOL, DEFAULT_DATABASE_POOL, 1, 1000),
    databaseListenUrl,
    host,
    port,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    secretFromEnv: nonEmpty(env.TRELLIS_SECRET),
    webhookRatePerMinute: integerSetting('TRELLIS_WEBHOOK_RATE_PER_MIN', env.TRELLIS_WEBHOOK_RATE_PER_MIN, 60, 1),
    auditCheckpointEvery: integerSetting('--audit-checkpoint-every / TRELLIS_AUDIT_CHECKPOINT_EVERY', pick('audit-checkpoint-every'), 1000, 1, 10_000_000),
    auditCheckpointSeconds: integerSetting('--audit-checkpoint-seconds / TRELLIS_AUDIT_CHECKPOINT_SECONDS', pick('audit-checkpoint-seconds'), 300, 1, 86_400),
    auditWitnessDir: auditWitnessDirSetting(pick('audit-witness-dir'), dataDir),
    auditWitnessUrl: auditWitnessUrlSetting(pick('audit-witness-url')),
    auditWitnessLeaseMs: integerSetting('TRELLIS_AUDIT_WITNESS_LEASE_SECONDS', env.TRELLIS_AUDIT_WITNESS_LEASE_SECONDS, CALLBACK_LEASE_MS / 1000, 1, 3600) * 1000,
    tokenRotationDays: {
      productionDays: integerSetting('TRELLIS_TOKEN_ROTATION_DAYS_PRODUCTION', env.TRELLIS_TOKEN_ROTATION_DAYS_PRODUCTION, 90, 1, 36_500),
      developmentDays: integerSetting('TRELLIS_TOKEN_ROTATION_DAYS_DEVELOPMENT', env.TRELLIS_TOKEN_ROTATION_DAYS_DEVELOPMENT, 180, 1, 36_500),
    },
    liveTokensPerUser: integerSetting('TRELLIS_LIVE_TOKENS_PER_USER', env.TRELLIS_LIVE_TOKENS_PER_USER, DEFAULT_LIVE_TOKENS_PER_USER, 1, 100_000),
    apiRatePerMinute: integerSetting('TRELLIS_API_RATE_PER_MIN', env.TRELLIS_API_RATE_PER_MIN, 60, 1),
    apiRatePerHour: integerSetting('TRELLIS_API_RATE_PER_HOUR', env.TRELLIS_API_RATE_PER_HOUR, 1000, 1),
    apiRatePerDay: integerSetting('TRELLIS_API_RATE_PER_DAY', env.TRELLIS_API_RATE_PER_DAY, 10000, 1),
    executorConcurrency: integerSetting('TRELLIS_EXECUTOR_CONCURRENCY', env.TRELLIS_EXECUTOR_CONCURRENCY, DEFAULT_EXECUTOR_CONCURRENCY[databaseUrl === null ? 'sqlite' : 'postgres'], 0, 256),
    executorSharePercent: integerSetting('TRELLIS_EXECUTOR_SHARE', env.TRELLIS_EXECUTOR_SHARE, DEFAULT_EXECUTOR_SHARE_PERCENT, 1, 90),
    executorLeaseMs: integerSetting('TRELLIS_EXECUTOR_LEASE_SECONDS', env.TRELLIS_EXECUTOR_LEASE_SECONDS, 30, 1, 3600) * 1000,
    logLevel,
    maxBodyBytes: integerSetting('TRELLIS_MAX_BODY_BYTES', env.TRELLIS_MAX_BODY_BYTES, DEFAULT_MAX_BODY_BYTES, 1024, 64 * 1024 * 1024),
    logRetentionDays: nonEmpty(env.TRELLIS_LOG_RETENTION_DAYS)
      ? integerSetting('TRELLIS_LOG_RETENTION_DAYS', env.TRELLIS_LOG_RETENTION_DAYS, 0, 1, 36_500)
      : null,
    idempotencyKeyWindowMs: integerSetting('TRELLIS_IDEMPOTENCY_KEY_HOURS', env.TRELLIS_IDEMPOTENCY_KEY_HOURS, 24, 1, 8760) * 3_600_000,
    runRetentionMs: retentionSetting('TRELLIS_RUN_RETENTION', env.TRELLIS_RUN_RETENTION, DEFAULT_RUN_RETENTION),
    recordRetentionDays: integerSetting('TRELLIS_RECORD_RETENTION_DAYS', env.TRELLIS_RECORD_RETENTION_DAYS, 30, 1, 36_500),
    httpAllow: allowListSetting(env.TRELLIS_HTTP_ALLOW),
    httpAllowEntries: nonEmpty(env.TRELLIS_HTTP_ALLOW) === undefined ? null : allowListEntries(env.TRELLIS_HTTP_ALLOW!),
    callbackRetryMs: integerSetting('TRELLIS_CALLBACK_RETRY_MS', env.TRELLIS_CALLBACK_RETRY_MS, DEFAULT_CALLBACK_RETRY_MS, 1, 60_000),
    oidc: oidcConfig(flags, env, options.storedSso ?? null),
    mail: mailConfig(env),
    trustProxy: trustedProxies(env.TRELLIS_TRUST_PROXY),
    dbBusyWaitMs: integerSetting('TRELLIS_DB_BUSY_WAIT_MS', env.TRELLIS_DB_BUSY_WAIT_MS, 3000, 0, 60_000),
    walCheckpointMs: integerSetting('TRELLIS_WAL_CHECKPOINT_MS', env.TRELLIS_WAL_CHECKPOINT_MS, 250, 10, 60_000),
    databaseLongTransactionSeconds: integerSetting('TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS', env.TRELLIS_DATABASE_LONG_TRANSACTION_SECONDS, 60, 1, 86_400),
    listingDelaySeconds: integerSetting('TRELLIS_LISTING_DELAY_SECONDS', env.TRELLIS_LISTING_DELAY_SECONDS, 10, 1, 86_400),
    litestreamConfig: litestreamConfig === undefined ? null : resolve(litestreamConfig),
    litestreamBin: nonEmpty(env.TRELLIS_LITESTREAM_BIN),
    readyMinFreeBytes: integerSetting('TRELLIS_READY_MIN_FREE_MB', env.TRELLIS_READY_MIN_FREE_MB, DEFAULT_READY_MIN_FREE_MB, 1, 1024 * 1024) * 1024 * 1024,
    eventStreamsMax: integerSetting('TRELLIS_EVENT_STREAMS_MAX', env.TRELLIS_EVENT_STREAMS_MAX, 5000, 1, 100_000),
    eventStreamsPerUser: integerSetting('TRELLIS_EVENT_STREAMS_PER_USER', env.TRELLIS_EVENT_STREAMS_PER_USER, 50, 1, 100_000),
    eventHeartbeatMs: integerSetting('TRELLIS_EVENT_HEARTBEAT_SECONDS', env.TRELLIS_EVENT_HEARTBEAT_SECONDS, 15, 1, 300) * 1000,
  }
}

/** A setting a flag can set: the flag, else its environment variable (FLAG_SETTINGS), else undefined. */
function flagSetting(flags: ConfigFlags, env: Env, name: keyof typeof FLAG_SETTINGS): string | undefined {
  return flags[name] ?? nonEmpty(env[FLAG_SETTINGS[name].env])
}

function allowListSetting(raw: string | undefined): AllowList {
  try {
    return parseAllowList(raw ?? '')
  } catch (error) {
    if (error instanceof AllowListError) throw new ConfigError(`TRELLIS_HTTP_ALLOW: ${error.message}`)
    throw error
  }
}

/**
 * The witness directory, resolved: refused inside the data directory (a witness that goes with the database when it is
 * copied, restored or wiped witnesses nothing). Whether it is writable is checked when `serve` starts.
 */
function auditWitnessDirSetting(raw: string | undefined, dataDir: string): string | null {
  if (raw === undefined) return null
  const dir = resolve(raw)
  const inside = relative(realPathOrSelf(dataDir), realPathOrSelf(dir))
  if (inside === '' || (!inside.startsWith('..') && !isAbsolute(inside))) {
    throw new ConfigError(`--audit-witness-dir / TRELLIS_AUDIT_WITNESS_DIR must lie outside the data directory (${dataDir}), got ${dir}`)
  }
  return dir
}

function auditWitnessUrlSetting(raw: string | undefined): string | null {
  if (raw === undefined) return null
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConfigError(`--audit-witness-url / TRELLIS_AUDIT_WITNESS_URL must be an http or https URL, got "${raw}"`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new ConfigError('--audit-witness-url / TRELLIS_AUDIT_WITNESS_URL must be an http or https URL')
  if (url.username !== '' || url.password !== '') throw new ConfigError('--audit-witness-url / TRELLIS_AUDIT_WITNESS_URL must not hold a user name or password (the signature authenticates each call)')
  return url.href
}

/** The path with its symbolic links resolved, as far as it exists (a directory not made yet is compared as written). */
function realPathOrSelf(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

/** E-mail when TRELLIS_SMTP_URL is set (TRELLIS_MAIL_FROM then required); no message quotes the URL. */
function mailConfig(env: Env): MailConfig | null {
  const smtpUrl = nonEmpty(env.TRELLIS_SMTP_URL)
  if (smtpUrl === undefined) return null
  const problem = smtpUrlProblem(smtpUrl)
  if (problem) throw new ConfigError(`TRELLIS_SMTP_URL ${problem}`)
  const fromText = nonEmpty(env.TRELLIS_MAIL_FROM)
  if (fromText === undefined) throw new ConfigError('TRELLIS_SMTP_URL needs TRELLIS_MAIL_FROM: the address mail is sent from')
  const from = parseMailFrom(fromText)
  if ('problem' in from) throw new ConfigError(`TRELLIS_MAIL_FROM ${from.problem}`)
  return {
    smtpUrl,
    from: from.from,
    domain: from.domain,
    retryMs: integerSetting('TRELLIS_MAIL_RETRY_MS', env.TRELLIS_MAIL_RETRY_MS, DEFAULT_MAIL_RETRY_MS, 1, 3_600_000),
    timeoutMs: integerSetting('TRELLIS_SMTP_TIMEOUT_SECONDS', env.TRELLIS_SMTP_TIMEOUT_SECONDS, DEFAULT_SMTP_TIMEOUT_SECONDS, 1, 600) * 1000,
  }
}

/** Each setting: flag > environment variable > the apply file's `sso:` > off. */
function oidcConfig(flags: ConfigFlags, env: Env, stored: StoredSso | null): OidcConfig | null {
  const issuer = flagSetting(flags, env, 'oidc-issuer') ?? stored?.issuer
  const clientId = flagSetting(flags, env, 'oidc-client-id') ?? stored?.clientId
  if (issuer === undefined && clientId === undefined) return null
  if (issuer === undefined || clientId === undefined) {
    throw new ConfigError('SSO needs both --oidc-issuer / TRELLIS_OIDC_ISSUER and --oidc-client-id / TRELLIS_OIDC_CLIENT_ID')
  }
  const problem = issuerProblem(issuer)
  if (problem) throw new ConfigError(`--oidc-issuer / TRELLIS_OIDC_ISSUER ${problem}`)
  const autoCreate = flagSetting(flags, env, 'oidc-auto-create')
  return {
    issuer,
    clientId,
    clientSecret: oidcClientSecret(flags, env),
    autoCreate: booleanSetting('--oidc-auto-create / TRELLIS_OIDC_AUTO_CREATE', autoCreate, stored?.autoCreate ?? false),
  }
}

/**
 * The client secret: never a flag's literal value (it would show in the process list) — `--oidc-client-secret-file`
 * names a file holding it (a Docker or systemd credential), else TRELLIS_OIDC_CLIENT_SECRET, else
 * TRELLIS_OIDC_CLIENT_SECRET_FILE. Surrounding whitespace (the file's last newline) is not part of it.
 */
function oidcClientSecret(flags: ConfigFlags, env: Env): string | undefined {
  const file = flags['oidc-client-secret-file']
  if (file === undefined) {
    const literal = nonEmpty(env.TRELLIS_OIDC_CLIENT_SECRET)
    if (literal !== undefined) return literal
  }
  const path = file ?? nonEmpty(env.TRELLIS_OIDC_CLIENT_SECRET_FILE)
  if (path === undefined) return undefined
  let secret: string
  try {
    secret = readFileSync(path, 'utf8').trim()
  } catch (error) {
    throw new ConfigError(`--oidc-client-secret-file / TRELLIS_OIDC_CLIENT_SECRET_FILE: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  if (secret === '') throw new ConfigError(`--oidc-client-secret-file / TRELLIS_OIDC_CLIENT_SECRET_FILE: ${path} is empty`)
  return secret
}

/** What is wrong with an issuer URL, or null (shared with the apply file's `sso.issuer`). */
export function issuerProblem(issuer: string): string | null {
  let url: URL
  try {
    url = new URL(issuer)
  } catch {
    return `must be a URL, got "${issuer}"`
  }
  // Plain http would let anyone on the path forge identities: only for a provider on this machine (tests, dev).
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    return 'must be an https URL (http only for localhost)'
  }
  return null
}

function booleanSetting(name: string, raw: string | undefined, fallback: boolean): boolean {
  const text = nonEmpty(raw)?.toLowerCase()
  if (text === undefined) return fallback
  if (['true', '1', 'on', 'yes'].includes(text)) return true
  if (['false', '0', 'off', 'no'].includes(text)) return false
  throw new ConfigError(`${name} must be true or false, got "${raw}"`)
}

/** Comma-separated addresses, CIDR ranges (or address/netmask) and `loopback`, `linklocal`, `uniquelocal`. */
function trustedProxies(raw: string | undefined): string[] {
  const list = (nonEmpty(raw) ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
  try {
    if (list.length > 0) proxyaddr.compile(list)
  } catch (error) {
    throw new ConfigError(
      `TRELLIS_TRUST_PROXY must list IP addresses, CIDR ranges or loopback, linklocal, uniquelocal (comma-separated): ${(error as Error).message}`,
    )
  }
  return list
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value.trim()
}

function integerSetting(name: string, raw: string | undefined, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const text = nonEmpty(raw)
  if (text === undefined) return fallback
  if (!/^\d+$/.test(text)) throw new ConfigError(`${name} must be a whole number, got "${text}"`)
  const value = Number(text)
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`)
  return value
}

/** A whole number and a unit — `90s`, `15m`, `12h`, `30d` — in ms; null when `text` is not one. */
export function durationMs(text: string): number | null {
  const match = /^(\d+)\s*([smhd])$/i.exec(text.trim())
  return match ? Number(match[1]) * DURATION_UNITS[match[2]!.toLowerCase()]! : null
}

/**
 * A retention as a whole number and a unit — `90s`, `15m`, `12h`, `30d` — in ms (a second to 100 years), or null for
 * `off` (keep forever). A bare number or `0` is refused: the unit, or `off`, must be said.
 */
function retentionSetting(name: string, raw: string | undefined, fallback: string): number | null {
  const text = nonEmpty(raw) ?? fallback
  if (text.toLowerCase() === 'off') return null
  const ms = durationMs(text)
  if (ms === null) throw new ConfigError(`${name} must be a whole number with a unit (s, m, h or d: 90s, 12h, 30d) or off, got "${text}"`)
  if (ms < DURATION_UNITS.s! || ms > LONGEST_RETENTION_MS) throw new ConfigError(`${name} must be between 1s and 36500d, or off, got "${text}"`)
  return ms
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1'
  return host.includes(':') ? `[${host}]` : host
}
