import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's chromium (no download); `CHROMIUM_PATH` names another. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** A headless chromium with a profile of its own, and its first page. */
export interface OpenChromium {
  context: BrowserContext;
  page: Page;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/** Starts chromium headless at `viewport`, offline but for what the test loads. */
export async function openChromium(viewport: {
  width: number;
  height: number;
}): Promise<OpenChromium> {
  if (!existsSync(chromiumPath))
    throw new Error(`${chromiumPath} not found: apt-get install chromium (or set CHROMIUM_PATH)`);
  const profile = await mkdtemp(join(tmpdir(), 'requeue-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}
