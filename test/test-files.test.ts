/**
 * The lists `npm test` schedules by (scripts/test-files.ts): each names test files that exist, each file once — a
 * file named twice in the PostgreSQL pass ran twice; a file that no longer exists would be passed to `bun test`.
 */
import { expect, test } from 'bun:test'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { ALONE, LONGEST_FIRST, POSTGRES_PASS, SATURATING, TIMING_SENSITIVE } from '../scripts/test-files.ts'

const root = join(import.meta.dir, '..')

test('every list of test files names existing files, each once', () => {
  for (const [name, files] of Object.entries({ ALONE, LONGEST_FIRST, POSTGRES_PASS, SATURATING, TIMING_SENSITIVE })) {
    expect(files.filter((file) => !existsSync(join(root, file))), `${name}: missing`).toEqual([])
    expect(files.filter((file, i) => files.indexOf(file) !== i), `${name}: twice`).toEqual([])
  }
})

test('the saturating files are timing files (npm test runs them after the others, with nothing beside them)', () => {
  expect(SATURATING.filter((file) => !ALONE.includes(file))).toEqual([])
})
