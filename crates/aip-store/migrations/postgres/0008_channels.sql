-- Conversations and channel messages (spec 15). A conversation is upserted by each message or update
-- a connector records; its promoted columns are what reads filter on (visibility: the recording
-- connector, the assignee and the contact; status). A message's (tenant, connector, delivery key)
-- is unique: that row is the durable delivery-replay claim (spec 15.3), kept as long as the message.
CREATE TABLE aip_conversations (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    recorded_by TEXT NOT NULL,
    assignee TEXT,
    contact TEXT,
    status TEXT NOT NULL,
    body JSONB NOT NULL,
    message_count BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    UNIQUE (tenant, conversation_id)
);
CREATE TABLE aip_channel_messages (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    recorded_by TEXT NOT NULL,
    delivery_key TEXT NOT NULL,
    body JSONB NOT NULL,
    created_at_ms BIGINT NOT NULL,
    UNIQUE (tenant, recorded_by, delivery_key)
);
CREATE INDEX aip_channel_messages_by_conversation ON aip_channel_messages (tenant, conversation_id, seq);
