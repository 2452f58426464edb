// The change events' types (docs/events.md): what `change_events.type` allows, apart from the table
// so that a command's `--types` is checked without loading the schema's driver.

export const CHANGE_EVENT_TYPES = [
  'card.added',
  'card.changed',
  'card.removed',
  'card.restored',
  'card.conflict',
] as const;
export type ChangeEventType = (typeof CHANGE_EVENT_TYPES)[number];
