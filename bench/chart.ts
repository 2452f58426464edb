// A small SVG line chart for the benchmarks' reports (bench/curve.svg, bench/freshness-*.svg): no
// dependency, one file a browser or GitHub shows.

export interface Series {
  name: string;
  color: string;
  values: number[];
  /** Drawn dashed (a forecast beside its measurement, in the same colour). Default solid. */
  dashed?: boolean;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** Lines over evenly spaced x labels (the sizes double, so even spacing is a log scale). */
export function lineChart(
  title: string,
  xLabels: string[],
  yLabel: string,
  series: Series[],
  xTitle = 'subscribers synced in the run',
): string {
  const w = 720;
  const left = 70;
  const right = 170;
  const top = 50;
  // Taller only when the legend needs it, so that charts of a few series stay as they were.
  const h = Math.max(400, top + 30 + series.length * 20);
  const bottom = 60;
  const max = Math.max(...series.flatMap((s) => s.values)) * 1.25 || 1;
  const x = (i: number) => left + (i * (w - left - right)) / Math.max(1, xLabels.length - 1);
  const y = (v: number) => top + (h - top - bottom) * (1 - v / max);
  const ticks = Array.from({ length: 6 }, (_, i) => (max * i) / 5);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" font-family="sans-serif" font-size="12">`,
    `<title>${esc(title)}</title>`,
    `<rect width="${w}" height="${h}" fill="white"/>`,
    `<text x="${w / 2}" y="24" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  for (const t of ticks) {
    out.push(
      `<line x1="${left}" x2="${w - right}" y1="${y(t)}" y2="${y(t)}" stroke="#ddd"/>`,
      `<text x="${left - 8}" y="${y(t) + 4}" text-anchor="end">${t.toFixed(t < 10 ? 2 : 0)}</text>`,
    );
  }
  xLabels.forEach((label, i) => {
    out.push(`<text x="${x(i)}" y="${h - bottom + 20}" text-anchor="middle">${esc(label)}</text>`);
  });
  out.push(
    `<text x="${(left + w - right) / 2}" y="${h - 15}" text-anchor="middle">${esc(xTitle)}</text>`,
    `<text transform="translate(18 ${(top + h - bottom) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`,
  );
  series.forEach((s, k) => {
    const points = s.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    out.push(`<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    s.values.forEach((v, i) => {
      out.push(`<circle cx="${x(i)}" cy="${y(v)}" r="3.5" fill="${s.color}"/>`);
    });
    const ly = top + 10 + k * 20;
    out.push(
      `<line x1="${w - right + 15}" x2="${w - right + 35}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`,
      `<text x="${w - right + 40}" y="${ly + 4}">${esc(s.name)}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
