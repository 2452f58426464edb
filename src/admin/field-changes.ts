import type { SubscriberPageData } from '../../db/admin/index.js';

// A history row says which columns changed and, in `previous`, from what. What each became is the
// `previous` of the card's next change of that column, or the card's value now when none followed.

type Change = SubscriberPageData['changes'][number];
type Card = SubscriberPageData['cards'][number];

const camel = (column: string) => column.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

function shown(value: unknown): string {
  if (value === null || value === undefined) return '∅';
  if (value instanceof Date) return value.toISOString();
  return String(value);
}

/** For each change (by id), its fields as `column: old → new` (the token only as "changed"). */
export function fieldChanges(changes: readonly Change[], cards: readonly Card[]): Map<number, string[]> {
  const now = new Map(cards.map((c) => [c.id, c as Record<string, unknown>]));
  const out = new Map<number, string[]>();
  // Newest first, so that "what came next" is what was seen just before.
  const next = new Map<string, unknown>();
  const ordered = [...changes].sort((a, b) => b.changedAt.getTime() - a.changedAt.getTime() || b.id - a.id);
  for (const h of ordered) {
    const lines: string[] = [];
    for (const field of h.changedFields ?? []) {
      const key = `${h.cardId}:${field}`;
      if (field === 'card_token') {
        lines.push('card_token: changed');
        continue;
      }
      const before = h.previous?.[field];
      const after = next.has(key) ? next.get(key) : now.get(h.cardId)?.[camel(field)];
      // History from before migration 0008 has no `previous`: which column, not from what.
      lines.push(h.previous ? `${field}: ${shown(before)} → ${shown(after)}` : field);
      if (h.previous) next.set(key, before);
    }
    out.set(h.id, lines);
  }
  return out;
}
