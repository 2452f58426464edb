-- The free-text columns of saved_cards refuse a full card number and control characters, whoever
-- writes them (issue 25): the same rule as src/card-number.ts and src/api/schema.ts, kept by the
-- database so that no other writer can store one. A card number is 13 to 19 digits passing the
-- Luhn check, in groups joined by up to three characters that are not letters or digits, or none;
-- NFKC folds fullwidth digits into ASCII first. Rows stored before this migration that hold one
-- (in the card or in the history's `previous`) have their digits masked (`VISA xxxx xxxx …`).
CREATE FUNCTION cards_sync_luhn(digits text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  total int := 0;
  d int;
  dbl boolean := false;
BEGIN
  FOR i IN REVERSE length(digits)..1 LOOP
    d := ascii(substr(digits, i, 1)) - 48;
    IF dbl THEN
      d := d * 2;
      IF d > 9 THEN d := d - 9; END IF;
    END IF;
    total := total + d;
    dbl := NOT dbl;
  END LOOP;
  RETURN total % 10 = 0;
END
$$;
--> statement-breakpoint
-- What is wrong with a free-text value (never the value itself), or null.
CREATE FUNCTION cards_sync_text_problem(value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
  folded text;
  run text;
  groups text[];
  acc text;
BEGIN
  IF value ~ '[\x01-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]' THEN
    RETURN 'a control character';
  END IF;
  folded := normalize(value, NFKC);
  IF length(regexp_replace(folded, '[^0-9]', '', 'g')) < 13 THEN
    RETURN NULL;
  END IF;
  FOR run IN SELECT m[1] FROM regexp_matches(folded, '([0-9](?:[^[:alpha:]0-9]{0,3}[0-9])*)', 'g') AS m LOOP
    groups := regexp_split_to_array(run, '[^0-9]+');
    FOR i IN 1..coalesce(array_length(groups, 1), 0) LOOP
      acc := '';
      FOR j IN i..array_length(groups, 1) LOOP
        acc := acc || groups[j];
        EXIT WHEN length(acc) > 19;
        IF length(acc) >= 13 AND cards_sync_luhn(acc) THEN
          RETURN 'a full card number';
        END IF;
      END LOOP;
    END LOOP;
  END LOOP;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE FUNCTION saved_cards_refuse_card_numbers() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
  problem text;
BEGIN
  problem := cards_sync_text_problem(NEW.card_family);
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'saved_cards.card_family of card % holds %; refused', NEW.id, problem
      USING ERRCODE = 'check_violation';
  END IF;
  problem := cards_sync_text_problem(NEW.card_bank_name);
  IF problem IS NOT NULL THEN
    RAISE EXCEPTION 'saved_cards.card_bank_name of card % holds %; refused', NEW.id, problem
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER saved_cards_free_text_check
  BEFORE INSERT OR UPDATE OF card_family, card_bank_name ON saved_cards
  FOR EACH ROW EXECUTE FUNCTION saved_cards_refuse_card_numbers();

--> statement-breakpoint
UPDATE saved_cards SET
    card_family = CASE WHEN cards_sync_text_problem(card_family) IS NOT NULL
      THEN regexp_replace(card_family, '[0-9[:cntrl:]]', 'x', 'g') ELSE card_family END,
    card_bank_name = CASE WHEN cards_sync_text_problem(card_bank_name) IS NOT NULL
      THEN regexp_replace(card_bank_name, '[0-9[:cntrl:]]', 'x', 'g') ELSE card_bank_name END
  WHERE cards_sync_text_problem(card_family) IS NOT NULL OR cards_sync_text_problem(card_bank_name) IS NOT NULL;
--> statement-breakpoint
UPDATE saved_card_changes SET previous = previous
    || CASE WHEN cards_sync_text_problem(previous->>'card_family') IS NOT NULL
      THEN jsonb_build_object('card_family', regexp_replace(previous->>'card_family', '[0-9[:cntrl:]]', 'x', 'g'))
      ELSE '{}'::jsonb END
    || CASE WHEN cards_sync_text_problem(previous->>'card_bank_name') IS NOT NULL
      THEN jsonb_build_object('card_bank_name', regexp_replace(previous->>'card_bank_name', '[0-9[:cntrl:]]', 'x', 'g'))
      ELSE '{}'::jsonb END
  WHERE previous IS NOT NULL
    AND (cards_sync_text_problem(previous->>'card_family') IS NOT NULL
      OR cards_sync_text_problem(previous->>'card_bank_name') IS NOT NULL);
