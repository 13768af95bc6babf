import { spawn } from 'node:child_process';

/** What `promtool check metrics` said of an exposition. */
export interface PromtoolResult {
  /** 0: no problem; anything else (or `null`: promtool could not run) is a failure. */
  code: number | null;
  /** Its findings, one a line (empty when all is well). */
  output: string;
}

/**
 * Runs `promtool check metrics` (Debian's `prometheus` package; CI installs
 * it) on `text`. A missing promtool is a failure, never a pass.
 */
export function promtoolCheck(text: string, binary = 'promtool'): Promise<PromtoolResult> {
  return new Promise((resolve) => {
    const child = spawn(binary, ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
    child.once('error', (err) => resolve({ code: null, output: `${binary}: ${err.message}` }));
    child.once('close', (code) => resolve({ code, output: output.trim() }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(text);
  });
}

/** The value of one sample (`name{labels} value`), or undefined when absent. */
export function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => found[k] === v)) return Number(match[3]);
  }
  return undefined;
}
