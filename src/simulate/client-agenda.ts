/**
 * An agenda for closed-loop clients that each have exactly one event
 * pending (the contention scenario: read, reply, write, reply, back off,
 * read…). A binary min-heap of clients in typed arrays, ordered by
 * (time, order scheduled) as {@link EventQueue} is, so a run takes events in
 * the very same order; but handling an event and scheduling the same
 * client's next is one sift-down from the root ({@link next}) instead of a
 * pop and a push, and nothing moves but a time, an order and a client index.
 */
export class ClientAgenda {
  private times: Float64Array;
  private orders: Float64Array;
  private clients: Int32Array;
  private readonly kinds: Uint8Array;
  private readonly args: Int32Array;
  private length = 0;
  private scheduled = 0;

  /** The earliest event, read by {@link peek}: its client, time, kind and argument. */
  client = 0;
  time = 0;
  kind = 0;
  arg = 0;

  constructor(clients: number) {
    const n = Math.max(1, clients);
    this.times = new Float64Array(n);
    this.orders = new Float64Array(n);
    this.clients = new Int32Array(n);
    this.kinds = new Uint8Array(n);
    this.args = new Int32Array(n);
  }

  /** Events scheduled since the agenda was made or cleared. */
  get total(): number {
    return this.scheduled;
  }

  /** Forgets every event. */
  clear(): void {
    this.length = 0;
    this.scheduled = 0;
  }

  /** Schedules the first event of `client`, which has none pending. */
  add(client: number, time: number, kind: number, arg: number): void {
    const order = this.scheduled++;
    this.kinds[client] = kind;
    this.args[client] = arg;
    const times = this.times;
    const orders = this.orders;
    const clients = this.clients;
    let i = this.length++;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pt = times[parent]!;
      if (pt < time || (pt === time && orders[parent]! < order)) break;
      times[i] = pt;
      orders[i] = orders[parent]!;
      clients[i] = clients[parent]!;
      i = parent;
    }
    times[i] = time;
    orders[i] = order;
    clients[i] = client;
  }

  /** Reads the earliest event into `client`, `time`, `kind`, `arg`; false when there is none. */
  peek(): boolean {
    if (this.length === 0) return false;
    const client = this.clients[0]!;
    this.client = client;
    this.time = this.times[0]!;
    this.kind = this.kinds[client]!;
    this.arg = this.args[client]!;
    return true;
  }

  /** Replaces the earliest event (its client's) by that client's next one. */
  next(time: number, kind: number, arg: number): void {
    const client = this.clients[0]!;
    this.kinds[client] = kind;
    this.args[client] = arg;
    this.siftDown(time, this.scheduled++, client, this.length);
  }

  /** Removes the earliest event: its client has nothing more to do. */
  drop(): void {
    const last = --this.length;
    if (last > 0) this.siftDown(this.times[last]!, this.orders[last]!, this.clients[last]!, last);
  }

  /** Places (time, order, client) from the root down, in a heap of `length`. */
  private siftDown(time: number, order: number, client: number, length: number): void {
    const times = this.times;
    const orders = this.orders;
    const clients = this.clients;
    // The children are picked without a branch (a heap's comparisons are coin flips to the
    // CPU's predictor): the right child when it is earlier, or as early and scheduled first.
    const last = length - 1;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left > last) break;
      let child = left;
      if (left < last) {
        const lt = times[left]!;
        const rt = times[left + 1]!;
        child +=
          ((rt < lt) as unknown as number) |
          ((rt === lt && orders[left + 1]! < orders[left]!) as unknown as number);
      }
      const ct = times[child]!;
      if (time < ct || (time === ct && order < orders[child]!)) break;
      times[i] = ct;
      orders[i] = orders[child]!;
      clients[i] = clients[child]!;
      i = child;
    }
    times[i] = time;
    orders[i] = order;
    clients[i] = client;
  }
}
