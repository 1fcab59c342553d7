import { servingRequestArrivedAt } from '../lib/request-arrival.ts'
import { createApp } from '../app.ts'
import { createDeps } from '../deps.ts'
import { CallbackDelivery } from '../executor/callback-delivery.ts'
import { MailDelivery } from '../executor/mail-delivery.ts'
import { mailSettingsOf } from '../modules/mail/service.ts'
import { Executor } from '../executor/executor.ts'
import { scheduleRetention } from '../modules/admin-logs/retention.ts'
import { scheduleHistoryRetention } from '../modules/runs/history.ts'
import { describeDatabase, openConfiguredStore } from '../db/connect.ts'
import { readSnapshot } from '../db/read.ts'
import { systemClock } from '../lib/clock.ts'
import { createLogger } from '../lib/logger.ts'
import { otlpTracesEndpoint, startTracing, stopTracing, traceRequests } from '../lib/tracing.ts'
import { ensurePrivateDir, octal } from '../lib/private-dir.ts'
import { createMetrics } from '../lib/metrics.ts'
import { OutboundClient } from '../lib/outbound/client.ts'
import { OutboundAllowCache } from '../modules/instance/outbound-allow.ts'
import { loadInstanceSecret } from '../lib/secret.ts'
import { raiseParserHeaderLimit } from '../http/request-head.ts'
import { withRequestLog } from '../http/request-log.ts'
import { shareOfTurnMs, TurnSlices } from '../http/turn-slices.ts'
import { sendLateResponsesWhole } from '../http/late-response.ts'
import { WORKER_ENTRYPOINTS } from '../worker-entrypoints.ts'
import { acceptRequest } from '../http/server-request.ts'
import { isEventStream } from '../http/event-stream.ts'
import { SetupGate } from '../modules/setup/service.ts'
import { countUsers } from '../modules/users/service.ts'
import { recordServedBaseUrl } from '../lib/served-base-url.ts'
import { readStoredSso } from '../modules/auth/oidc-settings.ts'
import { databasePath } from '../db/sqlite/open.ts'
import { join } from 'node:path'
import { assertReplicates, findLitestream, LITESTREAM_PID_FILE, LitestreamError, type Replication, startReplication } from '../lib/litestream.ts'
import type { Config } from '../config.ts'
import { CommandError, configFrom, type Flags, type Io, KEEP_RUNNING, parseFlags, UsageError } from './command.ts'
import { auditSigningKey } from '../lib/audit-key.ts'
import { witnessDirProblem } from '../lib/audit-witness-file.ts'
import { WitnessDelivery } from '../executor/witness-delivery.ts'
import { auditWitnessesOf, scheduleCheckpoints } from '../modules/audit/checkpoints.ts'

/**
 * How long a graceful stop waits for in-flight requests, and (at the same time) for the executor's running
 * steps. Under `docker stop`'s default 10 s, with room for the executor's last second and the checkpoint.
 */
export const SHUTDOWN_GRACE_MS = 8_000

/**
 * Seconds a connection may stay silent in mid-request before Bun closes it: a body that stops arriving (less than
 * 16 KB a second), an answer its client stops reading, a handler that has not answered. Bun's default, stated here so
 * that a Bun upgrade cannot change it unseen. A connection that has not sent a whole request head is closed after Bun's
 * own fixed 10 s whatever this says. Above the longest wait a request may spend in the server (a write waiting for a
 * lock, TRELLIS_DB_BUSY_WAIT_MS, default 3 s; a refused login's delay, at most 2 s).
 */
export const HTTP_IDLE_TIMEOUT_SECONDS = 10

/** `trellis serve` (./serve-command.ts declares it): migrate, then serve until a signal stops the process. */
export async function serve(argv: string[], io: Io, flags: Flags): Promise<number> {
  const parsed = parseFlags(argv, flags)
  const startConfig = configFrom(parsed)
  // A witness directory that cannot be written is a configuration error, found before anything starts.
  const witnessProblem = startConfig.auditWitnessDir === null ? null : witnessDirProblem(startConfig.auditWitnessDir)
  if (witnessProblem !== null) throw new UsageError(`--audit-witness-dir / TRELLIS_AUDIT_WITNESS_DIR: ${witnessProblem}`)
  const logger = createLogger(startConfig.logLevel)
  // Off unless the OTEL_* variables name an endpoint: then the SDK loads, before anything that records a span.
  if (await startTracing(process.env, logger)) logger.info('tracing on: exporting OTLP traces', { endpoint: otlpTracesEndpoint(process.env) })
  const dataDir = ensurePrivateDir(startConfig.dataDir)
  if (dataDir.kind === 'narrowed') logger.info('data directory narrowed to 0700 (its owner only)', { dataDir: startConfig.dataDir, was: octal(dataDir.was) })
  if (dataDir.kind === 'left-open') {
    logger.warn(`data directory is open to other users and not ours to change: run chmod 700 ${startConfig.dataDir}`, { dataDir: startConfig.dataDir, mode: octal(dataDir.mode) })
  }
  // Litestream's executable and configuration are checked before anything starts: a replica that would not be kept is
  // a failed start, not a log line.
  const litestream = startConfig.litestreamConfig === null ? null : litestreamSetup(startConfig.litestreamConfig, startConfig)
  // Migrating may wait in the driver for a CLI's lock (nothing to serve yet); from then on no request waits there.
  const store = await openConfiguredStore(startConfig)
  // The apply file's SSO settings are the lowest layer of the configuration: known once the database is open.
  const stored = await readSnapshot(store, startState())
  const config = configFrom(parsed, { storedSso: stored.sso })
  const metrics = createMetrics({ processMetrics: true })
  // From here on no request waits for a lock in the driver; the store's own upkeep (WAL checkpoints) starts.
  let replication: Replication | null = null
  const upkeep = store.serve(
    {
      ...config,
      walCheckpointWorker: WORKER_ENTRYPOINTS.walCheckpoint,
      walRestarts: litestream ? 'litestream' : 'trellis',
      walReplicating: () => replication?.running() === true,
    },
    logger,
    metrics,
  )
  // Started once the server's own checkpoints have stopped restarting the WAL (and holding the serving lock, so a
  // Litestream left by a killed server is this data directory's): Litestream sees every frame from here on.
  replication = litestream ? await startReplication(litestream.bin, litestream.config, databasePath(config.dataDir), join(config.dataDir, LITESTREAM_PID_FILE), logger) : null
  const secret = loadInstanceSecret(config.dataDir, config.secretFromEnv)
  const setup = stored.noUsers ? SetupGate.open() : undefined
  // `http` steps and completion callbacks go out through one client: the same destinations are refused. The
  // allow-list is asked at each request (the console's changes need no restart), and shared with the routes.
  const outboundAllow = new OutboundAllowCache(store, config)
  const outbound = new OutboundClient({ allow: () => outboundAllow.current() })
  // The executor's share of a turn while HTTP is busy; alone it takes every turn (docs/workflows.md "Executor").
  const slices = new TurnSlices()
  const shareMs = shareOfTurnMs(config.executorSharePercent)
  // Task steps and deadlines queue their mail as the routes do: one set of settings for both.
  const mailSettings = mailSettingsOf(config, secret)
  const executor = new Executor({
    store,
    clock: systemClock,
    logger,
    mail: mailSettings,
    concurrency: config.executorConcurrency,
    leaseMs: config.executorLeaseMs,
    outbound,
    shareMs: () => (slices.busy ? shareMs : Number.POSITIVE_INFINITY),
    metrics,
  })
  const callbacks = new CallbackDelivery({ store, clock: systemClock, logger, secret, outbound, retryBaseMs: config.callbackRetryMs })
  const auditKey = auditSigningKey(secret)
  const witness = new WitnessDelivery({
    store, clock: systemClock, logger, secret, outbound, dir: config.auditWitnessDir, url: config.auditWitnessUrl, retryBaseMs: config.callbackRetryMs,
    leaseMs: config.auditWitnessLeaseMs,
  })
  const deps = createDeps({ config, store, clock: systemClock, logger, secret, metrics, setupGate: setup?.gate, executor, mail: mailSettings, outboundAllow })
  const app = createApp(deps)
  const mail = config.mail && deps.mail ? new MailDelivery({ store, clock: systemClock, logger, metrics, mail: config.mail, sealKey: deps.mail.sealKey }) : null
  raiseParserHeaderLimit()
  // The request's span is outermost: the request's log line is written inside it and carries its ids.
  const handle = traceRequests(withRequestLog((request) => slices.run(request, (admitted) => app.handle(admitted)), logger))
  const server = Bun.serve({
    hostname: config.host,
    port: config.port,
    // Our own limit answers with the JSON 413 (it stops reading at the limit); Bun's is only a far backstop.
    maxRequestBodySize: Math.max(config.maxBodyBytes * 16, 64 * 1024 * 1024),
    idleTimeout: HTTP_IDLE_TIMEOUT_SECONDS,
    // The peer address is only known here: `app.handle` gets the request alone. A large answer completed after its
    // request's dispatch is re-framed so that it leaves in two writes, not one per header part (../http/late-response.ts).
    fetch: sendLateResponsesWhole(async (request, bunServer: Bun.Server<undefined>) => {
      const arrived = performance.now()
      const response = await servingRequestArrivedAt(arrived, () => handle(acceptRequest(request, bunServer.requestIP(request)?.address)))
      // An event stream is quiet between events and heartbeats, and Bun's idle timeout would close it however often
      // it writes (measured: a stream writing every second was cut after twice the timeout): none for it.
      if (isEventStream(response)) bunServer.timeout(request, 0)
      return response
    }),
  })
  executor.start()
  // The owner names this instance's leases (runs.lease_owner): with several instances, which one holds a run.
  if (executor.enabled) logger.info('executor started', { owner: executor.owner, concurrency: config.executorConcurrency })
  callbacks.start()
  logger.info('callback delivery started', { owner: callbacks.owner })
  if (mail) {
    mail.start()
    logger.info('mail sending started', { owner: mail.owner, smtp: mail.server, from: config.mail!.from })
  } else {
    logger.info('no SMTP server (TRELLIS_SMTP_URL): no mail is sent; the console\'s inbox is the only channel')
  }
  witness.start()
  const witnesses = auditWitnessesOf(config)
  const checkpoints = scheduleCheckpoints(
    store, systemClock, logger, auditKey, { every: config.auditCheckpointEvery, seconds: config.auditCheckpointSeconds, witnesses }, () => witness.notify(),
  )
  logger.info('audit checkpoints signed', { kid: auditKey.publicJwk.kid, every: config.auditCheckpointEvery, seconds: config.auditCheckpointSeconds, witnesses })
  recordServedBaseUrl(config.dataDir, config.baseUrl)
  const retention = scheduleRetention(store, systemClock, logger, config.logRetentionDays, { key: auditKey, witnesses })
  const history = scheduleHistoryRetention(store, systemClock, logger, metrics, config)
  upkeep.startMaintenance()
  logger.info('listening', {
    url: `http://${server.hostname}:${server.port}`,
    dataDir: config.dataDir,
    database: describeDatabase(config.databaseUrl),
    baseUrl: config.baseUrl,
  })
  if (setup) {
    io.out(
      `\nTrellis has no users yet. Open this one-time link to create the first administrator:\n\n  ${config.baseUrl}/setup?token=${setup.token}\n`,
    )
  }
  let stopping = false
  // SIGTERM/SIGINT: stop accepting, let in-flight requests finish while the executor stops claiming and
  // finishes or gives back its steps and the callback worker its attempts (all bounded), checkpoint the WAL, exit 0.
  // A second signal stops at once.
  const stop = async (signal: string) => {
    if (stopping) {
      logger.warn('second signal: stopping at once', { signal })
      process.exit(1)
    }
    stopping = true
    logger.info('shutting down', { signal })
    try {
      retention?.stop()
      const checkpointsStopped = checkpoints.stop()
      const historyStopped = history.stop() // its batch under way commits before the store closes
      upkeep.stop()
      // Event streams end now (their clients reconnect, to another instance or after the restart): not in flight.
      await deps.runEvents.close()
      const requestsDone = server.stop().then(() => true) // closes the listener; resolves once no request is in flight
      const [drained] = await Promise.all([
        Promise.race([requestsDone, Bun.sleep(SHUTDOWN_GRACE_MS).then(() => false)]),
        executor.stop(SHUTDOWN_GRACE_MS),
        historyStopped,
        checkpointsStopped.then(() => witness.stop(SHUTDOWN_GRACE_MS)),
        callbacks.stop(SHUTDOWN_GRACE_MS),
        mail?.stop(SHUTDOWN_GRACE_MS),
      ])
      if (!drained) {
        logger.warn('requests still in flight after the grace period: closing their connections', { graceMs: SHUTDOWN_GRACE_MS })
        await server.stop(true)
      }
      const closed = await upkeep.close()
      // After the server's last commit: Litestream's last sync copies it to the replicas before it exits.
      await replication?.stop()
      logger.info('stopped', closed)
      await stopTracing() // the spans still buffered are exported before the process ends
      process.exit(0)
    } catch (error) {
      logger.error('shutdown failed', { error: (error as Error).stack ?? String(error) })
      process.exit(1)
    }
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  return KEEP_RUNNING
}

/** The `litestream` executable and a configuration that replicates this data directory's file, or exit 1 saying why not. */
function litestreamSetup(configFile: string, config: Config): { bin: string; config: string } {
  try {
    assertReplicates(configFile, databasePath(config.dataDir))
    return { bin: findLitestream(config.litestreamBin), config: configFile }
  } catch (error) {
    if (error instanceof LitestreamError) throw new CommandError(error.message)
    throw error
  }
}

/** What `serve` reads before it starts: the apply file's SSO settings, and whether the instance has any user yet. */
function* startState() {
  return { sso: yield* readStoredSso(), noUsers: (yield* countUsers()) === 0 }
}
