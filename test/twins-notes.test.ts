/**
 * The notes twins (src/db/postgres/notes.ts) answer as src/db/notes.ts: notes, threads, renames and archives written
 * through the notes service and the face's own functions on both stores, then every page (each filter, each date
 * operator at and around every note's time, limits), render, find and latest compared — in time order and after an
 * import of an older note takes the environment off it.
 */
import { describe, expect, test } from 'bun:test'
import { manualClock } from '../src/lib/clock.ts'
import type { Micros } from '../src/lib/time.ts'
import {
  findNoteById,
  findNoteMessagesForRender,
  findNotesForRender,
  insertImportedNote,
  insertNewNote,
  insertNoteMessage,
  latestNoteCreatedAt,
  nextNoteCreatedAt,
  type NotePageFilters,
  type NoteRow,
  pageNoteIds,
  updateNoteRow,
} from '../src/db/notes.ts'
import type { Op } from '../src/db/op.ts'
import { addMessage, createNote, recordImportedNoteTime, updateNote } from '../src/modules/notes/service.ts'
import { bothStores, postgresOrSkip } from './support/both-stores.ts'
import { all, dateFiltersAround, seedOrganization, T0, targetsOf } from './support/lists.ts'

const FILTERS: NotePageFilters[] = [
  {},
  { userId: 1 },
  { userId: 2 },
  { teamId: 1 },
  { teamId: 2 },
  { collectionId: 1 },
  { collectionId: 2 },
  { recordId: 'order-1' },
  { recordId: 'Order-1' },
  { userId: 1, teamId: 1 },
  { userId: 2, recordId: 'order-2', collectionId: 1 },
  { userId: 99 },
]

describe.skipIf(!postgresOrSkip('notes twins'))('notes twins', () => {
  const stores = bothStores()
  const clock = manualClock(T0)
  const alice = { userId: 1, tokenId: 1 }
  const bob = { userId: 2, tokenId: null, workflow: { name: 'approve', runId: '0190a1b2-0000-7000-8000-000000000001', stepName: 'note' } }

  /** Writes through the service at `now` on both stores; their answers must agree. */
  async function write<T>(now: number, body: () => Op<T>): Promise<T> {
    clock.set(now)
    const [sqlite, pg] = await stores.both(body)
    expect(pg).toEqual(sqlite)
    return sqlite
  }

  /**
   * Every page of the environment: each filter with every createdAt filter around `times` (limit 50), the first
   * two filters also with `updatedAt` / `archivedAt` ones, and the unfiltered pages at limits 1 and 3.
   */
  async function notePages(environmentId: number, times: number[], otherFields = ['updatedAt', 'archivedAt']) {
    const created = dateFiltersAround('createdAt', times)
    const queries = [
      ...FILTERS.flatMap((filters, i) => (i < 2 ? created : dateFiltersAround('createdAt', times, 3)).map((dates) => ({ filters, dates, limit: 50 }))),
      ...FILTERS.slice(0, 2).flatMap((filters) => otherFields.flatMap((f) => dateFiltersAround(f, times, 2)).map((dates) => ({ filters, dates, limit: 50 }))),
      ...created.flatMap((dates) => [1, 3].map((limit) => ({ filters: {}, dates, limit }))),
    ]
    expect(await stores.pg.awaitListed('notes')).toBe(true) // PostgreSQL: dated by the lists' pass
    const [sqlite, pg] = await stores.both(() => all(queries, (q) => pageNoteIds(environmentId, q.filters, q.dates, q.limit)))
    expect(pg).toEqual(sqlite)
    return sqlite
  }

  test('notes written through the service and the face answer alike on both stores', async () => {
    await seedOrganization(targetsOf(stores))
    const notes: NoteRow[] = []
    const input = (n: number, over: Partial<Parameters<typeof createNote>[1]> = {}) => ({
      environmentId: 1,
      teamId: n % 2 === 0 ? 1 : 2,
      collectionId: n % 3 === 0 ? 2 : 1,
      recordId: `order-${n % 4}`,
      title: `Note ${n}`,
      content: `<p>first of ${n}</p><script>x</script>`,
      ...over,
    })
    // Three in one millisecond (createdAt moves on by a microsecond), then later ones, in two environments.
    for (let n = 0; n < 3; n++) notes.push(await write(T0, () => createNote(clock, input(n), n === 1 ? bob : alice)))
    for (let n = 3; n < 12; n++) notes.push(await write(T0 + n * 1500, () => createNote(clock, input(n), n % 2 ? bob : alice)))
    for (let n = 12; n < 15; n++) notes.push(await write(T0 + n * 700, () => createNote(clock, input(n, { environmentId: 2 }), alice)))
    expect(new Set(notes.map((n) => n.createdAt)).size).toBe(notes.length)
    expect(notes[1]!.createdAt).toBe((T0 * 1000 + 1) as Micros)

    // Threads, renames, archives (updatedAt moves), one unarchive; a message the clock puts before the last update.
    await write(T0 + 20_000, () => addMessage(clock, notes[0]!, '<b>second</b>', bob))
    await write(T0 + 20_000, () => addMessage(clock, notes[0]!, 'third, same instant', alice))
    await write(T0 + 21_000, () => updateNote(clock, notes[4]!, { title: 'Renamed', archived: true }, alice))
    await write(T0 + 22_000, () => updateNote(clock, notes[5]!, { archived: true }, bob))
    const archived = (await write(T0, () => findNoteById(notes[5]!.id)))!
    await write(T0 + 23_000, () => updateNote(clock, archived, { archived: false }, bob))
    const renamed = (await write(T0, () => findNoteById(notes[4]!.id)))!
    await write(T0 + 10, () => addMessage(clock, renamed, 'clock stepped back', alice))

    // The face's own functions: a note and a message, a direct row update.
    const direct = await write(T0, function* () {
      const note = yield* insertNewNote({ environmentId: 1, teamId: 2, collectionId: 2, recordId: 'order-9', title: 'direct', userId: 3 }, T0 + 30_000, null)
      yield* insertNoteMessage({ noteId: note.id, userId: 3, content: 'hello', createdAt: note.createdAt as Micros })
      yield* updateNoteRow(note.id, { title: 'direct, renamed' })
      return note
    })
    notes.push(direct)

    const ids = notes.map((n) => n.id)
    const [rows, rowsPg] = await stores.both(function* () {
      return {
        byId: yield* all([...ids, 999], (id) => findNoteById(id)),
        render: yield* findNotesForRender([...ids, 999, ids[0]!]),
        renderNone: yield* findNotesForRender([]),
        renderSome: yield* findNotesForRender([ids[3]!, ids[1]!]),
        messages: yield* findNoteMessagesForRender([...ids, 999]),
        messagesNone: yield* findNoteMessagesForRender([]),
        latest: yield* all([1, 2, 3, 999], (e) => latestNoteCreatedAt(e)),
        next: yield* all([1, 2, 3], (e) => nextNoteCreatedAt(e, T0)),
      }
    })
    expect(rowsPg).toEqual(rows)
    expect(rows.render).toHaveLength(notes.length)
    expect(rows.messages.length).toBeGreaterThan(notes.length)
    expect(rows.latest.map((l) => l.answer)).toEqual([direct.createdAt, notes[14]!.createdAt, null, null])
    expect(rows.byId.find((r) => r.query === notes[4]!.id)!.answer).toMatchObject({ title: 'Renamed' })
    expect(rows.byId.at(-1)!.answer).toBeUndefined()

    // Every page in time order (createdAt filters as id bounds), then in both environments.
    const times = (e: number) => notes.filter((n) => n.environmentId === e).map((n) => n.createdAt)
    const updated = rows.byId.flatMap((r) => (r.answer ? [r.answer.updatedAt, r.answer.archivedAt ?? r.answer.updatedAt] : []))
    const pages = await notePages(1, [...times(1), ...updated])
    expect(pages.filter((p) => p.answer.length > 0).length).toBeGreaterThan(pages.length / 3)
    expect(new Set(pages.map((p) => p.answer.join())).size).toBeGreaterThan(20)
    await notePages(2, times(2), [])
    await notePages(3, [T0 * 1000], [])
  }, 120_000)

  test('an import of an older note takes the environment off time order; pages stay alike on the comparison path', async () => {
    await write(T0 + 40_000, function* () {
      const createdAt = (T0 * 1000 + 1500 * 1000 + 7) as Micros
      yield* recordImportedNoteTime(1, createdAt)
      yield* insertImportedNote({
        environmentId: 1, teamId: 1, collectionId: 1, recordId: 'order-1', title: 'imported', userId: 4,
        createdAt, updatedAt: (createdAt + 9) as Micros, archivedAt: (createdAt + 9) as Micros,
      }, [
        { userId: 4, content: 'old message', createdAt },
        { userId: 1, content: 'older reply, stored as given', createdAt: (createdAt - 5) as Micros },
      ], true)
    })
    expect(await stores.pg.awaitListed('notes')).toBe(true)
    const imported = await write(T0 + 40_000, () => pageNoteIds(1, { userId: 4 }, [], 10))
    expect(imported).toHaveLength(1)
    const importedId = imported[0]!
    const [state, statePg] = await stores.both(function* () {
      return { messages: yield* findNoteMessagesForRender([importedId]), latest: yield* latestNoteCreatedAt(1) }
    })
    expect(statePg).toEqual(state)
    const flags = [
      stores.sqlite.store.sqlite.query('SELECT notes_in_time_order AS o FROM environments ORDER BY id').all().map((r) => Boolean((r as { o: number }).o)),
      (await stores.pg.sql`SELECT notes_in_time_order AS o FROM environments ORDER BY id`).map((r: { o: boolean }) => r.o),
    ]
    expect(flags).toEqual([[false, true, true, true], [false, true, true, true]])
    expect(state.messages.map((m) => m.content)).toEqual(['old message', 'older reply, stored as given'])
    const inEnv = (await write(T0, function* () {
      return yield* all(Array.from({ length: importedId }, (_, i) => i + 1), (id) => findNoteById(id))
    })).flatMap((r) => (r.answer?.environmentId === 1 ? [r.answer.createdAt, r.answer.updatedAt] : []))
    const pages = await notePages(1, inEnv, ['updatedAt'])
    // The import sits between older ids' times: a createdAt page includes it out of id order, alike on both.
    expect(pages.some((p) => p.answer.includes(importedId) && p.answer.length > 1)).toBe(true)
    // A later note still takes max(now, latest + 1 µs) on both.
    await write(T0 + 50_000, () => createNote(clock, { environmentId: 1, teamId: 1, collectionId: 1, recordId: 'x', title: 'after import', content: 'c' }, alice))
  }, 120_000)
})
