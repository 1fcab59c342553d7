/** A `<field>.<op>` date filter of a list (`createdAt.lt=…`), parsed: the operator and the instant in epoch ms. */

export const DATE_OPERATORS = ['eq', 'lt', 'lte', 'gt', 'gte'] as const
export type DateOperator = (typeof DATE_OPERATORS)[number]

export interface DateFilter {
  field: string
  op: DateOperator
  ms: number
}
