import type { Worker } from 'bullmq';
import { systemClock, type Clock } from '../../util/system.js';

/**
 * Where BullMQ 6.7's fetching scripts take the fetching worker's time: ARGV[2],
 * after their keys. Both promote the delayed jobs due by then
 * (`includes/promoteDelayedJobs.lua`); `moveToFinished` only when it fetches
 * the next job. requeue's own `moveToDelayed` is given its time already.
 */
const moveToActiveKeys = 11;

/** `moveToActive`'s reply when it fetched nothing and nothing is due (`[job, id, limit delay, delay until]`). */
const noJob = Object.freeze([0, 0, 0, 0]);

/** What of BullMQ's backend and worker this module wraps (public in its typings or not). */
interface TimedBackend {
  readonly moveToFinishedKeys: readonly unknown[];
  execCommand(client: unknown, commandName: string, args: unknown[]): unknown;
  moveToFinished(jobId: string, args: unknown[]): Promise<unknown>;
}
interface TimedWorker {
  updateDelays(limitDelay?: number, delayUntil?: number): void;
}

/**
 * Has BullMQ's fetches of `worker` promote delayed jobs on `redisClock`
 * (Redis's time as the worker last measured it, `clock-watch.ts`) instead of
 * BullMQ's own `Date.now()`: a worker whose clock runs fast then releases no
 * one's delayed job early. The time is replaced in the arguments in place, so
 * BullMQ's `finishedOn` reads the same. The next due time a fetch replies
 * with (Redis's time) is turned back into BullMQ's clock before BullMQ sets
 * its blocking wait by it, so a fast clock does not spin on the fetch. A
 * paused worker's fetch fetches nothing.
 *
 * `beforeFetch` is called synchronously just before each command that
 * promotes delayed jobs (`moveToActive`, `moveToFinished`, `moveToDelayed`)
 * is sent: a command it sends on the same connection reaches Redis first
 * (`retry-promoter.ts`).
 */
export function fetchOnRedisTime(
  worker: Worker,
  redisClock: Clock,
  beforeFetch?: (now?: number) => void,
): void {
  const backend = (worker as unknown as { backend: TimedBackend }).backend;
  /** Redis's time in place of BullMQ's, returned (for `beforeFetch`: one clock read per fetch). */
  const retime = (args: unknown[], at: number): number | undefined => {
    if (typeof args[at] !== 'number') return undefined;
    return (args[at] = redisClock.now());
  };
  const exec = backend.execCommand.bind(backend);
  backend.execCommand = (client, commandName, args) => {
    if (commandName === 'moveToActive') {
      // A fetch that was already waiting when the worker paused (BullMQ's blocking
      // wait, then its fetch, checks no pause in between) fetches nothing: a pause
      // (an open circuit, a clock past its bound) stops every fetch at once.
      if (worker.isPaused()) return Promise.resolve(noJob);
      // Retimed first: `beforeFetch?.(retime(…))` would skip the retime with no promoter.
      const now = retime(args, moveToActiveKeys + 1);
      beforeFetch?.(now);
    } else if (commandName === 'moveToDelayed') beforeFetch?.();
    return exec(client, commandName, args);
  };
  const moveToFinished = backend.moveToFinished.bind(backend);
  backend.moveToFinished = (jobId, args) => {
    const now = retime(args, backend.moveToFinishedKeys.length + 1);
    beforeFetch?.(now);
    return moveToFinished(jobId, args);
  };
  const timed = worker as unknown as TimedWorker;
  const updateDelays = timed.updateDelays.bind(worker);
  timed.updateDelays = (limitDelay, delayUntil) =>
    updateDelays(
      limitDelay,
      delayUntil !== undefined && delayUntil > 0
        ? delayUntil - (redisClock.now() - systemClock.now())
        : delayUntil,
    );
}
