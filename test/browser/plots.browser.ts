import { existsSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentionSvg, outageSvg } from '../../src/cli/simulate-svg.js';
import { retryPolicySchema } from '../../src/policy/retry-policy.js';
import { parseBreakerOptions } from '../../src/policy/breaker/breaker-options.js';
import { parseBudgetOptions } from '../../src/policy/budget/budget-options.js';
import { defaultOutageProtection } from '../../src/simulate/outage/dispatch.js';
import { simulateContention } from '../../src/simulate/contention.js';
import { simulateOutage, type OutageParams } from '../../src/simulate/outage.js';
import { repoRoot } from '../harness/child.js';
import { seed004Outage } from '../harness/outage-params.js';

/**
 * Every plot requeue draws, drawn in chromium at its shipped size and saved
 * as a PNG (test/browser/screenshots/plot-*.png, to look at): the
 * `simulate --svg` plots have no two labels overlapping and a concurrency
 * axis labelled at every decade; the dashboard's retry chart (uPlot, its
 * options as shipped) has 1-2-5 ticks in a 12 px font.
 */

const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const screenshots = join(repoRoot, 'test/browser/screenshots');

interface Box {
  text: string;
  left: number;
  top: number;
  right: number;
  bottom: number;
}

/** The visible text labels of the page's SVG, with their boxes. */
function labels(page: Page): Promise<Box[]> {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll('svg text'))
      .filter((t) => (t.textContent ?? '').trim() !== '' && getComputedStyle(t).opacity !== '0')
      .filter((t) => t.getAttribute('opacity') !== '0')
      .map((t) => {
        const r = t.getBoundingClientRect();
        return {
          text: t.textContent!,
          left: r.left,
          top: r.top,
          right: r.right,
          bottom: r.bottom,
        };
      }),
  );
}

/** Pairs of labels whose boxes overlap (by more than a pixel each way). */
function overlaps(boxes: Box[]): string[] {
  const found: string[] = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i]!;
      const b = boxes[j]!;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) found.push(`"${a.text}" × "${b.text}"`);
    }
  return found;
}

async function showSvg(page: Page, svg: string, name: string): Promise<Box[]> {
  await page.setContent(`<body style="margin:0;background:#fff">${svg}</body>`);
  await page
    .locator('svg')
    .first()
    .screenshot({ path: join(screenshots, `plot-${name}.png`) });
  return labels(page);
}

const outageParams = seed004Outage;

describe('plots in chromium, at their shipped size', () => {
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    if (!existsSync(chromiumPath))
      throw new Error(`${chromiumPath} not found: apt-get install chromium (or set CHROMIUM_PATH)`);
    await mkdir(screenshots, { recursive: true });
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu'],
    });
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  });

  afterAll(async () => {
    await browser?.close();
  });

  it('simulate --svg outage, bare and protected: row titles clear of the axis titles, concurrency labelled per decade', async () => {
    const protectedParams: OutageParams = {
      ...outageParams,
      breaker: parseBreakerOptions({}),
      budget: parseBudgetOptions({}),
      protect: defaultOutageProtection(outageParams.clients),
    };
    const results = [
      ...simulateOutage(['fixed'], outageParams),
      ...simulateOutage(['fixed'], protectedParams),
    ];
    const boxes = await showSvg(page, await outageSvg(protectedParams, results), 'outage');
    expect(overlaps(boxes)).toEqual([]);
    const texts = boxes.map((b) => b.text);
    // Fixed's bare run reaches ~74,000 in flight: every decade up to it is labelled.
    for (const tick of ['0', '10', '100', '1,000', '10,000', '100,000'])
      expect(texts.filter((t) => t === tick).length, tick).toBeGreaterThanOrEqual(2);
    expect(texts).toContain('fixed: never recovered');
    expect(texts.some((t) => t.startsWith('fixed + protect: recovered'))).toBe(true);
  });

  it('simulate --svg contention: no label overlaps another', async () => {
    const policy = retryPolicySchema.parse({ baseMs: 5, capMs: 2000 });
    const params = { clients: 100, trials: 5, seed: 7, netMeanMs: 10, netSdMs: 2, policy };
    const results = simulateContention(['exponential', 'full-jitter', 'none'], params);
    const boxes = await showSvg(page, await contentionSvg(params, results), 'contention');
    expect(overlaps(boxes)).toEqual([]);
  });

  it('the dashboard retry chart: 1-2-5 ticks on its count axis, in a 12 px font', async () => {
    const options = readFileSync(
      join(repoRoot, 'workers/service/dashboard/lib/retry-chart-options.js'),
      'utf8',
    );
    await page.setContent('<body style="margin:0;background:#fff"><div id="chart"></div></body>');
    await page.addStyleTag({ path: join(repoRoot, 'node_modules/uplot/dist/uPlot.min.css') });
    await page.addScriptTag({ path: join(repoRoot, 'node_modules/uplot/dist/uPlot.iife.min.js') });
    // The options module as shipped, as a module script of the page.
    await page.addScriptTag({
      type: 'module',
      content: `${options}\nwindow.retryChartOptions = retryChartOptions;`,
    });
    await page.waitForFunction(() => 'retryChartOptions' in window);
    await page.evaluate(() => {
      const { retryChartOptions } = window as unknown as {
        retryChartOptions: (uPlot: unknown, width: number) => unknown;
      };
      const uPlot = (window as unknown as { uPlot: new (...args: unknown[]) => unknown }).uPlot;
      const from = Date.UTC(2026, 0, 1, 12) / 1000;
      const counts = [3, 0, 12, 7, 41, 18, 0, 2, 9, 27, 5, 1];
      const times = counts.map((_, i) => from + i * 300);
      const chart = new uPlot(
        retryChartOptions(uPlot, 720),
        [times, counts],
        document.getElementById('chart'),
      ) as { axes: { _splits?: number[]; _values?: string[]; font?: string[] }[] };
      (window as unknown as { chart: unknown }).chart = chart;
    });
    // uPlot draws on the next frame: read the axis once it has.
    await page.waitForFunction(() => {
      const { chart } = window as unknown as { chart: { axes: { _splits?: number[] }[] } };
      return (chart.axes[1]!._splits?.length ?? 0) > 0;
    });
    const axis = await page.evaluate(() => {
      const { chart } = window as unknown as {
        chart: { axes: { _splits: number[]; _values: string[]; font: string[] }[] };
      };
      return { splits: chart.axes[1]!._splits, font: String(chart.axes[1]!.font[0]) };
    });
    await page.locator('#chart').screenshot({ path: join(screenshots, 'plot-retry-chart.png') });
    expect(axis.splits.length).toBeGreaterThanOrEqual(3);
    const step = axis.splits[1]! - axis.splits[0]!;
    expect([1, 2, 5, 10, 20, 50]).toContain(step);
    expect(axis.font).toMatch(/^12px/);
  });
});
