import { describe, expect, it } from 'vitest';
import { formatTable, printTable, truncate } from '../../src/cli/table.js';

describe('CLI tables (cli-table3, borderless)', () => {
  it('lays out `requeue dlq list` as the README shows it', () => {
    const text = formatTable(
      ['ID', 'NAME', 'REASON', 'ATTEMPTS', 'DEAD AT', 'LAST ERROR'],
      [
        [
          'order%3A42',
          'job',
          'max-attempts',
          '4',
          '2026-11-22T16:11:23.683Z',
          'service unavailable',
        ],
        [
          '01a20406-c12a-7641-b273-22d493a25178',
          'job',
          'permanent-error',
          '1',
          '2026-11-22T16:11:21.317Z',
          'bad request: the partner refused the payload',
        ],
      ],
    );
    expect(text).toBe(
      [
        'ID                                    NAME  REASON           ATTEMPTS  DEAD AT                   LAST ERROR',
        'order%3A42                            job   max-attempts     4         2026-11-22T16:11:23.683Z  service unavailable',
        '01a20406-c12a-7641-b273-22d493a25178  job   permanent-error  1         2026-11-22T16:11:21.317Z  bad request: the partner refused the payload',
        '',
      ].join('\n'),
    );
  });

  it('right-aligns the columns asked for and leaves no trailing spaces', () => {
    const text = formatTable(
      ['retry', 'p50', 'note'],
      [
        ['0', '501ms', ''],
        ['10', '2.0s', 'x'],
      ],
      {
        align: ['right', 'right'],
      },
    );
    expect(text).toBe(['retry    p50  note', '    0  501ms', '   10   2.0s  x', ''].join('\n'));
  });

  it('fills missing cells and prints a header alone for no rows', () => {
    expect(formatTable(['A', 'BB'], [['x']])).toBe('A  BB\nx\n');
    let written = '';
    printTable(['KEY', 'STATE'], [], {
      write: (chunk: string) => ((written += chunk), true),
    } as unknown as NodeJS.WritableStream);
    expect(written).toBe('KEY  STATE\n');
  });

  it('truncates with an ellipsis', () => {
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });
});
