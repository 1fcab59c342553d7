/**
 * The worker threads' entrypoints, as URLs resolved from this file at the root of src/. `bun build --compile` embeds
 * each extra entrypoint (listed in package.json "build") at its path relative to src/, and gives every bundled
 * module the bundle root's `import.meta.url`: only a URL written relative to src/ finds the file both in the source
 * tree and in the binary (test/binary.test.ts checks the binary's checkpoints and backups).
 */
export const WORKER_ENTRYPOINTS = {
  walCheckpoint: new URL('./db/sqlite/checkpoint-worker.ts', import.meta.url),
  backup: new URL('./db/sqlite/backup-worker.ts', import.meta.url),
}
