import { createApp } from '../app.ts'
import { Executor } from '../executor/executor.ts'
import { scheduleRetention } from '../modules/admin-logs/retention.ts'
import { systemClock } from '../lib/clock.ts'
import { createLogger } from '../lib/logger.ts'
import { createMetrics } from '../lib/metrics.ts'
import { loadInstanceSecret } from '../lib/secret.ts'
import { withRequestLog } from '../http/request-log.ts'
import { SetupGate } from '../modules/setup/service.ts'
import { countUsers } from '../modules/users/service.ts'
import { type Command, configFrom, openMigrated, parseFlags } from './command.ts'

/** Signals -1 to main: the process keeps running until a signal stops it. */
export const KEEP_RUNNING = -1

export const serveCommand: Command = {
  summary: 'migrate, then serve the API, console and executor',
  usage: 'trellis serve [--host H] [--port P] [--data DIR] [--base-url URL]',
  async run(argv, io) {
    const parsed = parseFlags(argv, { host: { type: 'string' }, port: { type: 'string' }, 'base-url': { type: 'string' } })
    if (parsed.help) return io.out(this.usage), 0
    const config = configFrom(parsed)
    const logger = createLogger(config.logLevel)
    const store = openMigrated(config)
    const secret = loadInstanceSecret(config.dataDir, config.secretFromEnv)
    const setup = countUsers(store.db) === 0 ? SetupGate.open() : undefined
    const executor = new Executor({
      store,
      clock: systemClock,
      logger,
      concurrency: config.executorConcurrency,
      leaseMs: config.executorLeaseMs,
    })
    const app = createApp({ config, store, clock: systemClock, logger, secret, metrics: createMetrics(), setupGate: setup?.gate, executor })
    const server = Bun.serve({
      hostname: config.host,
      port: config.port,
      // Our own limit answers with the JSON 413 (it stops reading at the limit); Bun's is only a far backstop.
      maxRequestBodySize: Math.max(config.maxBodyBytes * 16, 64 * 1024 * 1024),
      fetch: withRequestLog((request) => app.handle(request), logger),
    })
    executor.start()
    const retention = scheduleRetention(store, systemClock, logger, config.logRetentionDays)
    logger.info('listening', { url: `http://${server.hostname}:${server.port}`, dataDir: config.dataDir, baseUrl: config.baseUrl })
    if (setup) {
      io.out(
        `\nTrellis has no users yet. Open this one-time link to create the first administrator:\n\n  ${config.baseUrl}/setup?token=${setup.token}\n`,
      )
    }
    let stopping = false
    const stop = async (signal: string) => {
      if (stopping) return
      stopping = true
      logger.info('shutting down', { signal })
      await server.stop()
      retention?.stop()
      await executor.stop()
      store.sqlite.run('PRAGMA wal_checkpoint(TRUNCATE)')
      store.close()
      process.exit(0)
    }
    process.on('SIGTERM', () => void stop('SIGTERM'))
    process.on('SIGINT', () => void stop('SIGINT'))
    return KEEP_RUNNING
  },
}
