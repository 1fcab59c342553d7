/**
 * The retry schedule of Trellis's outboxes (completion callbacks, e-mail): the wait after the `failed`th failed
 * attempt is `baseMs` doubling (1, 2, 4 … times it) up to `capMultiple` times it, each ±25 % at random (jitter: a
 * receiver coming back is not hit by every sender at once).
 */
export function backoffDelayMs(failed: number, baseMs: number, capMultiple: number, random = Math.random): number {
  const step = baseMs * Math.min(2 ** (failed - 1), capMultiple)
  return Math.round(step * (0.75 + random() * 0.5))
}
