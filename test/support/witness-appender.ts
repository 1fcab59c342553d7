/**
 * A process appending checkpoints to a witness directory as a witness delivery does (src/executor/witness-delivery.ts
 * `appendWitnessLineOnce`): `bun witness-appender.ts DIR CHECKPOINTS.json` appends each, in order, and prints what
 * came of each; `bun witness-appender.ts DIR --hold` takes the witness lock, prints `held`, and keeps it until killed.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { tryExclusiveFileLock } from '../../src/db/file-lock.ts'
import { appendWitnessLineOnce } from '../../src/executor/witness-delivery.ts'
import type { SignedCheckpoint } from '../../src/lib/audit-checkpoint.ts'
import { WITNESS_LOCK_FILE } from '../../src/lib/audit-witness-file.ts'

const [dir, what] = process.argv.slice(2) as [string, string]
if (what === '--hold') {
  const lock = tryExclusiveFileLock(join(dir, WITNESS_LOCK_FILE))
  if (lock === null) throw new Error('the witness lock is held')
  console.log('held')
  // Referenced for good: a collected connection would close, and its lock go with it.
  setInterval(() => lock, 60_000)
} else {
  const outcomes: string[] = []
  for (const checkpoint of JSON.parse(readFileSync(what, 'utf8')) as SignedCheckpoint[]) outcomes.push(await appendWitnessLineOnce(dir, checkpoint))
  console.log(JSON.stringify(outcomes))
}
