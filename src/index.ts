/**
 * requeue's public API. Internal modules stay unexported on purpose.
 */
export { systemClock, systemRandom } from './util/system.js';
export type { Clock, Random } from './util/system.js';
export { seededRandom } from './util/random.js';
export { ConfigError } from './config/env.js';
export { createLogger } from './config/logger.js';
