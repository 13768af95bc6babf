import { performance } from 'node:perf_hooks';

/**
 * Resolves `finished` with the `performance.now()` of the `target`-th tick,
 * so a run is timed by the events its worker emits rather than by polling.
 * Rejects after `timeoutMs` with what `describe` says about the stuck run.
 */
export class Countdown {
  readonly finished: Promise<number>;
  private count = 0;
  private resolve!: (at: number) => void;
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly target: number,
    timeoutMs: number,
    describe: () => Promise<string>,
  ) {
    let reject!: (err: Error) => void;
    this.finished = new Promise<number>((res, rej) => {
      this.resolve = res;
      reject = rej;
    });
    this.timer = setTimeout(() => {
      void describe()
        .catch((err: unknown) => String(err))
        .then((state) =>
          reject(
            new Error(`only ${this.count} of ${target} jobs done after ${timeoutMs} ms: ${state}`),
          ),
        );
    }, timeoutMs);
    this.timer.unref();
    if (target === 0) this.finish();
  }

  /** Counts one finished job. */
  tick = (): void => {
    this.count += 1;
    if (this.count === this.target) this.finish();
  };

  private finish(): void {
    clearTimeout(this.timer);
    this.resolve(performance.now());
  }
}
