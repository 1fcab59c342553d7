/** Which steps share a transaction: everything up to and including a `wait`, never an `http` step. */
import { expect, test } from 'bun:test'
import { stepGroupEnd } from '../src/executor/executor.ts'
import type { Step } from '../src/modules/workflows/definition.ts'

const s = (...types: Step['type'][]) => types.map((type) => ({ type }) as Step)

test.each([
  [s('load', 'update', 'note'), 0, 3],
  [s('load', 'wait', 'update', 'note'), 0, 2],
  [s('load', 'wait', 'update', 'note'), 2, 4],
  [s('load', 'http', 'update'), 0, 1],
  [s('load', 'http', 'update'), 1, 2],
  [s('load', 'http', 'update'), 2, 3],
  [s('http', 'http'), 0, 1],
  [s('wait'), 0, 1],
  [s('load', 'condition', 'update', 'wait', 'http', 'note'), 0, 4],
])('%j from %p ends before %p', (steps, from, end) => {
  expect(stepGroupEnd(steps, from)).toBe(end)
})
