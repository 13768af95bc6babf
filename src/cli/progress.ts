/**
 * A one-line progress bar on stderr, redrawn in place on a terminal and
 * silent elsewhere (pipes, CI logs), so `--json` output stays clean.
 */
export class ProgressBar {
  private readonly startedAt = performance.now();
  private lastDrawAt = -Infinity;
  private readonly enabled: boolean;

  constructor(
    private readonly label: string,
    private readonly stream: NodeJS.WriteStream = process.stderr,
  ) {
    this.enabled = Boolean(stream.isTTY);
  }

  update(done: number, total: number): void {
    if (!this.enabled) return;
    const now = performance.now();
    if (now - this.lastDrawAt < 80 && done < total) return;
    this.lastDrawAt = now;
    const width = 30;
    const ratio = total > 0 ? Math.min(1, done / total) : 1;
    const filled = Math.round(ratio * width);
    const rate = done / Math.max(0.001, (now - this.startedAt) / 1000);
    const bar = '█'.repeat(filled) + '░'.repeat(width - filled);
    this.stream.write(
      `\r${this.label} ${bar} ${(ratio * 100).toFixed(0).padStart(3)}% ${done}/${total} (${rate.toFixed(0)}/s)`,
    );
  }

  finish(): void {
    if (this.enabled) this.stream.write('\n');
  }
}
