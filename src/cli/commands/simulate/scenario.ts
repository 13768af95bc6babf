/** What a scenario's run gives the command: its output, and its plot on demand. */
export interface ScenarioRun {
  output: string;
  svg: () => Promise<string>;
}

/** Rounds to `places` decimals. */
export const round = (n: number, places: number): number =>
  Math.round(n * 10 ** places) / 10 ** places;

export const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);
