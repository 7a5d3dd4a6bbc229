-- A conversation's columns are the newest state its connector sent: `as_of_ms` is the sender's
-- time of the write that set them, so a delivery that arrives late with an older state (a retried
-- webhook, a slow connector) is recorded without rolling the conversation back.
ALTER TABLE aip_conversations ADD COLUMN as_of_ms BIGINT NOT NULL DEFAULT 0;
UPDATE aip_conversations SET as_of_ms = updated_at_ms;
