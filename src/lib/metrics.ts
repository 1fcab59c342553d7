/**
 * Prometheus metrics (prom-client) in one registry per app instance. Counters and the latency histogram are
 * updated as requests end (src/http/request-metrics.ts); the run and executor gauges are read when /metrics is
 * scraped, from the source the app binds with `observeRuns`.
 */
import type * as Prometheus from 'prom-client'

// prom-client's own parts, not its index: the index also loads the Pushgateway client (node:zlib, node:https,
// node:url) and the cluster aggregator, which Trellis never uses and which held megabytes of an idle server's memory
// (docs/performance.md, "Idle memory and the cold start").
const Registry = require('prom-client/lib/registry') as typeof Prometheus.Registry
const Counter = require('prom-client/lib/counter') as typeof Prometheus.Counter
const Gauge = require('prom-client/lib/gauge') as typeof Prometheus.Gauge
const Histogram = require('prom-client/lib/histogram') as typeof Prometheus.Histogram
/** One of prom-client's default metrics: it registers its gauges (or counters) on the registry. */
type DefaultMetric = (registry: Prometheus.Registry, config: { eventLoopMonitoringPrecision: number }) => void
/**
 * prom-client's default metrics (its collectDefaultMetrics list, same options) but `nodejs_heap_space_size_*`: Bun
 * answers its `v8.getHeapSpaceStatistics()` by walking the whole heap, and every scrape held the event loop for it
 * (136–165 ms for a 326 MB heap, 4 ms at start; docs/operations.md "Metrics and health"). `nodejs_heap_size_*` stays.
 */
const DEFAULT_METRICS: DefaultMetric[] = [
  require('prom-client/lib/metrics/processCpuTotal'),
  require('prom-client/lib/metrics/processStartTime'),
  require('prom-client/lib/metrics/osMemoryHeap'),
  require('prom-client/lib/metrics/processOpenFileDescriptors'),
  require('prom-client/lib/metrics/processMaxFileDescriptors'),
  require('prom-client/lib/metrics/eventLoopLag'),
  ...(typeof process.getActiveResourcesInfo === 'function' ? [require('prom-client/lib/metrics/processResources')] : []),
  require('prom-client/lib/metrics/processHandles'),
  require('prom-client/lib/metrics/processRequests'),
  require('prom-client/lib/metrics/heapSizeAndUsed'),
  require('prom-client/lib/metrics/version'),
  require('prom-client/lib/metrics/gc'),
]

/** What the run gauges show, read at scrape time. */
export interface RunsSample {
  /** Every status, zeros included (a series that vanishes reads as "no data", not as 0). */
  byStatus: Record<string, number>
  /** Runs a worker could take now: queued, and waiting ones whose time has come. */
  queueDepth: number
  /** How long the oldest of those has been due, in seconds (0 when none). */
  oldestQueuedAgeSeconds: number
  /** Executor workers running a step now (0 without an executor). */
  busyWorkers: number
  /** Every project with the runs this instance's executor runs of it now (its share of the workers). */
  runningByProject: { project: string; running: number }[]
  /** Due runs held back now: by their workflow's concurrency limit, and by this instance's fair share. */
  deferred: { workflowLimit: number; fairShare: number }
  /** Each workflow with record or note events: its events dispatched, runs started, events skipped and failed, on every instance. */
  workflowEvents?: { project: string; workflow: string; received: number; started: number; skipped: number; failed: number }[]
}

/** The server's group commits so far (src/db/write.ts), read at scrape time. */
export interface WritesSample {
  transactions: number
  writes: number
}

export interface MetricsOptions {
  /** Also the standard `process_*` and `nodejs_*` metrics (the server process; not every test app). */
  processMetrics?: boolean
}

export function createMetrics(options: MetricsOptions = {}) {
  const registry = new Registry()
  let sampleRuns: (() => RunsSample | Promise<RunsSample>) | undefined
  let sampleWrites: (() => WritesSample) | undefined
  let countEventStreams: (() => number) | undefined

  if (options.processMetrics) for (const metric of DEFAULT_METRICS) metric(registry, { eventLoopMonitoringPrecision: 10 })

  // One database sample per scrape, shared by the run gauges: a scrape calls every collect() in the same turn,
  // and the sample is dropped once that turn is over.
  let sampled: Promise<RunsSample> | undefined
  const sample = (): Promise<RunsSample | undefined> => {
    if (!sampleRuns) return Promise.resolve(undefined)
    if (!sampled) {
      sampled = Promise.resolve(sampleRuns())
      queueMicrotask(() => {
        sampled = undefined
      })
    }
    return sampled
  }

  const runs = new Gauge({
    name: 'trellis_runs',
    help: 'Workflow runs in the database, by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      for (const [status, count] of Object.entries((await sample())?.byStatus ?? {})) this.set({ status }, count)
    },
  })
  const queueDepth = new Gauge({
    name: 'trellis_queue_depth',
    help: 'Runs due for a worker now (queued, and waiting runs whose wait is over)',
    registers: [registry],
    async collect() {
      this.set((await sample())?.queueDepth ?? 0)
    },
  })
  const oldestQueuedAge = new Gauge({
    name: 'trellis_queue_oldest_age_seconds',
    help: 'How long the oldest due run has been waiting for a worker (0 when none)',
    registers: [registry],
    async collect() {
      this.set((await sample())?.oldestQueuedAgeSeconds ?? 0)
    },
  })
  const busyWorkers = new Gauge({
    name: 'trellis_executor_busy_workers',
    help: 'Executor workers running a step now',
    registers: [registry],
    async collect() {
      this.set((await sample())?.busyWorkers ?? 0)
    },
  })

  const runningByProject = new Gauge({
    name: 'trellis_executor_running_runs',
    help: "Runs this instance's executor runs now, by project (every project, zeros included)",
    labelNames: ['project'] as const,
    registers: [registry],
    async collect() {
      const runs = await sample()
      // Renamed or removed projects drop out: the series are the projects of this scrape.
      this.reset()
      for (const { project, running } of runs?.runningByProject ?? []) this.set({ project }, running)
    },
  })
  const deferredRuns = new Gauge({
    name: 'trellis_executor_deferred_runs',
    help: "Due runs held back now: by their workflow's concurrency limit (on every instance), or by this instance's fair share between projects",
    labelNames: ['reason'] as const,
    registers: [registry],
    async collect() {
      const deferred = (await sample())?.deferred ?? { workflowLimit: 0, fairShare: 0 }
      this.set({ reason: 'workflow_limit' }, deferred.workflowLimit)
      this.set({ reason: 'fair_share' }, deferred.fairShare)
    },
  })

  const workflowEvents = new Counter({
    name: 'trellis_workflow_events_total',
    help: 'Record and note events of each workflow that has some, on every instance (counted in the database): received (dispatched), started (a run), skipped (an active run on the record, the loop bound, runAs without rights), failed (could not be dispatched after its attempts)',
    labelNames: ['project', 'workflow', 'outcome'] as const,
    registers: [registry],
    async collect() {
      const counted = (await sample())?.workflowEvents
      if (!counted) return
      // Removed workflows drop out: the series are those of this scrape.
      this.reset()
      for (const { project, workflow, ...outcomes } of counted) {
        for (const [outcome, n] of Object.entries(outcomes)) this.inc({ project, workflow, outcome }, n)
      }
    },
  })

  const eventStreams = new Gauge({
    name: 'trellis_event_streams',
    help: 'Run event streams (SSE) open on this instance',
    registers: [registry],
    collect() {
      this.set(countEventStreams?.() ?? 0)
    },
  })

  // Counters read from the store's own tallies: set to the running total at each scrape.
  const fromTally = (read: (sample: WritesSample) => number) =>
    function (this: Prometheus.Counter) {
      const tally = sampleWrites?.()
      if (!tally) return
      this.reset()
      this.inc(read(tally))
    }
  const writeTransactions = new Counter({
    name: 'trellis_write_transactions_total',
    help: 'Write transactions committed by the server (one per group commit)',
    registers: [registry],
    collect: fromTally((tally) => tally.transactions),
  })
  const groupedWrites = new Counter({
    name: 'trellis_writes_total',
    help: 'Writes (one per changing request or executor step group) committed by those transactions',
    registers: [registry],
    collect: fromTally((tally) => tally.writes),
  })

  return {
    registry,
    /** Binds the write counters to this app's store. */
    observeWrites(source: () => WritesSample): void {
      sampleWrites = source
    },
    writeTransactions,
    groupedWrites,
    /** Binds the event streams gauge to this app's streams. */
    observeEventStreams(source: () => number): void {
      countEventStreams = source
    },
    eventStreams,
    workflowEvents,
    /** Binds the gauges to this app's database and executor. */
    observeRuns(source: () => RunsSample | Promise<RunsSample>): void {
      sampleRuns = source
    },
    /** Workflow schedules' ticks (src/executor/schedule-ticker.ts), by workflow id: those this instance worked on. */
    schedules: {
      ticks: new Counter({
        name: 'trellis_schedule_ticks_total',
        help: "Schedule ticks this instance finished, by workflow id (a tick resumed after a crash counts on the instance that finished it)",
        labelNames: ['workflow_id'] as const,
        registers: [registry],
      }),
      runsStarted: new Counter({
        name: 'trellis_schedule_runs_started_total',
        help: 'Runs schedule ticks started on this instance, by workflow id',
        labelNames: ['workflow_id'] as const,
        registers: [registry],
      }),
      recordsSkipped: new Counter({
        name: 'trellis_schedule_records_skipped_total',
        help: 'Records schedule ticks on this instance skipped because a run of the workflow was already active on them, by workflow id',
        labelNames: ['workflow_id'] as const,
        registers: [registry],
      }),
    },
    loginFailures: new Counter({
      name: 'trellis_login_failures_total',
      help: 'Failed password logins (never logged with the attempted password)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    httpRequests: new Counter({
      name: 'trellis_http_requests_total',
      help: 'HTTP requests answered, by method, route template and status',
      labelNames: ['method', 'route', 'status'] as const,
      registers: [registry],
    }),
    httpDuration: new Histogram({
      name: 'trellis_http_request_duration_seconds',
      help: 'Time to answer HTTP requests, by method and route template',
      labelNames: ['method', 'route'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    walCheckpoints: new Counter({
      name: 'trellis_wal_checkpoints_total',
      help: 'WAL checkpoints taken by the server (all on its timer, never inside a request), by mode and outcome',
      labelNames: ['mode', 'outcome'] as const,
      registers: [registry],
    }),
    runsPruned: new Counter({
      name: 'trellis_runs_pruned_total',
      help: 'Finished runs this instance deleted, with their steps and idempotency keys, past TRELLIS_RUN_RETENTION',
      registers: [registry],
    }),
    mailMessages: new Counter({
      name: 'trellis_mail_messages_total',
      help: 'Mail attempts this instance recorded, by outcome: sent, retry (not accepted yet, due again), failed (given up: see the log)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    oldestTransaction: new Gauge({
      name: 'trellis_database_oldest_transaction_seconds',
      help: 'PostgreSQL: how long the oldest transaction holding a transaction id anywhere in the cluster has been open (0: none)',
      registers: [registry],
    }),
    listLag: new Gauge({
      name: 'trellis_list_lag_seconds',
      help: 'PostgreSQL: how long the oldest row drawn for a list has waited unlisted, by list (0: every row drawn a sample ago is listed)',
      labelNames: ['list'] as const,
      registers: [registry],
    }),
    walBytes: new Gauge({
      name: 'trellis_wal_bytes',
      help: 'Size of the -wal file after the last timed checkpoint',
      registers: [registry],
    }),
    runs,
    queueDepth,
    oldestQueuedAge,
    busyWorkers,
    runningByProject,
    deferredRuns,
  }
}

export type Metrics = ReturnType<typeof createMetrics>
