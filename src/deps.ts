/**
 * The per-app objects every module receives (`AppDeps`), built once by `createDeps` in the composition root
 * (`serve`, and the tests' `testApp`): configuration, store, clock, logger, metrics, the instance secret, and the
 * objects that must be one per app however many modules use them — the auth decision (with its token lookup and
 * API rate limiter) and the counters every limit counts with.
 */
import type { Config } from './config.ts'
import type { Store } from './db/store.ts'
import type { Executor } from './executor/executor.ts'
import { TokenRateLimiter } from './lib/rate-limit.ts'
import type { Clock } from './lib/clock.ts'
import type { Logger } from './lib/logger.ts'
import type { RateCounters } from './lib/rate-counters.ts'
import type { Metrics } from './lib/metrics.ts'
import { CallerAuthenticator, TokenAuthenticator } from './modules/auth/service.ts'
import { RunEventHub } from './modules/run-events/hub.ts'
import { type MailSettings, mailSettingsOf } from './modules/mail/service.ts'
import type { SetupGate } from './modules/setup/service.ts'
import { OutboundAllowCache } from './modules/instance/outbound-allow.ts'

/** What the composition root provides; `createDeps` adds the per-app objects built from it. */
export interface DepsInput {
  config: Config
  store: Store
  clock: Clock
  logger: Logger
  /** The instance secret (signs webhook URLs). */
  secret: Buffer
  metrics: Metrics
  /** The in-process executor, when running (serve); routes wake it when they queue a run. */
  executor?: Executor
  /** Present while the instance has no users (first start). */
  setupGate?: SetupGate
  /**
   * Where the limits count (API per token, webhook buckets, login throttle); by default the store's own: this
   * process's memory on SQLite, the database on PostgreSQL so every instance shares one budget.
   */
  rateCounters?: RateCounters
  /** What queuing a mail needs, when the composition root made it already (serve: the executor shares it); else made here. */
  mail?: MailSettings | null
  /** The outbound allow-list in effect, when the composition root made it already (serve: the outbound client shares it); else made here. */
  outboundAllow?: OutboundAllowCache
}

export interface AppDeps extends DepsInput {
  /** The one auth decision every route family calls; `auth.tokens` is the app's token lookup. */
  auth: CallerAuthenticator
  rateCounters: RateCounters
  /** The run event streams open on this app (SSE); `serve` closes them first when it stops. */
  runEvents: RunEventHub
  /** What queuing a mail needs (src/modules/mail/service.ts `queueMail`); null without TRELLIS_SMTP_URL: no mail is sent. */
  mail: MailSettings | null
  /** The outbound allow-list in effect (callback URLs are checked against it; a change through the API is forgotten here). */
  outboundAllow: OutboundAllowCache
}

/** The app's dependencies, each per-app object built once. */
export function createDeps(input: DepsInput): AppDeps {
  const { config, store, clock } = input
  const rateCounters = input.rateCounters ?? store.rateCounters()
  const limits = { perMinute: config.apiRatePerMinute, perHour: config.apiRatePerHour, perDay: config.apiRatePerDay }
  const limiter = new TokenRateLimiter(clock, limits, rateCounters)
  return {
    ...input,
    rateCounters,
    mail: input.mail === undefined ? mailSettingsOf(config, input.secret) : input.mail,
    outboundAllow: input.outboundAllow ?? new OutboundAllowCache(store, config),
    auth: new CallerAuthenticator(store, clock, new TokenAuthenticator(store, clock), limiter, config.baseUrl),
    runEvents: new RunEventHub(store, clock, input.logger, {
      maxStreams: config.eventStreamsMax,
      maxStreamsPerUser: config.eventStreamsPerUser,
      heartbeatMs: config.eventHeartbeatMs,
    }),
  }
}
