/**
 * The CLI's tables: cli-table3 laid out borderless, columns two spaces
 * apart, so output reads as plain aligned text and survives `grep`/`awk`.
 */
import { createRequire } from 'node:module';
import type TableClass from 'cli-table3';

// Loaded on the first table, not at start-up: a command that prints JSON never pays for it.
let Table: typeof TableClass | undefined;
const loadTable = (): typeof TableClass =>
  (Table ??= createRequire(import.meta.url)('cli-table3') as typeof TableClass);

/** Shortens `s` to `n` characters with an ellipsis. */
export function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 1)}…`;
}

/** Options of {@link formatTable}. */
export interface TableOptions {
  /** Alignment per column; columns not listed are left-aligned. @defaultValue `[]` */
  align?: readonly ('left' | 'right')[];
}

const borderless = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: '',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '  ',
};

/** An aligned table, header first, one line per row, no trailing spaces. */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  { align = [] }: TableOptions = {},
): string {
  const table = new (loadTable())({
    head: [...header],
    chars: borderless,
    colAligns: header.map((_, col) => align[col] ?? 'left'),
    // No colours, no padding: the two-space `middle` separates the columns.
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0, compact: true },
  });
  table.push(...rows.map((row) => header.map((_, col) => row[col] ?? '')));
  return `${table
    .toString()
    .split('\n')
    .map((line) => line.trimEnd())
    .join('\n')}\n`;
}

/** Prints {@link formatTable}'s table to `out` (stdout unless given). */
export function printTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  out: NodeJS.WritableStream = process.stdout,
): void {
  out.write(formatTable(header, rows));
}
