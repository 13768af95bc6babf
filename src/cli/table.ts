/** Shortens `s` to `n` characters with an ellipsis. */
export function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** Prints an aligned, space-separated table to stdout. */
export function printTable(
  header: string[],
  rows: string[][],
  out: NodeJS.WritableStream = process.stdout,
): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd() + '\n';
  out.write(line(header));
  for (const row of rows) out.write(line(row));
}
