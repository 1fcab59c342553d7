/**
 * The progress of long commands (src/lib/progress.ts) on a fake stream with a fake clock: on a
 * terminal, one line redrawn in place at most every REDRAW_MS; elsewhere, only the summary lines.
 */
import { describe, expect, test } from 'bun:test'
import { BYTES, createProgress, duration, REDRAW_MS, ROWS } from '../src/lib/progress.ts'

const CLEAR = '\r\x1b[2K'

function fakeStream(isTTY: boolean, columns?: number) {
  const writes: string[] = []
  return { isTTY, columns, writes, write: (text: string) => void writes.push(text), text: () => writes.join('') }
}

/** A progress on a fake stream (a terminal or not) with a clock the test moves. */
function fixture(isTTY: boolean, unit = ROWS, columns?: number) {
  const stream = fakeStream(isTTY, columns)
  let t = 1_000
  const clock = { now: () => t, advance: (ms: number) => void (t += ms) }
  return { stream, clock, progress: createProgress(stream, unit, clock.now) }
}

describe('not a terminal (CI, logs, pipes)', () => {
  test('one summary line per step as it ends, a total at the end; no redraws', () => {
    const { stream, clock, progress } = fixture(false)
    const notes = progress.step('notes', 200_000)
    for (let done = 0; done <= 200_000; done += 10_000) {
      notes.update(done, 'copying')
      clock.advance(200)
    }
    notes.update(200_000, 'verifying')
    clock.advance(1_000)
    notes.done(200_000)
    const empty = progress.step('sessions', 0)
    empty.done(0)
    const analyze = progress.step('ANALYZE', null)
    clock.advance(1_500)
    analyze.done()
    progress.finish('db copy')
    expect(stream.text()).toBe(
      [
        'notes: 200,000 rows in 5.2 s (38,462 rows/s)',
        'sessions: 0 rows in 0.0 s',
        'ANALYZE: 1.5 s',
        'db copy: 200,000 rows in 6.7 s (29,851 rows/s)',
        '',
      ].join('\n'),
    )
    expect(stream.text()).not.toContain('\r')
  })
})

describe('a terminal', () => {
  test('the step line is redrawn in place, at most every REDRAW_MS, with rate and time left', () => {
    const { stream, clock, progress } = fixture(true)
    const notes = progress.step('notes', 100_000)
    expect(stream.writes).toEqual([`${CLEAR}notes: 0 / 100,000 rows, 0 rows/s`])
    notes.update(0, 'copying')
    clock.advance(REDRAW_MS / 2)
    notes.update(500)
    expect(stream.writes.length).toBe(1) // too soon
    clock.advance(4_950)
    notes.update(50_000)
    expect(stream.writes.length).toBe(2)
    expect(stream.writes.at(-1)).toBe(`${CLEAR}notes copying: 50,000 / 100,000 rows, 10,000 rows/s, 5 s left`)
    // Ten updates within one REDRAW_MS: one redraw at most.
    for (let i = 1; i <= 10; i++) {
      clock.advance(REDRAW_MS / 10)
      notes.update(50_000 + i * 100)
    }
    expect(stream.writes.length).toBe(3)
    // The read-back: a phase of its own, its own rate.
    notes.update(0, 'verifying')
    clock.advance(1_000)
    notes.update(25_000)
    expect(stream.writes.at(-1)).toBe(`${CLEAR}notes verifying: 25,000 / 100,000 rows, 25,000 rows/s, 3 s left`)
    notes.done(100_000)
    expect(stream.writes.at(-1)).toBe(`${CLEAR}notes: 100,000 rows in 6.1 s (16,393 rows/s)\n`)
    progress.finish('db copy')
    expect(stream.writes.at(-1)).toBe('db copy: 100,000 rows in 6.1 s (16,393 rows/s)\n')
  })

  test('bytes; a line wider than the terminal is cut; a failure ends the line being redrawn', () => {
    const { stream, clock, progress } = fixture(true, BYTES, 30)
    const backup = progress.step('backup', 450e6)
    clock.advance(4_000)
    backup.update(120e6)
    const line = stream.writes.at(-1)!
    expect(line.startsWith(CLEAR)).toBe(true)
    expect(line.slice(CLEAR.length)).toBe('backup: 120.0 / 450.0 MB, 30…')
    expect(line.length - CLEAR.length).toBeLessThan(30)
    progress.abandon()
    expect(stream.writes.at(-1)).toBe('\n')
    progress.abandon() // nothing drawn since: nothing to end
    expect(stream.writes.filter((w) => w === '\n').length).toBe(1)
  })

  test('a step with no measure shows its elapsed time; its summary replaces it', () => {
    const { stream, clock, progress } = fixture(true)
    const analyze = progress.step('ANALYZE', null)
    expect(stream.writes).toEqual([`${CLEAR}ANALYZE: 0.0 s`])
    clock.advance(2_345)
    analyze.done()
    expect(stream.writes.at(-1)).toBe(`${CLEAR}ANALYZE: 2.3 s\n`)
  })
})

test('time left reads in seconds, minutes, hours', () => {
  expect([duration(400), duration(59_000), duration(125_000), duration(3_840_000)]).toEqual(['1 s', '59 s', '2 min 5 s', '1 h 4 min'])
})
