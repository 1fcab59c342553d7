/** `--quiet` and the progress of the long commands (`db copy`, `backup`): on stderr, see ../lib/progress.ts. */
import { createProgress, type Progress, type ProgressUnit, silentProgress } from '../lib/progress.ts'
import { booleanFlag, type Io, type Parsed } from './command.ts'

export const QUIET_FLAG = booleanFlag('show no progress on stderr (the result lines on stdout are the same)')

/** The command's progress reporter, or one that prints nothing under --quiet. */
export function progressOf(io: Io, parsed: Parsed, unit: ProgressUnit): Progress {
  return parsed.values.quiet === true ? silentProgress : createProgress(io.progress, unit)
}
