/**
 * Every twin of the storage face (./twin.ts), by the SQLite function it stands for (the savepoint's is in ./op-runner.ts): what ./op-runner.ts runs an op's
 * calls through. Each module of twins exports its map; this one joins them.
 */
import { QUEUE_TWINS } from './queue.ts'
import type { PgTwins } from './twin.ts'

export const TWINS: PgTwins = new Map([
  ...QUEUE_TWINS,
])
