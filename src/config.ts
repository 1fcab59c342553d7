/** Configuration: command-line flags win over environment variables, which win over defaults (DESIGN §10). */
import { resolve } from 'node:path'
import { LOG_LEVELS, type LogLevel } from './lib/logger.ts'

export interface Config {
  dataDir: string
  host: string
  port: number
  baseUrl: string
  /** TRELLIS_SECRET when given; otherwise the instance secret lives in `<dataDir>/secret`. */
  secretFromEnv: string | undefined
  webhookRatePerMinute: number
  apiRatePerMinute: number
  apiRatePerHour: number
  apiRatePerDay: number
  executorConcurrency: number
  /** How long a claimed run stays owned without a heartbeat before another start may recover it. */
  executorLeaseMs: number
  logLevel: LogLevel
  maxBodyBytes: number
  /** Days of activity/admin logs to keep; null keeps them forever. */
  logRetentionDays: number | null
  /** How long a server write waits for another process's write lock before answering 503 database_busy. */
  dbBusyWaitMs: number
}

/** Flags a command may pass; each maps to one env variable. */
export interface ConfigFlags {
  data?: string
  host?: string
  port?: string
  'base-url'?: string
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>

export function loadConfig(flags: ConfigFlags = {}, env: Env = process.env): Config {
  const pick = (flag: string | undefined, name: string) => flag ?? nonEmpty(env[name])
  const host = pick(flags.host, 'TRELLIS_HOST') ?? '127.0.0.1'
  const port = integerSetting('--port / TRELLIS_PORT', pick(flags.port, 'TRELLIS_PORT'), 8080, 0, 65535)
  const logLevel = (nonEmpty(env.TRELLIS_LOG_LEVEL) ?? 'info') as LogLevel
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`TRELLIS_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`)
  }
  const baseUrl = pick(flags['base-url'], 'TRELLIS_BASE_URL') ?? `http://${urlHost(host)}:${port}`
  if (!/^https?:\/\/[^/]+/i.test(baseUrl)) throw new ConfigError('--base-url / TRELLIS_BASE_URL must be an http(s) URL')
  return {
    dataDir: resolve(pick(flags.data, 'TRELLIS_DATA_DIR') ?? './data'),
    host,
    port,
    baseUrl: baseUrl.replace(/\/+$/, ''),
    secretFromEnv: nonEmpty(env.TRELLIS_SECRET),
    webhookRatePerMinute: integerSetting('TRELLIS_WEBHOOK_RATE_PER_MIN', env.TRELLIS_WEBHOOK_RATE_PER_MIN, 60, 1),
    apiRatePerMinute: integerSetting('TRELLIS_API_RATE_PER_MIN', env.TRELLIS_API_RATE_PER_MIN, 60, 1),
    apiRatePerHour: integerSetting('TRELLIS_API_RATE_PER_HOUR', env.TRELLIS_API_RATE_PER_HOUR, 1000, 1),
    apiRatePerDay: integerSetting('TRELLIS_API_RATE_PER_DAY', env.TRELLIS_API_RATE_PER_DAY, 10000, 1),
    executorConcurrency: integerSetting('TRELLIS_EXECUTOR_CONCURRENCY', env.TRELLIS_EXECUTOR_CONCURRENCY, 4, 0, 256),
    executorLeaseMs: integerSetting('TRELLIS_EXECUTOR_LEASE_SECONDS', env.TRELLIS_EXECUTOR_LEASE_SECONDS, 30, 1, 3600) * 1000,
    logLevel,
    maxBodyBytes: integerSetting('TRELLIS_MAX_BODY_BYTES', env.TRELLIS_MAX_BODY_BYTES, 65536, 1024, 64 * 1024 * 1024),
    logRetentionDays: nonEmpty(env.TRELLIS_LOG_RETENTION_DAYS)
      ? integerSetting('TRELLIS_LOG_RETENTION_DAYS', env.TRELLIS_LOG_RETENTION_DAYS, 0, 1, 36_500)
      : null,
    dbBusyWaitMs: integerSetting('TRELLIS_DB_BUSY_WAIT_MS', env.TRELLIS_DB_BUSY_WAIT_MS, 3000, 0, 60_000),
  }
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

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1'
  return host.includes(':') ? `[${host}]` : host
}
