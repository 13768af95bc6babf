import { createQueue } from '/work/wt/a2-fair/src/scheduler/queue.js';
import { Redis } from 'ioredis';
const r = new Redis();
const name = 'smoke-fair-' + Date.now();
const q = createQueue(name, { connection: r });
await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'a', data: { i }, opts: { dispatchKey: 'A' } })));
await q.add('b', {}, { dispatchKey: 'B', idempotencyKey: 'bee' });
const again = await q.add('b', {}, { dispatchKey: 'C', idempotencyKey: 'bee' });
await q.add('u', {});
console.log(await r.zrange(`bull:${name}:prioritized`, 0, -1, 'WITHSCORES'));
console.log(await r.zrange(`requeue:{${name}}:fair`, 0, -1, 'WITHSCORES'), await r.get(`bull:${name}:pc`), again);
console.log(await q.counts());
try { await q.add('x', {}, { dispatchKey: '' }); } catch (e) { console.log(String(e)); }
try { await q.add('x', {}, { dispatchKey: 'a', dispatchWeight: 0 }); } catch (e) { console.log(String(e)); }
try { await q.addBulk([{name:'x', data:{}, opts: { dispatchKey: 'x'.repeat(201) }}, {name:'x', data:{}, opts: { dispatchKey: 'x'.repeat(201) }}]); } catch (e) { console.log(String(e)); }
try { createQueue('x', { dispatchWeights: { a: -1 } }); } catch (e) { console.log(String(e)); }
await q.bull.obliterate({ force: true });
await r.del(`requeue:{${name}}:fair`);
await q.close(); r.disconnect();
