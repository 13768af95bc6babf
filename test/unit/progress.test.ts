import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ProgressBar } from '../../src/cli/progress.js';

/** A stream that says it is a terminal, collecting what is drawn. */
function fakeTerminal(isTTY: boolean): { stream: NodeJS.WriteStream; text: () => string } {
  const stream = Object.assign(new PassThrough(), { isTTY, columns: 120 });
  let text = '';
  stream.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  return { stream: stream as unknown as NodeJS.WriteStream, text: () => text };
}

describe('ProgressBar (cli-progress)', () => {
  it('draws label, bar, percentage and counts on a terminal, and ends the line', async () => {
    const { stream, text } = fakeTerminal(true);
    const bar = new ProgressBar('replay', stream);
    bar.update(0, 10);
    bar.update(10, 10);
    bar.finish();
    bar.finish();
    await new Promise((resolve) => setImmediate(resolve));
    expect(text()).toContain(`replay ${'░'.repeat(30)} 0% 0/10`);
    expect(text()).toMatch(new RegExp(`replay ${'█'.repeat(30)} 100% 10/10 \\(\\d+/s\\)`));
    expect(text().endsWith('\n')).toBe(true);
  });

  it('writes nothing when stderr is not a terminal, so --json output stays clean', async () => {
    const { stream, text } = fakeTerminal(false);
    const bar = new ProgressBar('purge', stream);
    bar.update(1, 2);
    bar.update(2, 2);
    bar.finish();
    await new Promise((resolve) => setImmediate(resolve));
    expect(text()).toBe('');
  });
});
