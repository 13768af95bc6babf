import type { Death, DeferralReason } from './attempt-history.js';
import type { AttemptRecord, JobState } from './job-state.js';

/**
 * What became of one attempt, whatever the handler did: a tagged value the
 * worker applies with one fenced move. Every variant carries the state to
 * store with the move.
 */
export type AttemptOutcome =
  | {
      kind: 'completed';
      /** The handler's value, made storable (see `storableResult`). */
      result: unknown;
      state: JobState;
      /** The state changed (stalls recorded) and must be written before completing. */
      stateChanged: boolean;
    }
  | {
      kind: 'retry';
      delayMs: number;
      retryAt: number;
      state: JobState;
      record: AttemptRecord;
      /** The thrown value's stack (`stackOf` in `classify/describe-error.ts`): kept as BullMQ's `stacktrace`, shown redacted. */
      stack?: string;
    }
  | { kind: 'dead'; death: Death; state: JobState }
  | { kind: 'deferred'; retryAt: number; key: string; reason: DeferralReason; state: JobState };

/**
 * A handler's value, serialised once: BullMQ stores {@link json} as the job's
 * `returnvalue` verbatim (`src/scheduler/bull-completion.ts`), so the
 * handler's object is never read again — a getter that works once, a
 * `toJSON` that changes its mind, a `then` that appears later cannot fail a
 * completion that was already decided.
 */
export class StoredResult {
  private copy: unknown;

  constructor(
    /** What is stored. */
    readonly json: string,
    /** The handler's own value (for `job:completed`). */
    readonly value: unknown,
  ) {}

  /**
   * The stored value, parsed from {@link json}: whatever else serialises this
   * (BullMQ's own check before its move, its telemetry) writes the same text,
   * without touching the handler's value.
   */
  toJSON(): unknown {
    this.copy ??= JSON.parse(this.json) as unknown;
    return this.copy;
  }
}

/**
 * A handler's return value as BullMQ can store it (JSON), serialised here
 * once: a value JSON always stores as is (a string, a finite number, a
 * boolean, null, undefined) is returned itself; any other becomes a
 * {@link StoredResult}. A value that cannot be serialised (a BigInt, a cycle,
 * a throwing `toJSON` or getter) becomes a note saying so, because the work
 * it reports has been done and must not run again.
 */
export function storableResult(value: unknown): unknown {
  // What JSON always stores (most handlers return one of these): no test needed.
  if (value === undefined || value === null) return value;
  const type = typeof value;
  if (type === 'string' || type === 'boolean' || (type === 'number' && Number.isFinite(value)))
    return value;
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    return { requeueUnstorableResult: describeUnstorable(err) };
  }
  // A function or a symbol: JSON has nothing to store (BullMQ stores null).
  return json === undefined ? undefined : new StoredResult(json, value);
}

/**
 * Details a handler added with `annotate()`, as they will be stored: each
 * field that serialises is kept; one that does not (a BigInt, a cycle, a
 * getter that throws) is left out and named in `annotateError`, so one bad
 * value neither loses the others nor keeps the attempt's record from being stored.
 */
export function storableDetails(
  details: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  if (details === undefined) return undefined;
  try {
    const copy = JSON.parse(JSON.stringify(details)) as unknown;
    return typeof copy === 'object' && copy !== null && !Array.isArray(copy)
      ? (copy as Record<string, unknown>)
      : { annotateError: 'annotate() needs an object' };
  } catch (err) {
    return storableFields(details, err);
  }
}

/** The fields of `details` that serialise, and a note naming those that do not. */
function storableFields(details: Record<string, unknown>, whole: unknown): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  const dropped: string[] = [];
  let names: string[];
  try {
    names = Object.keys(details);
  } catch (err) {
    return { annotateError: describeUnstorable(err) };
  }
  for (const name of names) {
    if (name === 'annotateError') continue;
    try {
      const text = JSON.stringify(details[name]);
      if (text === undefined) continue;
      // defineProperty: a field named `__proto__` stays a field.
      Object.defineProperty(kept, name, {
        value: JSON.parse(text) as unknown,
        enumerable: true,
        writable: true,
        configurable: true,
      });
    } catch (err) {
      dropped.push(`${name.slice(0, 50)} (${describeUnstorable(err)})`);
    }
  }
  kept['annotateError'] =
    dropped.length > 0 ? `left out ${dropped.join('; ')}`.slice(0, 500) : describeUnstorable(whole);
  return kept;
}

function describeUnstorable(err: unknown): string {
  try {
    return `not storable as JSON: ${String((err as Error).message)
      .split('\n')[0]!
      .slice(0, 200)}`;
  } catch {
    return 'not storable as JSON';
  }
}
