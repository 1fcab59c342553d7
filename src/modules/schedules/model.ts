/** A workflow's schedule through the API: the body a PUT sends, the answer, the preview. */
import { t } from 'elysia'
import { Integer, IsoDateTime } from '../../http/schemas.ts'

/** The most records one tick starts runs on, and the default. */
export const MAX_TICK_RECORDS = 10_000
export const DEFAULT_TICK_RECORDS = 1_000

const FilterValue = t.Union([t.String({ maxLength: 1000 }), t.Number(), t.Boolean()])

export const ScheduleWhere = t.Record(
  t.String({ minLength: 1, maxLength: 200 }),
  t.Record(t.String(), t.Union([FilterValue, t.Array(FilterValue, { maxItems: 100 })]), {
    description: 'Operator → value: eq, ne, lt, lte, gt, gte, in (an array), contains',
  }),
  {
    description:
      "The records API's typed filters on the collection's schema fields, e.g. `{status: {eq: pending}, placedAt: {lt: '{{now-3d}}'}}`. " +
      'A value `{{now}}`, `{{now-3d}}`, `{{now+2h}}` (s, m, h, d, w) is the tick\'s fire time moved by that much, as a UTC date-time.',
  },
)

const CRON = t.String({ minLength: 1, maxLength: 200, description: "croner's syntax: five fields, or six with seconds first", examples: ['0 9 * * 1-5'] })
const TIMEZONE = t.String({ minLength: 1, maxLength: 100, description: 'An IANA time zone; default UTC', examples: ['Europe/Paris'] })

export const ScheduleBody = t.Object(
  {
    cron: CRON,
    timezone: t.Optional(TIMEZONE),
    records: t.Optional(
      t.Object(
        {
          where: t.Optional(ScheduleWhere),
          limit: t.Optional(Integer({ minimum: 1, maximum: MAX_TICK_RECORDS, description: `Records per tick (default ${DEFAULT_TICK_RECORDS}); the rest wait for the next tick` })),
        },
        { additionalProperties: false },
      ),
    ),
    runAs: t.String({ minLength: 1, maxLength: 320, description: 'The email of the user whose rights the runs use: checked when saved and at every tick' }),
    catchUp: t.Optional(t.UnionEnum(['once', 'skip'], { description: 'After downtime: once (default) starts one tick for all the fire times missed; skip starts none for them' })),
    enabled: t.Optional(t.Boolean({ description: 'Default true' })),
  },
  { additionalProperties: false, $id: 'ScheduleBody' },
)

export const FireTime = t.Object({
  at: t.String({ description: 'The fire time in the schedule\'s time zone, with its UTC offset', examples: ['2026-12-03T09:00:00+01:00'] }),
  utc: IsoDateTime,
})

export const ScheduleAnswer = t.Object(
  {
    cron: t.String(),
    timezone: t.String(),
    records: t.Object({ where: ScheduleWhere, limit: Integer() }),
    runAs: t.String({ description: 'The email of the user the runs act as' }),
    catchUp: t.UnionEnum(['once', 'skip']),
    enabled: t.Boolean(),
    nextAt: t.Array(FireTime, { description: 'The next five fire times (none while disabled)' }),
    lastTick: t.Union(
      [
        t.Object({
          at: IsoDateTime,
          started: Integer({ description: 'Runs started' }),
          skipped: Integer({ description: 'Records skipped: a run of the workflow was already active on them' }),
          failed: Integer({ description: 'Records no run could be started on (the runAs user had lost its rights)' }),
          finished: t.Boolean({ description: 'False while the tick is still starting its runs' }),
          warning: t.Union([t.UnionEnum(['run_as_forbidden', 'over_limit', 'invalid_where']), t.Null()], {
            description: 'run_as_forbidden: the runAs user could no longer run the workflow, nothing started; over_limit: more records matched than the limit; invalid_where: the filter no longer fits the collection\'s schema',
          }),
        }),
        t.Null(),
      ],
      { description: 'The latest tick, null before the first' },
    ),
  },
  { $id: 'ScheduleAnswer' },
)

export const SchedulePreviewBody = t.Object({ cron: CRON, timezone: t.Optional(TIMEZONE) }, { additionalProperties: false })
export const SchedulePreview = t.Object({ nextAt: t.Array(FireTime) })
