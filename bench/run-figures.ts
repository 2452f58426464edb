// How bench/run.ts rounds its figures and takes their median over rounds.

/** `x` rounded to `d` decimals. */
export const round = (x: number, d = 0) => Math.round(x * 10 ** d) / 10 ** d;

/** The median of the numbers among `xs`; null if there are none. */
export function median(xs: readonly (number | null | undefined)[]): number | null {
  const ys = xs.filter((x): x is number => typeof x === 'number').sort((x, y) => x - y);
  if (ys.length === 0) return null;
  const mid = Math.floor(ys.length / 2);
  return ys.length % 2 === 1 ? ys[mid]! : round((ys[mid - 1]! + ys[mid]!) / 2, 3);
}
