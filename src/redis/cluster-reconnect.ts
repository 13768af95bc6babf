import type { Cluster, ClusterNode, ClusterOptions } from 'ioredis';

/**
 * Two ways an ioredis Cluster (5.x) that connects again from scratch — its
 * own reconnect after losing every node, or BullMQ's recovery of a worker's
 * blocking connection (`disconnect()`, then `connect()`, awaited) — can stay
 * stuck after a master dies, and with it a worker's fetch: waiting jobs wait
 * and delayed ones are never promoted.
 *
 * - **Only the seeds.** A connection from scratch goes to the nodes the
 *   Cluster was created with and to no other, and `duplicate()` (BullMQ's
 *   blocking connection) copies them. When the seed was the master that
 *   died, it never connects again ("None of startup nodes is available").
 * - **A `connect()` that never settles.** When the new connection's ready
 *   check fails (`cluster_state:fail`: the master is dead and its replica not
 *   yet promoted), ioredis disconnects and reconnects by itself, but drops
 *   the promise `connect()` returned: it neither resolves when the cluster is
 *   ready a moment later nor rejects (redis/ioredis#709, #741).
 *
 * The fields replaced here are private in ioredis's typings (`startupNodes`)
 * or public (`connect`, `duplicate`); `test/unit/cluster-reconnect.test.ts`
 * fails if they go.
 */
interface MendedCluster {
  startupNodes: ClusterNode[];
  connect(): Promise<void>;
  duplicate(overrideStartupNodes?: ClusterNode[], overrideOptions?: ClusterOptions): Cluster;
}

/** A `connect()` call waiting for the cluster to be ready. */
interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

/** `host:port` of a startup node given as a port, a `host:port` string, a URL or an object. */
export function startupNodeId(node: ClusterNode): string {
  if (typeof node === 'number' || /^\d+$/.test(String(node))) return `127.0.0.1:${node}`;
  if (typeof node === 'string') {
    if (!node.includes('://')) return node;
    const url = new URL(node);
    return `${url.hostname}:${url.port || 6379}`;
  }
  return `${node.host ?? '127.0.0.1'}:${node.port ?? 6379}`;
}

/** The nodes the cluster last learned of (CLUSTER SLOTS: masters and replicas). */
function knownNodes(cluster: Cluster): ClusterNode[] {
  return cluster
    .nodes('all')
    .map((node) => ({ host: node.options.host, port: node.options.port }))
    .filter((node) => node.host !== undefined && node.port !== undefined);
}

/**
 * Mends both (see the module's comment), for `cluster` and every duplicate
 * made of it: after each refresh of its slots, its startup nodes become its
 * seeds followed by every node it knows now; and `connect()` also resolves
 * when the cluster becomes ready after a reconnect of its own, and rejects
 * when it ends. Returns `cluster`.
 */
export function mendClusterReconnect(cluster: Cluster): Cluster {
  const mended = cluster as unknown as MendedCluster;
  const seeds = [...mended.startupNodes];
  cluster.on('refresh', () => {
    const known = knownNodes(cluster);
    if (known.length === 0) return;
    const byId = new Map<string, ClusterNode>();
    for (const node of [...seeds, ...known]) {
      if (!byId.has(startupNodeId(node))) byId.set(startupNodeId(node), node);
    }
    mended.startupNodes = [...byId.values()];
  });

  // One listener each, whatever the number of connect() calls pending: ioredis
  // calls connect() itself on every reconnect, and those it dropped wait here.
  const pending = new Set<Waiter>();
  const settleAll = (how: (waiter: Waiter) => void) => {
    const all = [...pending];
    pending.clear();
    for (const p of all) how(p);
  };
  cluster.on('ready', () => settleAll((p) => p.resolve()));
  cluster.on('end', () => settleAll((p) => p.reject(new Error('Connection is closed.'))));
  const connect = mended.connect.bind(cluster);
  mended.connect = () =>
    new Promise<void>((resolve, reject) => {
      const entry = { resolve, reject };
      pending.add(entry);
      connect().then(
        () => {
          pending.delete(entry);
          resolve();
        },
        (err: unknown) => {
          pending.delete(entry);
          reject(err as Error);
        },
      );
    });

  const duplicate = mended.duplicate.bind(cluster);
  mended.duplicate = (overrideStartupNodes = [], overrideOptions = {}) =>
    mendClusterReconnect(
      duplicate(
        overrideStartupNodes.length > 0 ? overrideStartupNodes : [...mended.startupNodes],
        overrideOptions,
      ),
    );
  return cluster;
}
