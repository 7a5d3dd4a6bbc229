-- Escalations (spec 12.7): requests for human input, takeover or exception handling; one row each,
-- resolved at most once (compare-and-set on version). Never approvals: nothing here moves an action.
CREATE TABLE aip_escalations (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant TEXT NOT NULL,
    escalation_id TEXT NOT NULL,
    requester TEXT NOT NULL,
    kind TEXT NOT NULL,
    state TEXT NOT NULL,
    correlation_id TEXT,
    session_id TEXT,
    expires_at_ms BIGINT,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    body JSONB NOT NULL,
    resolver TEXT,
    resolution JSONB,
    UNIQUE (tenant, escalation_id)
);
CREATE INDEX aip_escalations_by_tenant ON aip_escalations (tenant, seq);
CREATE INDEX aip_escalations_by_requester ON aip_escalations (tenant, requester, seq);
