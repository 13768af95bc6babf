import { Redis } from 'ioredis';
import { createQueue } from './src/scheduler/queue.js';
const r = new Redis();
for (const n of [100, 10_000]) {
  const name = `fair-mem-${n}`;
  const q = createQueue(name, { connection: r });
  for (let s = 0; s < n; s += 1000)
    await q.addBulk(Array.from({ length: Math.min(1000, n - s) }, (_, i) => ({ name: 'j', data: {}, opts: { dispatchKey: `tenant-${s + i}` } })));
  const bytes = Number(await r.memory('USAGE', `requeue:{${name}}:fair`, 'SAMPLES', '0'));
  console.log(n, 'keys:', bytes, 'bytes,', (bytes / n).toFixed(1), 'per key (key names 8-12 chars)');
  await q.bull.obliterate({ force: true });
  await r.del(`requeue:{${name}}:fair`);
  await q.close();
}
r.disconnect();
