/**
 * The turn slicer (src/http/turn-slices.ts, which keeps /healthz within its bound under load): with no crowd a request starts at once; a
 * crowd that arrives in one turn is started a slice's worth per turn, in arrival order, every request exactly once,
 * and a probe starts at once whatever waits. (The bound it serves is measured through a real server in
 * test/overload.test.ts.) The same queue with a bound on pieces under way (the event streams' catching-up reads):
 * never more at once, the others started in order as those end.
 */
import { expect, test } from 'bun:test'
import { SLICE_MS, shareOfTurnMs, TurnSlices } from '../src/http/turn-slices.ts'
import { Slices } from '../src/lib/slices.ts'

const request = (path: string) => new Request(`http://127.0.0.1${path}`)

/** Holds the thread for `ms`, as a request's synchronous part does. */
function busy(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {}
}

/** Counts turns of the event loop (a chain of setImmediate) until `done` holds. */
async function turnsUntil(done: () => boolean): Promise<number> {
  let turns = 0
  while (!done()) {
    await new Promise((resolve) => setImmediate(resolve))
    turns++
  }
  return turns
}

test('with nothing waiting, a request starts at once (before run returns)', async () => {
  const slices = new TurnSlices()
  let started = false
  const answer = slices.run(request('/v1/x'), async () => {
    started = true
    return 'ok'
  })
  expect(started).toBe(true)
  expect(await answer).toBe('ok')
})

test('a crowd of 1 ms requests arriving at once: a slice per turn, in arrival order, each once', async () => {
  const slices = new TurnSlices()
  const order: number[] = []
  const turnOf: number[] = []
  let turn = 0
  const answers = Array.from({ length: 60 }, (_, i) =>
    slices.run(request(`/v1/notes?i=${i}`), async () => {
      order.push(i)
      turnOf.push(turn)
      busy(1)
      return i
    }),
  )
  expect(slices.queued).toBeGreaterThan(0)
  const turns = await turnsUntil(() => {
    turn++
    return order.length === 60
  })
  expect(await Promise.all(answers)).toEqual(order)
  expect(order).toEqual(Array.from({ length: 60 }, (_, i) => i))
  // About SLICE_MS of 1 ms requests per turn (one more may start at the slice's edge): never the whole crowd in one.
  const perTurn = [...new Map(turnOf.map((t) => [t, turnOf.filter((x) => x === t).length])).values()]
  expect(Math.max(...perTurn)).toBeLessThanOrEqual(SLICE_MS + 2)
  expect(turns).toBeGreaterThanOrEqual(60 / (SLICE_MS + 2))
})

test('a probe starts at once while a crowd waits', async () => {
  const slices = new TurnSlices()
  const crowd = Array.from({ length: 30 }, () => slices.run(request('/v1/notes'), async () => busy(1)))
  expect(slices.queued).toBeGreaterThan(0)
  for (const probe of ['/healthz', '/readyz']) {
    let answered = false
    const done = slices.run(request(probe), async () => {
      answered = true
    })
    expect(answered).toBe(true)
    await done
  }
  await Promise.all(crowd)
  expect(slices.queued).toBe(0)
})

test('a request whose handler fails reaches its caller alone; the queue goes on', async () => {
  const slices = new TurnSlices()
  const answers = Array.from({ length: 20 }, (_, i) =>
    slices.run(request('/v1/notes'), async () => {
      busy(1)
      if (i === 7) throw new Error('boom')
      return i
    }),
  )
  const settled = await Promise.allSettled(answers)
  expect(settled.filter((s) => s.status === 'rejected')).toHaveLength(1)
  expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(19)
})

test('busy while a request waits for a later turn (the executor keeps to its share then); a trickle served at once is not', async () => {
  const slices = new TurnSlices()
  expect(slices.busy).toBe(false)
  await slices.run(request('/v1/x'), async () => 'ok')
  expect(slices.busy).toBe(false)
  // A crowd in one turn: past the slice, the rest wait — busy until the last of them has started.
  const answers = Array.from({ length: 10 }, (_, i) =>
    slices.run(request(`/v1/x?i=${i}`), async () => {
      busy(1)
      return i
    }),
  )
  expect(slices.queued).toBeGreaterThan(0)
  expect(slices.busy).toBe(true)
  await Promise.all(answers)
  expect(slices.busy).toBe(false)
})

test("the executor's share of a busy turn, in ms beside the request slice", () => {
  expect(shareOfTurnMs(50)).toBe(SLICE_MS)
  expect(shareOfTurnMs(33)).toBeCloseTo(SLICE_MS * (33 / 67))
  expect(shareOfTurnMs(90)).toBeCloseTo(SLICE_MS * 9)
})

test('with a bound on pieces under way: never more at once, each piece once, in arrival order as others end; a failing piece frees its place', async () => {
  const slices = new Slices(SLICE_MS, 2)
  let underWay = 0
  let most = 0
  const order: number[] = []
  const answers = Array.from({ length: 12 }, (_, i) =>
    slices.run(async () => {
      order.push(i)
      most = Math.max(most, ++underWay)
      await Bun.sleep(2)
      underWay--
      if (i === 3) throw new Error('boom')
      return i
    }),
  )
  const settled = await Promise.allSettled(answers)
  expect(most).toBe(2)
  expect(order).toEqual(Array.from({ length: 12 }, (_, i) => i))
  expect(settled.filter((s) => s.status === 'rejected')).toHaveLength(1)
  expect(slices.queued).toBe(0)
  // Its places all free again: two start at once (before run returns).
  const started: number[] = []
  const again = [0, 1].map((i) => slices.run(async () => void started.push(i)))
  expect(started).toEqual([0, 1])
  await Promise.all(again)
})
