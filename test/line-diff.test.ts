/** The line diff the console shows between two workflow versions (src/lib/line-diff.ts): pure, no store. */
import { describe, expect, test } from 'bun:test'
import { lineDiff } from '../src/lib/line-diff.ts'

const marks = (before: string, after: string) => lineDiff(before, after).map((l) => `${l.kind === 'added' ? '+' : l.kind === 'removed' ? '-' : ' '}${l.text}`)

describe('lineDiff', () => {
  test('equal texts are all the same lines', () => {
    expect(marks('a\nb', 'a\nb')).toEqual([' a', ' b'])
  })

  test('an insertion, a removal and a change, each where it happened', () => {
    expect(marks('a\nb\nc', 'a\nx\nb\nc')).toEqual([' a', '+x', ' b', ' c'])
    expect(marks('a\nb\nc', 'a\nc')).toEqual([' a', '-b', ' c'])
    expect(marks('a\nb\nc\nd', 'a\nB\nc\nd')).toEqual([' a', '-b', '+B', ' c', ' d'])
  })

  test('the longest common part is kept: moved blocks show as one removal and one addition', () => {
    expect(marks('x\na\nb\nc', 'a\nb\nc\nx')).toEqual(['-x', ' a', ' b', ' c', '+x'])
  })

  test('both sides are reproduced exactly, also when the middle is too large to compare line by line', () => {
    const before = Array.from({ length: 3000 }, (_, i) => `line ${i}`).join('\n')
    const after = Array.from({ length: 3000 }, (_, i) => `line ${i % 2 === 0 ? i : -i}`).join('\n')
    for (const [a, b] of [['', 'a'], ['a', ''], [before, after]]) {
      const lines = lineDiff(a!, b!)
      expect(lines.filter((l) => l.kind !== 'added').map((l) => l.text).join('\n')).toBe(a!)
      expect(lines.filter((l) => l.kind !== 'removed').map((l) => l.text).join('\n')).toBe(b!)
    }
  })
})
