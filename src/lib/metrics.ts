/** Prometheus metrics (prom-client) in one registry per app instance. */
import { Counter, Registry } from 'prom-client'

export function createMetrics() {
  const registry = new Registry()
  return {
    registry,
    loginFailures: new Counter({
      name: 'trellis_login_failures_total',
      help: 'Failed password logins (never logged with the attempted password)',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
  }
}

export type Metrics = ReturnType<typeof createMetrics>
