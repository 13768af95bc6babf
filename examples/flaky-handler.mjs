// A handler for trying requeue out: `data.fail` decides what happens.
//   {"fail":"transient","times":2}  → 503 twice, then success
//   {"fail":"permanent"}            → 400: dead-lettered after one attempt
//   {"fail":"always"}               → 503 every time: dead-lettered after max attempts
export default async function handler(job) {
  const { fail, times = 1 } = job.data ?? {};
  const error = (status, message) => Object.assign(new Error(message), { status });
  if (fail === 'permanent') throw error(400, 'bad request: the partner refused the payload');
  if (fail === 'always') throw error(503, 'service unavailable');
  if (fail === 'transient' && job.attempt <= times)
    throw error(503, `transient failure ${job.attempt}/${times}`);
  return { ok: true, attempt: job.attempt };
}
