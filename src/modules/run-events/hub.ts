/**
 * The live side of run events (docs/workflows.md "Run events (SSE)"): the open streams of this instance and how each learns of
 * new events. The table is the only source: a stream starts by reading it after its cursor (the `Last-Event-ID`, or
 * the start of its run, or the environment's newest event), then follows its environment's **feed** — one reader per
 * environment with open streams, woken after every commit that appended events to it (this process's, and on
 * PostgreSQL every instance's through LISTEN), and every heartbeat interval in case a wake-up was lost. The feed
 * reads the environment's events after the last one it read, once for all its streams, and offers them to each.
 *
 * Why nothing is lost: within an environment an event with a greater id never becomes readable before one with a
 * smaller id (src/db/run-events.ts), so "every event after id N" is exact for the feed and for a stream reading on its
 * own. Before each read what committed before it is made readable (`readListed`: on PostgreSQL, the events' watermark
 * moved over it), so a wake-up after a commit finds that commit's events. A stream reads on its own until a read of
 * its reaches the end; from then on it takes the feed's events — those the feed offered during that last read
 * included (an event the feed offered before the read began was readable before it, so the read has it). Events a
 * long transaction holds back (PostgreSQL) are above every cursor and position: the feed reads again soon and offers
 * them once they are readable. A filtered read examines a bounded range of events and may deliver none of them: the
 * stream's cursor passes over the range all the same (what it did not deliver it did not want), while its client's
 * `Last-Event-ID` stays the last event delivered, so a resumed stream examines the range again and finds the same.
 * A plain member's stream carries their own runs' events and the task events of the tasks assigned to them or one of
 * their teams: the feed reads the assignees of a page's tasks once for all its streams (`taskViewersOf`), only when
 * the page holds task events and a member's stream follows it, and each stream looks itself up in that answer.
 * The reads on their own of all the process's streams take about CATCH_UP_SLICE_MS of a turn of the event loop at
 * most, CATCH_UP_READS_AT_ONCE at a time. A stream whose client does not keep up holds at most MAX_PENDING events: past that it drops them and reads
 * them again from the table when its client reads.
 *
 * Bounded, on each instance: `maxStreamsPerUser` streams per user, every token and console session of the user
 * together, since any member may make tokens (429 beyond); at most half of `maxStreams` per project, so that one
 * project's streams never take the slots the others need (503 beyond); `maxStreams` in all (503 beyond). A stream's
 * caller is authorized again every RECHECK_HEARTBEATS heartbeat intervals (a revoked token, a deactivated user, a run
 * no longer visible: the stream ends), reading the store as of that check. No SQL and no HTTP here: the routes
 * (./index.ts) turn what a stream delivers into `text/event-stream`.
 */
import { read, readListed } from '../../db/read.ts'
import {
  type EnvironmentEventFilter,
  environmentEventsAfter,
  environmentEventsPage,
  EVENT_PAGE,
  type EventsPage,
  latestEventId,
  runEventsPage,
  type StoredRunEvent,
  taskIdOf,
  TERMINAL_RUN_EVENTS,
} from '../../db/run-events.ts'
import { assigneeUsersOf } from '../../db/tasks.ts'
import { onRunEventsCommitted } from '../../db/run-event-commits.ts'
import type { Listening, RunEventsListener, Store } from '../../db/store.ts'
import type { Clock } from '../../lib/clock.ts'
import { HttpError, retryLater, tooManyRequests } from '../../lib/errors.ts'
import type { Logger } from '../../lib/logger.ts'
import { outsideAnyRequest } from '../../lib/request-arrival.ts'
import { Slices } from '../../lib/slices.ts'

export interface StreamSettings {
  /** Open streams this instance serves at most (TRELLIS_EVENT_STREAMS_MAX). */
  maxStreams: number
  /** Open streams of one user — all their tokens and console sessions together — at most (TRELLIS_EVENT_STREAMS_PER_USER). */
  maxStreamsPerUser: number
  /** A stream that wrote nothing for this long writes a heartbeat comment (TRELLIS_EVENT_HEARTBEAT_SECONDS). */
  heartbeatMs: number
}

/** Events a stream holds for a client that has not read them yet; past this it reads them again from the table later. */
export const MAX_PENDING = 500

/** A stream's caller is authorized again every this many heartbeat intervals. */
export const RECHECK_HEARTBEATS = 4

/** Streams one project may hold on an instance: half its bound (rounded up), the other half always left to the others. */
const projectShareOf = (maxStreams: number): number => Math.ceil(maxStreams / 2)

/** What a stream follows, from where, and how its caller is authorized again. */
export interface StreamSpec {
  /** Whose stream it is (a token's user, or the console session's), for the per-user bound. */
  userId: number
  /** The project of its environment, for the per-project share. */
  projectId: number
  environmentId: number
  /** The last event the client has (`Last-Event-ID`); null: a run's stream from its first event, an environment's from now. */
  after: number | null
  /** A run's stream: its events only, ending after its last event (a finished run: once read to the end). */
  run?: { id: string; finished: boolean }
  /** An environment's stream: which of its events. */
  filter?: EnvironmentEventFilter
  /**
   * The caller authorized again: the filter it may see now (an environment's stream), or a thrown HttpError (the
   * stream ends). Any other failure (the database unreachable) leaves the stream open until the next check.
   */
  recheck(): Promise<EnvironmentEventFilter>
}

/** What a stream delivers next: events, a heartbeat, or null (the stream ends). */
export type Delivery = { events: StoredRunEvent[] } | 'heartbeat' | null

export interface Stream {
  next(): Promise<Delivery>
  close(): void
}

export class RunEventHub {
  private readonly feeds = new Map<number, Feed>()
  private readonly streams = new Set<Subscriber>()
  private readonly perUser = new Map<number, number>()
  private readonly perProject = new Map<number, number>()
  /** This process's commits (registered with the first stream), and other instances' (PostgreSQL's LISTEN). */
  private local: (() => void) | null = null
  private remote: Promise<Listening | null> | null = null
  private ticker: ReturnType<typeof setInterval> | null = null
  private lastPollAt = 0
  private closed = false

  constructor(
    readonly store: Store,
    readonly clock: Clock,
    readonly logger: Logger,
    readonly settings: StreamSettings,
  ) {}

  /** Streams open now. */
  get openStreams(): number {
    return this.streams.size
  }

  /**
   * A new stream; 429 past its user's bound, 503 `too_many_streams` past its project's share or the instance's bound.
   * Its first `next()` starts reading.
   */
  open(spec: StreamSpec): Stream {
    if (this.closed) throw retryLater(503, 'shutting_down', 'This instance is stopping: reconnect to another one', 1)
    const { maxStreams, maxStreamsPerUser } = this.settings
    if ((this.perUser.get(spec.userId) ?? 0) >= maxStreamsPerUser) {
      throw tooManyRequests(5, `At most ${maxStreamsPerUser} event streams may be open at once per user, all their tokens and console sessions together`)
    }
    if (this.streams.size >= maxStreams) throw retryLater(503, 'too_many_streams', `This instance serves ${maxStreams} event streams at most`, 5)
    const share = projectShareOf(maxStreams)
    if ((this.perProject.get(spec.projectId) ?? 0) >= share) {
      throw retryLater(503, 'too_many_streams', `This instance serves ${share} event streams at most per project, half of its ${maxStreams}`, 5)
    }
    countIn(this.perUser, spec.userId, 1)
    countIn(this.perProject, spec.projectId, 1)
    const feed = this.feedOf(spec.environmentId)
    const stream = new Subscriber(this, feed, spec)
    feed.subscribers.add(stream)
    this.streams.add(stream)
    this.startWatching()
    return stream
  }

  /** Ends every stream (their clients reconnect elsewhere) and stops listening: a stopping server's first step. */
  async close(): Promise<void> {
    this.closed = true
    for (const stream of [...this.streams]) stream.close()
    this.local?.()
    this.local = null
    const remote = await this.remote
    this.remote = null
    await remote?.stop().catch(() => {})
  }

  /** A stream ended: its place in the bounds is free again. */
  forget(stream: Subscriber): void {
    if (!this.streams.delete(stream)) return
    countIn(this.perUser, stream.spec.userId, -1)
    countIn(this.perProject, stream.spec.projectId, -1)
    const feed = stream.feed
    feed.subscribers.delete(stream)
    if (feed.subscribers.size === 0) this.dropFeed(feed)
    if (this.streams.size === 0 && this.ticker !== null) {
      clearInterval(this.ticker)
      this.ticker = null
    }
  }

  /** A feed that could not start: the next stream of its environment makes a new one. */
  dropFeed(feed: Feed): void {
    if (this.feeds.get(feed.environmentId) === feed) this.feeds.delete(feed.environmentId)
  }

  private feedOf(environmentId: number): Feed {
    let feed = this.feeds.get(environmentId)
    if (feed === undefined) {
      feed = new Feed(this, environmentId)
      this.feeds.set(environmentId, feed)
    }
    return feed
  }

  /**
   * Hears of commits once the first stream opens: this process's at once, other instances' once listening (a failure:
   * the feeds' periodic reads go on alone, and listening is tried again at the next one).
   */
  private startWatching(): void {
    const wake: RunEventsListener = (environmentIds) => this.wake(environmentIds)
    this.ticker ??= setInterval(() => this.tick(), Math.min(1_000, this.settings.heartbeatMs))
    this.local ??= onRunEventsCommitted(this.store, wake)
    this.remote ??= this.store.listenForRunEvents(wake).catch((error) => {
      this.logger.warn('listening for run events failed; event streams read every heartbeat interval', { error: (error as Error).message })
      this.remote = null
      return null
    })
  }

  /** Events committed in these environments (null: any): their feeds read. */
  private wake(environmentIds: readonly number[] | null): void {
    if (environmentIds === null) for (const feed of this.feeds.values()) feed.wake()
    else for (const id of environmentIds) this.feeds.get(id)?.wake()
  }

  /** Every second (or heartbeat interval, when shorter): heartbeats and checks due, and the feeds' periodic read. */
  private tick(): void {
    const now = this.clock.now()
    for (const stream of this.streams) stream.onTick(now)
    if (now - this.lastPollAt >= this.settings.heartbeatMs) {
      this.lastPollAt = now
      this.wake(null)
      if (this.remote === null) this.startWatching()
    }
  }
}

/** Adds `delta` to `key`'s count of open streams; a count that reaches zero is dropped. */
function countIn(counts: Map<number, number>, key: number, delta: number): void {
  const count = (counts.get(key) ?? 0) + delta
  if (count > 0) counts.set(key, count)
  else counts.delete(key)
}

/** For each task event of a page (by event id), the users its task names as assignees, teams as their members. */
export type TaskViewers = ReadonlyMap<number, ReadonlySet<number>>
const NO_TASK_VIEWERS: TaskViewers = new Map()

/** A feed whose events were held back (a long transaction on PostgreSQL) reads again after this long. */
const HELD_BACK_RETRY_MS = 500

/** One environment's reader: its events after the last one it read, offered to each of its streams. */
class Feed {
  /** The id of the last event read (or, at first, the environment's newest). */
  position = 0
  readonly subscribers = new Set<Subscriber>()
  /** Settled once `position` holds the environment's newest event: a stream reads on its own only after that. */
  readonly ready: Promise<void>
  private reading = false
  private again = false

  constructor(
    private readonly hub: RunEventHub,
    readonly environmentId: number,
  ) {
    this.ready = readListed(hub.store, 'run_events', latestEventId(environmentId)).then((latest) => {
      this.position = latest
    })
    // A failed start fails its streams' first read (they end; their clients reconnect); the next stream starts anew.
    this.ready.catch(() => hub.dropFeed(this))
  }

  /** Reads now, or once more after the read under way. */
  wake(): void {
    if (this.reading) {
      this.again = true
      return
    }
    void this.pump()
  }

  private async pump(): Promise<void> {
    this.reading = true
    try {
      await this.ready
      do {
        this.again = false
        // Held back: what is listed now, and another read soon rather than at the next wake-up or heartbeat. Outside
        // any request: a wake-up carries the context it was set going in (a NOTIFY listener a request started, a
        // request's commit), and a catch-up shared since that request arrived does not cover what was committed since.
        if (!(await outsideAnyRequest(() => this.hub.store.awaitListed('run_events')))) setTimeout(() => this.wake(), HELD_BACK_RETRY_MS).unref()
        const page = await read(this.hub.store, environmentEventsAfter(this.environmentId, this.position))
        if (page.length === 0) continue
        const viewers = await this.taskViewersOf(page)
        this.position = page[page.length - 1]!.id
        for (const stream of this.subscribers) stream.offer(page, viewers)
        if (page.length === EVENT_PAGE) this.again = true
      } while (this.again && this.subscribers.size > 0)
    } catch (error) {
      // The next wake-up or periodic read tries again from the same place.
      this.hub.logger.warn('reading run events failed', { environmentId: this.environmentId, error: (error as Error).message })
    } finally {
      this.reading = false
    }
  }

  /**
   * Who sees the page's task events as an assignee: one read for the page (none without task events, or while no
   * plain member's stream follows the feed — a project admin's stream carries every event), read after the events,
   * so an escalation's new assignees see its `task.escalated`.
   */
  private async taskViewersOf(page: readonly StoredRunEvent[]): Promise<TaskViewers> {
    if (!this.followedByMember()) return NO_TASK_VIEWERS
    const taskOfEvent = new Map<number, string>()
    for (const event of page) {
      const taskId = taskIdOf(event)
      if (taskId !== null) taskOfEvent.set(event.id, taskId)
    }
    if (taskOfEvent.size === 0) return NO_TASK_VIEWERS
    const byTask = await read(this.hub.store, assigneeUsersOf([...new Set(taskOfEvent.values())]))
    const viewers = new Map<number, ReadonlySet<number>>()
    for (const [eventId, taskId] of taskOfEvent) {
      const users = byTask.get(taskId)
      if (users !== undefined) viewers.set(eventId, users)
    }
    return viewers
  }

  private followedByMember(): boolean {
    for (const stream of this.subscribers) if (stream.member !== undefined) return true
    return false
  }
}

/**
 * The time the streams' reads on their own (catching up, each a page or a bounded range of the table) take of one turn
 * of the event loop at most, all streams of the process together: the rest wait for the next turns, so that a crowd
 * of streams resumed far back delays no request by more than this and one read (SQLite reads on the event loop).
 */
export const CATCH_UP_SLICE_MS = 2
/** Those reads under way at once at most (PostgreSQL's: the rest of the pool's connections stay for requests and the executor). */
export const CATCH_UP_READS_AT_ONCE = 4
const catchUpReads = new Slices(CATCH_UP_SLICE_MS, CATCH_UP_READS_AT_ONCE)

type Wake = 'events' | 'heartbeat' | 'closed'

/** One open stream. */
class Subscriber implements Stream {
  /** The id of the last event delivered to the client, or past it, of the last one a read on its own examined. */
  private cursor = 0
  private started = false
  /** Reading on its own from the table (at first, and after dropping what its client did not read). */
  private behind = true
  /** While reading on its own: the feed offered more than it can hold, so it reads once more before following the feed. */
  private missed = false
  /** The feed's events for the client (while reading on its own: those offered during the current read). */
  private pending: StoredRunEvent[] = []
  /** Nothing more to deliver (its run's last event went out, or the stream was closed). */
  private ended = false
  private closed = false
  private waiter: ((why: Wake) => void) | null = null
  private filter: EnvironmentEventFilter
  private lastWriteAt: number
  private lastCheckAt: number
  private checking = false

  constructor(
    private readonly hub: RunEventHub,
    readonly feed: Feed,
    readonly spec: StreamSpec,
  ) {
    this.filter = spec.filter ?? {}
    this.lastWriteAt = this.lastCheckAt = hub.clock.now()
  }

  async next(): Promise<Delivery> {
    if (!this.started) await this.start()
    for (;;) {
      if (this.closed || this.ended) return this.finish()
      if (this.behind) {
        this.missed = false
        this.pending = []
        const page = await this.readOnItsOwn()
        if (this.closed) return this.finish()
        if (page.atEnd && !this.missed) this.behind = false
        else this.pending = [] // read again: that read finds them
        this.cursor = page.through
        if (page.events.length > 0) return this.deliver(page.events)
        // A run that had finished when the stream opened: read to its end, even without a last event (older runs have none).
        if (!this.behind && this.spec.run?.finished) this.ended = true
        continue
      }
      const fresh = this.pending.filter((event) => event.id > this.cursor)
      this.pending = []
      if (fresh.length > 0) return this.deliver(fresh)
      const why = await new Promise<Wake>((resolve) => (this.waiter = resolve))
      this.waiter = null
      if (why === 'heartbeat' && !this.closed) {
        this.lastWriteAt = this.hub.clock.now()
        return 'heartbeat'
      }
    }
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    this.pending = []
    this.hub.forget(this)
    this.waiter?.('closed')
  }

  /** The plain member whose view this environment stream is (their runs, their tasks), or undefined (every run, or a run's stream). */
  get member(): number | undefined {
    return this.spec.run ? undefined : this.filter.userId
  }

  /**
   * The feed's new events: those this stream wants (`viewers`: who sees each task event as an assignee), held for its
   * client (at most MAX_PENDING: past that, read again later).
   */
  offer(events: readonly StoredRunEvent[], viewers: TaskViewers): void {
    if (this.closed || this.ended) return
    let last = this.pending.length > 0 ? this.pending[this.pending.length - 1]!.id : this.cursor
    for (const event of events) {
      if (event.id <= last || !this.wants(event, viewers)) continue
      this.pending.push(event)
      last = event.id
    }
    if (this.pending.length > MAX_PENDING) {
      this.pending = []
      this.missed = true
      this.behind = true
    }
    if (this.pending.length > 0 || this.behind) this.waiter?.('events')
  }

  /** The hub's tick: a heartbeat when the stream wrote nothing for an interval, the caller's check when one is due. */
  onTick(now: number): void {
    if (this.waiter !== null && now - this.lastWriteAt >= this.hub.settings.heartbeatMs) this.waiter('heartbeat')
    if (!this.checking && now - this.lastCheckAt >= this.hub.settings.heartbeatMs * RECHECK_HEARTBEATS) void this.recheck(now)
  }

  private async start(): Promise<void> {
    this.started = true
    await this.feed.ready
    this.cursor = this.spec.after ?? (this.spec.run ? 0 : await readListed(this.hub.store, 'run_events', latestEventId(this.feed.environmentId)))
  }

  /** The next page after the cursor, read in the catch-up reads' slice of a turn (with the filter of that time). */
  private readOnItsOwn(): Promise<EventsPage> {
    return catchUpReads.run(() =>
      readListed(this.hub.store, 'run_events', this.spec.run ? runEventsPage(this.spec.run.id, this.cursor) : environmentEventsPage(this.feed.environmentId, this.cursor, this.filter)),
    )
  }

  /** The filter's rule, as `environmentEventsPage` applies it in SQL (src/db/run-events.ts). */
  private wants(event: StoredRunEvent, viewers: TaskViewers): boolean {
    if (this.spec.run) return event.runId === this.spec.run.id
    const { workflowIds, recordId, userId } = this.filter
    return (
      (workflowIds === undefined || workflowIds.includes(event.workflowId)) &&
      (recordId === undefined || event.recordId === recordId) &&
      (userId === undefined || event.userId === userId || viewers.get(event.id)?.has(userId) === true)
    )
  }

  /** Events to the client, the cursor after them (or where a read left it, past them); a run's stream stops after its run's last event. */
  private deliver(events: StoredRunEvent[]): Delivery {
    const last = this.spec.run ? events.findIndex((event) => TERMINAL_RUN_EVENTS.includes(event.type)) : -1
    const sent = last >= 0 ? events.slice(0, last + 1) : events
    if (last >= 0) this.ended = true
    this.cursor = Math.max(this.cursor, sent[sent.length - 1]!.id)
    this.lastWriteAt = this.hub.clock.now()
    return { events: sent }
  }

  private finish(): null {
    this.close()
    return null
  }

  private async recheck(now: number): Promise<void> {
    this.checking = true
    try {
      // The hub's timer was started by some stream's request: outside it, the lookup cache asks the store whether
      // anything changed since (PostgreSQL: another instance's revocation) instead of trusting that request's answer.
      this.filter = await outsideAnyRequest(() => this.spec.recheck())
    } catch (error) {
      if (error instanceof HttpError) this.close()
      else this.hub.logger.warn('authorizing an event stream again failed; it stays open until the next check', { error: (error as Error).message })
    } finally {
      this.checking = false
      this.lastCheckAt = now
    }
  }
}
