// The card shapes that the API client, the sync and the database layer share (one module that
// db/ and src/sync/ both import).

/** One saved card record as the API returns it, after validation (docs/architecture.md). */
export interface SavedCard {
  id: number;
  cardToken: string;
  binNumber: string;
  cardFamily: string;
  cardBankCode: number;
  cardBankName: string;
  subscriberId: number;
  companyId: number;
  /** The original ISO 8601 string with its numeric offset. */
  createDate: string;
}

/** A token as it sits in `saved_cards`: sealed with its fingerprint, or plain (fingerprint null). */
export interface StoredToken {
  value: string;
  fingerprint: string | null;
}

/** A stored `saved_cards` row, as far as reconciling needs it. */
export interface StoredCard {
  id: number;
  subscriberId: number;
  /** `card_token` and `card_token_fingerprint`: never the token itself when sealed. */
  token: StoredToken;
  binNumber: string;
  cardFamily: string;
  cardBankCode: number;
  cardBankName: string;
  companyId: number;
  createDate: Date;
  removedAt: Date | null;
}

/** A card on its way into `saved_cards`: the record with its token in stored form. */
export interface CardToWrite extends Omit<SavedCard, 'cardToken'> {
  token: StoredToken;
}
