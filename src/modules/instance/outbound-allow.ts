/**
 * The outbound allow-list (docs/security.md "Outbound requests"): the hosts, addresses and ranges that `http` steps and
 * completion callbacks may reach beyond public addresses. When TRELLIS_HTTP_ALLOW is set it is the whole list, and
 * the console shows it read-only: the deployment's configuration is not overridden from a browser. Otherwise the
 * list instance administrators keep in the console is in effect (the `instance_settings` row `http-allow`, a JSON
 * array of entries), read by every outbound request without a restart; each change has an instance admin log entry.
 */
import type { Config } from '../../config.ts'
import type { Op } from '../../db/op.ts'
import { read } from '../../db/read.ts'
import { lockRule } from '../../db/rule-locks.ts'
import { readInstanceSetting, writeInstanceSetting } from '../../db/sessions.ts'
import type { Store } from '../../db/store.ts'
import type { Clock } from '../../lib/clock.ts'
import { conflict, invalidField } from '../../lib/errors.ts'
import { type AllowList, AllowListError, allowListEntries, parseAllowList } from '../../lib/outbound/policy.ts'
import { appendAdminLog } from '../admin-logs/service.ts'

const SETTING = 'http-allow'

/** The most entries the stored list holds (ranges cover many addresses: a longer list is a mistake). */
export const MAX_ALLOW_ENTRIES = 200
/** The longest entry: a host name is at most 253 characters. */
export const MAX_ALLOW_ENTRY_LENGTH = 300

/**
 * How long an instance may go on using the stored list it read last: on PostgreSQL a change made through another
 * instance is in effect everywhere within this; the instance that saved it uses it at once.
 */
export const ALLOW_LIST_STALE_MS = 5_000

/** What the console and the API show: the list in effect and where it comes from. */
export interface OutboundAllowView {
  /** The entries in effect. */
  entries: string[]
  /** TRELLIS_HTTP_ALLOW is set: `entries` are its, and the stored list is not used (nor changed). */
  setByEnvironment: boolean
  /** The list kept in the console (in effect unless the environment variable is set). */
  storedEntries: string[]
}

function* storedEntries(): Op<string[]> {
  const value = yield* readInstanceSetting(SETTING)
  return value === undefined ? [] : (JSON.parse(value) as string[])
}

export function* outboundAllowView(config: Config): Op<OutboundAllowView> {
  const stored = yield* storedEntries()
  return { entries: config.httpAllowEntries ?? stored, setByEnvironment: config.httpAllowEntries !== null, storedEntries: stored }
}

/** The list in effect: TRELLIS_HTTP_ALLOW when set, else the stored one. */
export function* effectiveAllowList(config: Config): Op<AllowList> {
  if (config.httpAllowEntries !== null) return config.httpAllow
  return parseAllowList((yield* storedEntries()).join(' '))
}

/**
 * Each entry checked by the parser TRELLIS_HTTP_ALLOW uses, one entry per item (400 naming `entries[i]`); blank
 * items are dropped, the rest trimmed and kept in order without repeats.
 */
function checkedEntries(entries: string[]): string[] {
  if (entries.length > MAX_ALLOW_ENTRIES) throw invalidField('entries', `at most ${MAX_ALLOW_ENTRIES} entries`)
  const kept: string[] = []
  entries.forEach((raw, i) => {
    const entry = raw.trim()
    if (entry === '') return
    // Named as the console's lines are counted: entry 3 is the third line.
    const field = `entries[${i}]`
    if (allowListEntries(entry).length !== 1) throw invalidField(field, `entry ${i + 1}: one host name, address or CIDR range per entry ("${entry}")`)
    try {
      parseAllowList(entry)
    } catch (error) {
      if (error instanceof AllowListError) throw invalidField(field, `entry ${i + 1}: ${error.message}`)
      throw error
    }
    if (!kept.includes(entry)) kept.push(entry)
  })
  return kept
}

/**
 * Replaces the stored list, with an instance admin log entry of the old and new lists (none when nothing changed).
 * 409 `allow_list_set_by_environment` while TRELLIS_HTTP_ALLOW is set: the stored list would not be used. Call in a
 * write transaction; instance administrators only (the caller checks).
 */
export function* setOutboundAllow(clock: Clock, config: Config, entries: string[], actorId: number | null): Op<OutboundAllowView> {
  if (config.httpAllowEntries !== null) {
    throw conflict('allow_list_set_by_environment', 'TRELLIS_HTTP_ALLOW is set: it is the outbound allow-list, and the one kept in the console is not used. Change the environment variable and restart, or unset it to edit the list here')
  }
  const wanted = checkedEntries(entries)
  // Two administrators saving at once (PostgreSQL): each entry names the list it replaced.
  yield* lockRule('instanceSettings')
  const before = yield* storedEntries()
  if (JSON.stringify(before) !== JSON.stringify(wanted)) {
    yield* writeInstanceSetting(SETTING, JSON.stringify(wanted), clock.now())
    yield* appendAdminLog(clock, {
      projectId: null,
      type: 'update',
      resource: 'outbound-allow',
      actorId,
      previousValue: { entries: before },
      newValue: { entries: wanted },
    })
  }
  return { entries: wanted, setByEnvironment: false, storedEntries: wanted }
}

/**
 * The list in effect for outbound requests, read from the store at most every ALLOW_LIST_STALE_MS (a monotonic
 * interval, not the app's clock: it bounds staleness, it is no time of the data); `forget()` after a change makes the
 * next request read it. One per app: the routes and the executor's outbound client share it.
 */
export class OutboundAllowCache {
  private cached: { list: AllowList; readAt: number } | null = null
  /** Counts `forget()` calls: a read begun before one is not kept. */
  private generation = 0

  constructor(
    private readonly store: Store,
    private readonly config: Config,
    private readonly staleMs = ALLOW_LIST_STALE_MS,
  ) {}

  async current(): Promise<AllowList> {
    if (this.config.httpAllowEntries !== null) return this.config.httpAllow
    const now = performance.now()
    if (this.cached && now - this.cached.readAt < this.staleMs) return this.cached.list
    const generation = this.generation
    const list = await read(this.store, effectiveAllowList(this.config))
    if (generation === this.generation) this.cached = { list, readAt: now }
    return list
  }

  forget(): void {
    this.cached = null
    this.generation++
  }
}
