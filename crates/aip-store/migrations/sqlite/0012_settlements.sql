-- Settlement batches (spec 18.4): a batch and the actions it settled. An action is settled at most
-- once per tenant: the item row is the claim, written in the batch's transaction.
CREATE TABLE aip_settlement_batches (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    model TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    UNIQUE (tenant, batch_id)
);
CREATE TABLE aip_settlement_items (
    tenant TEXT NOT NULL,
    action_id TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (tenant, action_id)
);
