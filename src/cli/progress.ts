/**
 * A one-line progress bar on stderr through cli-progress: redrawn in place
 * on a terminal (at most 10 times a second) and silent elsewhere (pipes, CI
 * logs), so `--json` output stays clean.
 */
import { SingleBar } from 'cli-progress';

export class ProgressBar {
  private readonly startedAt = performance.now();
  private readonly bar: SingleBar;
  private started = false;

  constructor(label: string, stream: NodeJS.WriteStream = process.stderr) {
    this.bar = new SingleBar({
      stream,
      format: `${label} {bar} {percentage}% {value}/{total} ({rate}/s)`,
      barsize: 30,
      barCompleteChar: '█',
      barIncompleteChar: '░',
      // The commands stop the bar themselves, on Ctrl-C too.
      gracefulExit: false,
    });
  }

  /** Shows `done` of `total`; the first call starts the bar. */
  update(done: number, total: number): void {
    const rate = (done / Math.max(0.001, (performance.now() - this.startedAt) / 1000)).toFixed(0);
    if (!this.started) {
      this.started = true;
      this.bar.start(total, done, { rate });
      return;
    }
    this.bar.setTotal(total);
    this.bar.update(done, { rate });
  }

  /** Draws the last state and ends the line; safe to call more than once. */
  finish(): void {
    this.bar.stop();
  }
}
