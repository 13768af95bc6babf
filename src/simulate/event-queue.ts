/**
 * The simulators' agenda: a binary min-heap of events kept in parallel typed
 * arrays, so scheduling and taking an event allocate nothing (the arrays
 * double when full). An event is a time, a kind and two integer arguments;
 * events at the same time come out in the order they were scheduled, which
 * keeps a seeded run exactly repeatable.
 */
export class EventQueue {
  private times: Float64Array;
  private orders: Float64Array;
  private kinds: Uint8Array;
  private as: Int32Array;
  private bs: Int32Array;
  private length = 0;
  private scheduled = 0;

  /** The event last taken by {@link pop}: its time, kind and arguments. */
  time = 0;
  kind = 0;
  a = 0;
  b = 0;

  constructor(capacity = 1024) {
    const n = Math.max(2, capacity);
    this.times = new Float64Array(n);
    this.orders = new Float64Array(n);
    this.kinds = new Uint8Array(n);
    this.as = new Int32Array(n);
    this.bs = new Int32Array(n);
  }

  /** Events waiting. */
  get size(): number {
    return this.length;
  }

  /** Events scheduled since the queue was made or last cleared. */
  get total(): number {
    return this.scheduled;
  }

  /** Forgets every event (the arrays stay, for the next run). */
  clear(): void {
    this.length = 0;
    this.scheduled = 0;
  }

  /** Schedules an event of `kind` at `time` with arguments `a` and `b` (32-bit integers). */
  push(time: number, kind: number, a: number, b: number): void {
    if (this.length === this.times.length) this.grow();
    const order = this.scheduled++;
    const times = this.times;
    const orders = this.orders;
    let i = this.length++;
    // Sift up: move parents down until the new event's place is found.
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pt = times[parent]!;
      if (pt < time || (pt === time && orders[parent]! < order)) break;
      this.move(parent, i);
      i = parent;
    }
    times[i] = time;
    orders[i] = order;
    this.kinds[i] = kind;
    this.as[i] = a;
    this.bs[i] = b;
  }

  /** Takes the earliest event into `time`, `kind`, `a`, `b`; false when there is none. */
  pop(): boolean {
    if (this.length === 0) return false;
    this.time = this.times[0]!;
    this.kind = this.kinds[0]!;
    this.a = this.as[0]!;
    this.b = this.bs[0]!;
    const last = --this.length;
    if (last === 0) return true;
    const times = this.times;
    const orders = this.orders;
    const time = times[last]!;
    const order = orders[last]!;
    const kind = this.kinds[last]!;
    const a = this.as[last]!;
    const b = this.bs[last]!;
    // Sift the last event down from the root.
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= last) break;
      const right = left + 1;
      let child = left;
      if (
        right < last &&
        (times[right]! < times[left]! ||
          (times[right] === times[left] && orders[right]! < orders[left]!))
      )
        child = right;
      const ct = times[child]!;
      if (time < ct || (time === ct && order < orders[child]!)) break;
      this.move(child, i);
      i = child;
    }
    times[i] = time;
    orders[i] = order;
    this.kinds[i] = kind;
    this.as[i] = a;
    this.bs[i] = b;
    return true;
  }

  private move(from: number, to: number): void {
    this.times[to] = this.times[from]!;
    this.orders[to] = this.orders[from]!;
    this.kinds[to] = this.kinds[from]!;
    this.as[to] = this.as[from]!;
    this.bs[to] = this.bs[from]!;
  }

  private grow(): void {
    const n = this.times.length * 2;
    const grow = <T extends Float64Array | Uint8Array | Int32Array>(old: T, next: T): T => {
      next.set(old);
      return next;
    };
    this.times = grow(this.times, new Float64Array(n));
    this.orders = grow(this.orders, new Float64Array(n));
    this.kinds = grow(this.kinds, new Uint8Array(n));
    this.as = grow(this.as, new Int32Array(n));
    this.bs = grow(this.bs, new Int32Array(n));
  }
}
