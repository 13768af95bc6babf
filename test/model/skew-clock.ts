/**
 * The model's skewed-clock operation (issue 21, part 9): worker `index` is
 * SIGKILLed and started again with its clock (`Date.now`) shifted by
 * `skewMs`, then delayed jobs are added and checked: none may start before
 * it is due, beyond the stated bound ({@link earlyBoundMs}). A worker past its
 * `maxClockSkewMs` fetches nothing, so it is put back on a true clock after
 * the check (else its jobs would wait for ever); one within its bound (or
 * with a bound past the skew) stays skewed for the rest of the run.
 */
import type fc from 'fast-check';
import type { Model } from './model.js';
import type { ModelJobData, Outcome } from './protocol.js';
import type { RealSystem } from './system.js';

/**
 * How early a job may start: the offset measurement's error (half its round
 * trip and 1.5 ms), with room for round trips slowed by a loaded machine. A
 * job a skewed clock released early starts about `delayMs` early.
 */
export const earlyBoundMs = 200;
/** The delay of the jobs the operation adds. */
const delayMs = 1_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function redisNow(r: RealSystem): Promise<number> {
  const [s, us] = await r.admin.time();
  return Number(s) * 1000 + Number(us) / 1000;
}

export class SkewClock implements fc.AsyncCommand<Model, RealSystem> {
  constructor(
    readonly index: number,
    readonly skewMs: number,
    /** The worker's `maxClockSkewMs`; `undefined`: its default (5 s). */
    readonly maxSkewMs: number | undefined,
  ) {}

  check(m: Readonly<Model>): boolean {
    return this.index < m.config.workers;
  }

  async run(m: Model, r: RealSystem): Promise<void> {
    m.step += 1;
    r.journal.push(`#${m.step} ${this.toString()}`);
    const env: Record<string, string> = { SKEW_MS: String(this.skewMs) };
    if (this.maxSkewMs !== undefined) env.MAX_SKEW_MS = String(this.maxSkewMs);
    m.disturbed(await r.crash(this.index, env));
    const plan: Outcome[][] = [['ok']];
    const due = new Map<number, number>();
    for (let i = 0; i < 3; i += 1) {
      const seq = m.nextSeq++;
      const data: ModelJobData = { seq, plan };
      const added = await r.queue.add('model', data, { delayMs });
      m.add(seq, undefined, plan, added.id);
      // BullMQ's due time: the add's timestamp (the producer's true clock) plus the delay.
      const at = Number(await r.admin.hget(`${r.queue.bull.toKey(added.id)}`, 'timestamp'));
      due.set(seq, at + delayMs);
    }
    const firstDue = Math.min(...due.values());
    const waitMs = firstDue - earlyBoundMs - (await redisNow(r));
    if (waitMs > 0) await sleep(waitMs);
    // Runs first, then the time: every run read started before `now`.
    const runs = await r.runs();
    const now = await redisNow(r);
    for (const run of runs) {
      const dueAt = due.get(run.seq);
      if (dueAt !== undefined && now < dueAt - earlyBoundMs)
        m.violations.push(
          `#${m.step} seq ${run.seq} started more than ${earlyBoundMs} ms before it was due ` +
            `(read at ${now}, due ${dueAt}) with worker ${this.index} ${this.skewMs} ms off`,
        );
    }
    const refusing = Math.abs(this.skewMs) > (this.maxSkewMs ?? 5_000);
    if (refusing) m.disturbed(await r.crash(this.index));
  }

  toString(): string {
    return `skewClock(worker ${this.index}, ${this.skewMs} ms, maxClockSkewMs ${this.maxSkewMs ?? 'default'})`;
  }
}
