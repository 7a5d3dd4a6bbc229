-- Approval workflows (spec 12): one row per approval, created with its governed action; the keys of
-- who may decide it (the approvers' inbox index); its decisions, append-only.
CREATE TABLE aip_approvals (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    approval_id TEXT NOT NULL UNIQUE,
    tenant TEXT NOT NULL,
    action_id TEXT NOT NULL,
    capability TEXT NOT NULL,
    requester TEXT NOT NULL,
    state TEXT NOT NULL,
    policy_hash TEXT NOT NULL,
    expires_at_ms BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    request JSONB NOT NULL,
    FOREIGN KEY (tenant, action_id) REFERENCES aip_actions (tenant, action_id)
);
CREATE INDEX aip_approvals_by_tenant ON aip_approvals (tenant, seq);
CREATE INDEX aip_approvals_by_action ON aip_approvals (tenant, action_id);

CREATE TABLE aip_approval_approvers (
    approval_id TEXT NOT NULL REFERENCES aip_approvals (approval_id),
    key TEXT NOT NULL,
    PRIMARY KEY (approval_id, key)
);
CREATE INDEX aip_approval_approvers_by_key ON aip_approval_approvers (key, approval_id);

CREATE TABLE aip_approval_decisions (
    approval_id TEXT NOT NULL REFERENCES aip_approvals (approval_id),
    decision_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    approver TEXT NOT NULL,
    kind TEXT NOT NULL,
    decided_at_ms BIGINT NOT NULL,
    body JSONB NOT NULL,
    PRIMARY KEY (approval_id, decision_id)
);
CREATE TRIGGER aip_approval_decisions_append_only BEFORE UPDATE OR DELETE ON aip_approval_decisions
FOR EACH ROW EXECUTE FUNCTION aip_refuse_change();
