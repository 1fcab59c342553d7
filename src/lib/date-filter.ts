/** A `<field>.<op>` date filter of a list (`createdAt.lt=…`), parsed: the operator and the instant in epoch µs. */
import type { Micros } from './time.ts'

export const DATE_OPERATORS = ['eq', 'lt', 'lte', 'gt', 'gte'] as const
export type DateOperator = (typeof DATE_OPERATORS)[number]

export interface DateFilter {
  field: string
  op: DateOperator
  /** Microseconds, the unit of note and log times (a list of millisecond times divides it by 1000). */
  at: Micros
}
