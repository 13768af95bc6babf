/**
 * requeue refuses, in one line naming the versions it supports, to run on a
 * BullMQ it is not tested with (issue 23, item 1): `src/scheduler/bullmq/`
 * reaches into BullMQ's insides, which a minor release may change silently.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isConfigError } from '../../src/errors/config-error.js';
import {
  assertSupportedBullmq,
  bullmqVersionProblem,
  installedBullmqVersion,
  supportedBullmq,
} from '../../src/scheduler/bullmq/version.js';
import { repoRoot } from '../harness/child.js';

describe('the BullMQ version guard', () => {
  it.each(['6.7.0', '6.7.1', '6.7.12'])('runs on bullmq %s', (version) => {
    expect(bullmqVersionProblem(version)).toBeUndefined();
    expect(() => assertSupportedBullmq(version)).not.toThrow();
  });

  it.each(['6.5.4', '6.6.9', '6.8.0', '6.70.0', '7.7.0', '5.7.0', 'unknown', ''])(
    'refuses bullmq %s in one line naming the supported versions',
    (version) => {
      let thrown: unknown;
      try {
        assertSupportedBullmq(version);
      } catch (err) {
        thrown = err;
      }
      expect(isConfigError(thrown)).toBe(true);
      const message = (thrown as Error).message;
      expect(message.split('\n')).toHaveLength(1);
      expect(message).toBe(
        `bullmq: requeue runs only on bullmq 6.7.x (the version it is tested with), found ${version}: npm install bullmq@6.7`,
      );
    },
  );

  it('accepts the BullMQ installed here (the one the suite tests)', () => {
    expect(installedBullmqVersion()).toMatch(/^6\.7\.\d+$/);
    expect(() => assertSupportedBullmq()).not.toThrow();
  });

  it("package.json's peer range is the supported minor, and the pinned dev version is in it", () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
      peerDependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    expect(pkg.peerDependencies.bullmq).toBe(`${supportedBullmq}.x`);
    expect(bullmqVersionProblem(pkg.devDependencies.bullmq ?? '')).toBeUndefined();
  });
});
