/** The rows for `ids`, in the order of `ids` (a page's order), skipping ids with no row. */
export function inIdOrder<Row, Id>(ids: Id[], rows: Row[], idOf: (row: Row) => Id): Row[] {
  const byId = new Map(rows.map((row) => [idOf(row), row]))
  return ids.flatMap((id) => {
    const row = byId.get(id)
    return row === undefined ? [] : [row]
  })
}
