import type { Clock } from './system.js';

/** A clock that moves only when told to: for tests and simulations. */
export class ManualClock implements Clock {
  constructor(private current: number) {}

  now(): number {
    return this.current;
  }

  /** Moves the clock forward by `ms`. */
  advance(ms: number): void {
    this.current += ms;
  }

  set(ms: number): void {
    this.current = ms;
  }
}
