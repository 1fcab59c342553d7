/**
 * The witness file (docs/audit.md "Witnesses"): `checkpoints.jsonl` in TRELLIS_AUDIT_WITNESS_DIR, one checkpoint per
 * line, appended and flushed to the disk before the delivery is recorded. A process killed between the append and the
 * record appends again on its next attempt unless the line is there: the file's end is searched for the checkpoint's
 * id first, so each checkpoint is in the file once. The search and the append hold the witness lock
 * (`checkpoints.jsonl.lock` beside it, src/executor/witness-delivery.ts): two deliveries of one checkpoint — another
 * instance's taking it over when its lease ran out mid-append — never both find it absent.
 */
import { accessSync, closeSync, constants, existsSync, fstatSync, fsyncSync, mkdirSync, openSync, readFileSync, readSync, statSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { parseWitnessLine, type SignedCheckpoint, witnessLine } from './audit-checkpoint.ts'

export const WITNESS_FILE = 'checkpoints.jsonl'
/** The lock a delivery holds while it searches and appends (a SQLite file: the kernel drops a dead holder's lock). */
export const WITNESS_LOCK_FILE = 'checkpoints.jsonl.lock'

/**
 * How far back from the end a checkpoint's line is looked for (about 3,000 lines): deliveries are appended oldest
 * first, one at a time, and one whose record was lost is attempted again at once (the next start) or when its lease
 * runs out — a few lines later at most, on a deployment of several instances.
 */
const SEARCH_BYTES = 1024 * 1024

/** The witness file of a witness directory (or the file itself, given a file). */
export function witnessFilePath(dirOrFile: string): string {
  return existsSync(dirOrFile) && statSync(dirOrFile).isDirectory() ? join(dirOrFile, WITNESS_FILE) : dirOrFile
}

/** What keeps `dir` from being a witness directory (made when missing), or null when its file can be appended to. */
export function witnessDirProblem(dir: string): string | null {
  try {
    mkdirSync(dir, { recursive: true })
    accessSync(dir, constants.W_OK)
    closeSync(openSync(join(dir, WITNESS_FILE), 'a', 0o644))
    return null
  } catch (error) {
    return `cannot write ${join(dir, WITNESS_FILE)} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`
  }
}

/**
 * Appends the checkpoint's line and flushes it to the disk; `already` when the file's end holds it (a retried
 * delivery). The caller holds the witness lock (src/executor/witness-delivery.ts `appendWitnessLineOnce`).
 */
export function appendWitnessLine(dir: string, checkpoint: SignedCheckpoint): 'appended' | 'already' {
  const path = join(dir, WITNESS_FILE)
  const created = !existsSync(path)
  const fd = openSync(path, 'a+', 0o644)
  try {
    const { size } = fstatSync(fd)
    const tail = readTail(fd, size)
    if (tail.includes(`"id":${JSON.stringify(checkpoint.id)}`)) return 'already'
    // A line cut short by a crash mid-write stays alone on its line: the verifier skips it.
    const line = `${size > 0 && !tail.endsWith('\n') ? '\n' : ''}${witnessLine(checkpoint)}\n`
    writeSync(fd, line)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  if (created) fsyncDirectory(dirname(path))
  return 'appended'
}

/** The checkpoints a witness file (or directory) holds, in file order; lines that are not checkpoints are counted apart. */
export function readWitnessFile(dirOrFile: string): { checkpoints: SignedCheckpoint[]; unreadable: number } {
  const checkpoints: SignedCheckpoint[] = []
  let unreadable = 0
  for (const line of readFileSync(witnessFilePath(dirOrFile), 'utf8').split('\n')) {
    if (line.trim() === '') continue
    let parsed: SignedCheckpoint | null = null
    try {
      parsed = parseWitnessLine(JSON.parse(line))
    } catch {
      parsed = null
    }
    if (parsed) checkpoints.push(parsed)
    else unreadable++
  }
  return { checkpoints, unreadable }
}

function readTail(fd: number, size: number): string {
  const length = Math.min(size, SEARCH_BYTES)
  if (length === 0) return ''
  const buffer = Buffer.alloc(length)
  readSync(fd, buffer, 0, length, size - length)
  return buffer.toString('utf8')
}

/** A new file's name reaches the disk with its directory's flush. */
function fsyncDirectory(dir: string): void {
  try {
    const fd = openSync(dir, 'r')
    try {
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
  } catch {
    // Some file systems refuse to flush a directory; the file's own flush has been done.
  }
}
